"""``localmem.open()`` and the CLI open the same store the same way: the same database
path (``LOCALMEM_DB`` over the config file), the same embedder (``LOCALMEM_EMBEDDER``,
resolved by ``localmem.models.registry``), the same settings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import localmem
from localmem.cli import main
from localmem.config import Settings, load_settings
from localmem.errors import ConfigError
from localmem.models import registry
from localmem.models.embedding import Embedder, OnnxMiniLM, _packaged_onnx
from localmem.records import TurnIn
from tests.helpers.fakes import HashEmbedder

CONFIG = """\
db = "{db}"
budget_tokens = 1500
[retrieval]
cable_tau = 0.4
candidates = 12
[cable]
enabled = true
kb = 4
"""


class Opened:
    """What each open asked the registry for: the settings and the embedder spec."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.settings: list[Settings] = []
        self.specs: list[str] = []
        real_embedder_for = registry.embedder_for

        def embedder_for(settings: Settings) -> Embedder:
            self.settings.append(settings)
            return real_embedder_for(settings)

        def default_embedder(spec: str = "default") -> Embedder:  # the model boundary only
            self.specs.append(spec)
            return HashEmbedder(64, model_id=f"hash:{spec}")

        monkeypatch.setattr(registry, "embedder_for", embedder_for)
        monkeypatch.setattr(registry, "default_embedder", default_embedder)


def stats_json(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main([*extra, "stats", "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_open_and_cli_agree_in_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(CONFIG.format(db=tmp_path / "from-file.db"), "utf-8")
    monkeypatch.setenv("LOCALMEM_CONFIG", str(cfg))
    monkeypatch.setenv("LOCALMEM_EMBEDDER", "/models/other-embedder.gguf")
    opened = Opened(monkeypatch)

    # the config file's db, the environment's embedder
    with localmem.open() as mem:
        assert mem.path == tmp_path / "from-file.db"
        assert mem.store.embedder.model_id == "hash:/models/other-embedder.gguf"
        mem.write([TurnIn(text="I planted tomatoes in the garden.", speaker="Ana")], session="s1")
        api_settings = mem.settings
    got = stats_json(capsys)
    assert got["db"] == str(tmp_path / "from-file.db")
    assert got["embedder"] == "hash:/models/other-embedder.gguf" and got["turns"] == 1
    assert got["enrichment"]["antecedent"]["construction_enabled"] is True  # the file's [cable] enabled
    assert opened.specs == ["/models/other-embedder.gguf"] * 2
    assert opened.settings == [api_settings, api_settings] == [load_settings()] * 2
    assert (api_settings.budget_tokens, api_settings.retrieval.cable_tau, api_settings.cable.kb) == (1500, 0.4, 4)

    # LOCALMEM_DB wins over the file, for both
    monkeypatch.setenv("LOCALMEM_DB", str(tmp_path / "from-env.db"))
    with localmem.open() as mem:
        assert mem.path == tmp_path / "from-env.db"
        mem.write([TurnIn(text="The bike chain broke.", speaker="Ben")], session="s2")
        mem.write([TurnIn(text="I took it to the shop.", speaker="Ben")], session="s2")
        api_settings = mem.settings
    got = stats_json(capsys)
    assert (got["db"], got["turns"]) == (str(tmp_path / "from-env.db"), 2)
    assert opened.settings[-2:] == [api_settings, api_settings]

    # an explicit path / flag wins over both, and means the same thing in both
    with localmem.open(tmp_path / "explicit.db") as mem:
        mem.write([TurnIn(text="Explicit.", speaker="Cy")], session="s3")
    got = stats_json(capsys, "--db", str(tmp_path / "explicit.db"))
    assert (got["db"], got["turns"]) == (str(tmp_path / "explicit.db"), 1)
    assert opened.settings[-1] == opened.settings[-2]
    assert opened.specs == ["/models/other-embedder.gguf"] * 6


def test_a_bad_setting_fails_both_the_same_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(f'db = "{tmp_path / "m.db"}"\n[retrieval]\ncandidates = "many"\n', "utf-8")
    monkeypatch.setenv("LOCALMEM_CONFIG", str(cfg))
    with pytest.raises(ConfigError) as info:
        localmem.open()
    assert main(["stats", "--json"]) == ConfigError.exit_code
    assert capsys.readouterr().err.strip() == f"localmem: error: {info.value}"


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``localmem`` command (its console script), in a process of its own."""
    exe = Path(sys.executable).with_name("localmem")
    cmd = [str(exe)] if exe.is_file() else [sys.executable, "-m", "localmem.cli"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120, env=dict(os.environ))


def test_cli_subprocess_opens_what_open_opened(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real ``localmem stats --json`` process reads the store localmem.open() made, with
    the embedder LOCALMEM_EMBEDDER names (the packaged MiniLM, by its file path)."""
    onnx = _packaged_onnx()
    db = tmp_path / "mem.db"
    monkeypatch.setenv("LOCALMEM_DB", str(db))
    monkeypatch.setenv("LOCALMEM_EMBEDDER", str(onnx))
    monkeypatch.setenv("LOCALMEM_CABLE_ENABLED", "true")
    with localmem.open() as mem:
        assert isinstance(mem.store.embedder, OnnxMiniLM)
        assert mem.store.embedder._model_path == onnx
        mem.write([TurnIn(text="We moved to Lisbon in May.", speaker="Ana")], session="s1")
        assert mem.settings.cable.enabled is True
    proc = run_cli("stats", "--json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["db"] == str(db) and got["turns"] == 1
    assert (got["embedder"], got["embedder_dim"]) == (OnnxMiniLM.model_id, OnnxMiniLM.dim)
    assert got["enrichment"]["antecedent"]["construction_enabled"] is True

    # the variable is honoured by both: a missing model file is the same error in both
    missing = tmp_path / "no-such-embedder.gguf"
    monkeypatch.setenv("LOCALMEM_EMBEDDER", str(missing))
    with pytest.raises(ConfigError) as info:
        localmem.open()
    proc = run_cli("stats", "--json")
    assert proc.returncode == ConfigError.exit_code
    assert proc.stderr.strip() == f"localmem: error: {info.value}"
    assert str(missing) in proc.stderr
