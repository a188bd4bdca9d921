"""The default install, without the ``llm`` extra: llama-cpp-python made unimportable in
real subprocesses (a ``sitecustomize`` that refuses to find ``llama_cpp``, as on a machine
where it was never installed). Everything model-free works (ingest, query, stats, doctor,
the MCP server's tools), and every entry point of the model layer (doctor, stats, the
worker, answer, the server's answer tool) says that it is not installed and how to add it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from localmem.models.llm import NOT_INSTALLED

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "localmem" / "data" / "sample_conversation.jsonl"
HINT = "pip install llama-cpp-python"

_BLOCKER = '''
import sys

class _NoLlama:
    """As if llama-cpp-python were not installed: the import and find_spec both fail."""
    def find_spec(self, name, path=None, target=None):
        if name == "llama_cpp" or name.startswith("llama_cpp."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoLlama())
'''


@pytest.fixture
def lean_env(tmp_path: Path) -> dict[str, str]:
    blocker = tmp_path / "no-llama"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(_BLOCKER, "utf-8")
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join([str(blocker), str(ROOT), e.get("PYTHONPATH", "")])
    e.pop("LOCALMEM_MODEL", None)
    return e


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", *args], capture_output=True, text=True, timeout=300, env=env, cwd=ROOT
    )


def says_not_installed(text: str) -> bool:
    return "the model layer is not installed" in text and HINT in text and "'.[llm]'" in text


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    path = tmp_path / "some-model.gguf"  # never loaded: the missing llama.cpp is found first
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def test_the_blocker_really_hides_llama_cpp(lean_env: dict[str, str]) -> None:
    code = "import importlib.util as u, localmem.models.llm as m; print(m.model_layer_installed())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=lean_env, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
    imp = subprocess.run([sys.executable, "-c", "import llama_cpp"], capture_output=True, text=True, env=lean_env)
    assert imp.returncode != 0 and "No module named 'llama_cpp'" in imp.stderr


def test_model_free_commands_work_and_model_commands_say_not_installed(
    tmp_path: Path, lean_env: dict[str, str], model_file: Path
) -> None:
    db = str(tmp_path / "m.db")
    ingest = cli(lean_env, "--db", db, "ingest", str(SAMPLE), "--json")
    assert ingest.returncode == 0, ingest.stderr
    assert json.loads(ingest.stdout)["new"] > 20
    query = cli(lean_env, "--db", db, "query", "Which shoes did Maya switch to?", "--json")
    assert query.returncode == 0 and any("Brooks Ghost" in t["text"] for t in json.loads(query.stdout)["turns"])

    stats = cli(lean_env, "--db", db, "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    layer = json.loads(stats.stdout)["model_layer"]
    assert layer["installed"] is False and says_not_installed(layer["detail"])
    assert says_not_installed(cli(lean_env, "--db", db, "stats").stdout)

    doctor = cli(lean_env, "--db", db, "doctor", "--json")
    assert doctor.returncode == 0, doctor.stdout  # no model configured: a warning, not a failure
    checks = {c["name"]: c for c in json.loads(doctor.stdout)}
    assert checks["model"]["ok"] and checks["model"]["warn"] and says_not_installed(checks["model"]["detail"])
    assert checks["storage"]["ok"] and checks["embedder"]["ok"] and checks["database"]["ok"]
    configured = cli(lean_env, "--db", db, "doctor", "--json", "--model", str(model_file))
    assert configured.returncode == 1  # a model is configured that cannot run: a failure
    model = next(c for c in json.loads(configured.stdout) if c["name"] == "model")
    assert not model["ok"] and str(model_file) in model["detail"] and says_not_installed(model["detail"])

    before = json.loads(cli(lean_env, "--db", db, "stats", "--json").stdout)
    for args in (
        ["answer", "Which shoes did Maya switch to?"],
        ["answer", "Which shoes did Maya switch to?", "--model", str(model_file)],
        ["explore", "Which shoes did Maya switch to?", "--model", str(model_file)],
        ["worker", "--once", "--model", str(model_file)],
        ["enrich", "--model", str(model_file)],
    ):
        proc = cli(lean_env, "--db", db, *args)
        assert proc.returncode != 0, args
        assert says_not_installed(proc.stderr), (args, proc.stderr)
        assert "Traceback" not in proc.stderr, proc.stderr
    after = json.loads(cli(lean_env, "--db", db, "stats", "--json").stdout)
    assert after["enrichment"]["jobs"] == before["enrichment"]["jobs"]  # the worker claimed nothing
    assert NOT_INSTALLED.startswith("the model layer is not installed")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_mcp_server_runs_without_the_model_layer(
    tmp_path: Path, lean_env: dict[str, str], model_file: Path
) -> None:
    """Even with a model configured, the server starts and serves every model-free tool;
    its answer tool says what is missing (its background worker logs the same)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_server", "--db", str(tmp_path / "mem.db"), "--model", str(model_file)],
        env=lean_env,
        cwd=str(ROOT),
    )
    async with Client(params, read_timeout_seconds=60) as c:
        names = {t.name for t in (await c.list_tools()).tools}
        assert {"remember", "reconstruct", "forget", "memory_stats", "answer"} <= names
        out = await c.call_tool("remember", {"turns": [{"text": "The spare key is under the blue pot."}]})
        assert not out.is_error and out.structured_content and out.structured_content["new_turns"] == 1
        ctx = await c.call_tool("reconstruct", {"query": "where is the spare key"})
        assert not ctx.is_error and ctx.structured_content and "blue pot" in ctx.structured_content["text"]
        ans = await c.call_tool("answer", {"question": "Where is the spare key?"})
        assert ans.is_error
        assert says_not_installed(" ".join(getattr(b, "text", "") for b in ans.content)), ans.content
