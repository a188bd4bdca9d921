"""Packaged for the ecosystem: the wheel carries everything (migrations, packaged data) and
runs ``localmem demo`` from its own files; ``packaging/server.json`` is valid against the
MCP Registry's published schema (``packaging/server.schema.json``, a byte-for-byte copy:
no network at test time) and agrees with ``pyproject.toml``; the MCP Bundle built by
``just bundle`` passes ``mcpb validate``, ships only project files, and its server starts
from the manifest's own command in a clean folder and lists its tools to the Python SDK's
client."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
SCHEMA_SHA256 = "3fba09590c99f61735d234822279f4223fab9e300c0a81e81c91ab62a4114de0"
SCHEMA_URL = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
BIN = Path(sys.executable).parent


def tool(name: str) -> str | None:
    """A command from this environment's bin folder (uv is a dev dependency), else PATH."""
    here = BIN / name
    return str(here) if here.exists() else shutil.which(name)


def server_json() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((PACKAGING / "server.json").read_text("utf-8"))
    return data


def registry_schema() -> dict[str, Any]:
    raw = (PACKAGING / "server.schema.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SCHEMA_SHA256, "server.schema.json is not the published 2025-12-11 file"
    schema: dict[str, Any] = json.loads(raw)
    return schema


def test_server_json_is_valid_against_the_registry_schema() -> None:
    schema = registry_schema()
    assert schema["$id"] == SCHEMA_URL
    validator = jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)
    entry = server_json()
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(entry)]
    assert errors == []
    assert entry["$schema"] == SCHEMA_URL
    # the validation is live: what the registry refuses, this refuses too
    for broken in ({"description": "x" * 101}, {"name": "no-slash"}, {"version": None}):
        bad = {**copy.deepcopy(entry), **broken}
        assert not validator.is_valid(bad), broken
    bad = copy.deepcopy(entry)
    bad["packages"][0]["version"] = "latest"
    assert not validator.is_valid(bad)


def test_server_json_agrees_with_the_package() -> None:
    entry = server_json()
    (pkg,) = entry["packages"]
    assert entry["version"] == pkg["version"] == PROJECT["version"]
    assert pkg["registryType"] == "pypi" and pkg["identifier"] == PROJECT["name"]
    assert pkg["runtimeHint"] == "uvx" and pkg["transport"] == {"type": "stdio"}
    # `uvx localmem serve`: the package's `localmem` script with the `serve` command
    assert "localmem" in PROJECT["scripts"] and [a.get("value") for a in pkg["packageArguments"]] == ["serve"]
    assert {v["name"] for v in pkg["environmentVariables"]} == {"LOCALMEM_DB", "LOCALMEM_MODEL"}
    # the registry checks ownership of a PyPI package by this line in its description (the README)
    assert f"mcp-name: {entry['name']}" in (ROOT / "README.md").read_text("utf-8")


def build_wheel(out: Path) -> Path:
    uv = tool("uv")
    if uv is not None:
        subprocess.run([uv, "build", "--wheel", "--out-dir", str(out), str(ROOT)], check=True, capture_output=True)
    else:
        subprocess.run(
            [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(out), str(ROOT)],
            check=True,
            capture_output=True,
        )
    (wheel,) = out.glob("localmem-*.whl")
    return wheel


def test_the_wheel_carries_everything_and_runs_the_demo_from_its_own_files(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path / "dist")
    names = set(zipfile.ZipFile(wheel).namelist())
    migrations = sorted(p.name for p in (ROOT / "migrations").iterdir() if p.suffix == ".sql")
    root = ROOT / "localmem" / "data"
    data = sorted(
        p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    )
    assert migrations and {f"localmem/migrations/{m}" for m in migrations} <= names
    assert data and {f"localmem/data/{d}" for d in data} <= names
    assert "mcp_server/serve.py" in names and not any(n.startswith("tests/") for n in names)
    trained = "localmem/data/embedders/localmem-chat-minilm-l6/"  # the default embedder, with its scorer
    assert {trained + f for f in ("model.onnx", "tokenizer.json", "embedder.json", "scorer.json")} <= names
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )
    # only the wheel's copy of localmem can be imported: not this checkout (not on the path,
    # not the working folder); its dependencies come from this environment
    e = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    e["PYTHONPATH"] = str(site)
    clean = tmp_path / "clean"
    clean.mkdir()
    where = subprocess.run(
        [sys.executable, "-c", "import localmem, mcp_server; print(localmem.__file__, mcp_server.__file__)"],
        capture_output=True,
        text=True,
        env=e,
        cwd=clean,
        check=True,
    )
    assert all(p.startswith(str(site)) for p in where.stdout.split()), where.stdout
    demo = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(tmp_path / "demo.db"), "demo"],
        capture_output=True,
        text=True,
        env=e,
        cwd=clean,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr
    assert "Brooks Ghost" in demo.stdout


def mcpb() -> str | None:
    local = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mcpb"
    found = os.environ.get("LOCALMEM_MCPB") or (str(local) if local.exists() else shutil.which("mcpb"))
    return found if found and Path(found).exists() else None


needs_mcpb = pytest.mark.skipif(
    (mcpb() is None or tool("uv") is None) and not os.environ.get("CI"),
    reason="@anthropic-ai/mcpb (npm install --prefix .ci/node, as .ci/run does) or uv not installed",
)


def substitute(value: str, values: dict[str, str]) -> str:
    for key, v in values.items():
        value = value.replace("${" + key + "}", v)
    return value


@needs_mcpb
@pytest.mark.anyio
async def test_the_bundle_validates_and_its_own_command_serves_in_a_clean_folder(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(PACKAGING / "build_bundle.py"),
            "--out",
            str(tmp_path / "dist"),
            "--stage",
            str(tmp_path / "stage"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    bundle = Path(out.stdout.strip().splitlines()[-1])
    assert bundle.name == f"localmem-{PROJECT['version']}.mcpb" and bundle.is_file()
    again = subprocess.run(
        [str(mcpb()), "validate", str(tmp_path / "stage" / "manifest.json")], capture_output=True, text=True
    )
    assert again.returncode == 0, again.stdout + again.stderr

    folder = tmp_path / "installed"  # as a host unpacks it: a clean folder, nothing of this checkout
    with zipfile.ZipFile(bundle) as z:
        names = z.namelist()
        z.extractall(folder)
    top = {n.split("/")[0] for n in names}
    assert top == {
        "manifest.json",
        "pyproject.toml",
        "uv.lock",
        "README.md",
        "localmem",
        "mcp_server",
        "migrations",
        "server",
    }
    assert not any("__pycache__" in n or n.endswith((".pyc", ".db")) for n in names)
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    assert manifest["server"]["type"] == "uv" and manifest["version"] == PROJECT["version"]
    assert set(manifest["user_config"]) == {"db_path", "model_path"}
    assert all(f["type"] == "file" and not f["required"] for f in manifest["user_config"].values())

    db = tmp_path / "chosen" / "memory.db"
    db.parent.mkdir()
    values = {"__dirname": str(folder), "user_config.db_path": str(db), "user_config.model_path": ""}
    cfg = manifest["server"]["mcp_config"]
    command = tool(cfg["command"]) if cfg["command"] == "uv" else cfg["command"]
    assert command is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LOCALMEM_", "VIRTUAL_ENV", "UV_"))}
    env.update({k: substitute(v, values) for k, v in cfg.get("env", {}).items()})
    env["UV_PYTHON"] = sys.executable  # no Python download; uv still makes the bundle's own environment
    env["UV_CACHE_DIR"] = str(Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "uv")  # HOME is a test's
    params = StdioServerParameters(
        command=command, args=[substitute(a, values) for a in cfg["args"]], env=env, cwd=str(tmp_path)
    )
    async with Client(params, read_timeout_seconds=600) as c:
        listed = [t.name for t in (await c.list_tools()).tools]
        res = await c.call_tool("remember", {"turns": [{"text": "The bundle remembers the blue kettle."}]})
        assert not res.is_error, res.content
        # the bundle's server (localmem serve) answers `localmem recall` through the fast
        # entry: the command line is answered before the full CLI is imported
        recall = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "localmem", "--db", str(db), "recall", "--json"],
            input=json.dumps({"prompt": "What does the bundle remember?"}),
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert recall.returncode == 0, recall.stderr
        assert json.loads(recall.stdout)["via"] == "resident"
        assert not [line for line in recall.stderr.splitlines() if line.rstrip().endswith("| localmem.cli")]
    # no model configured: every tool but answer, in the manifest's order
    assert listed == [t["name"] for t in manifest["tools"] if t["name"] != "answer"]
    assert db.is_file()  # the user's database field reached the server
    assert (folder / ".venv").is_dir()  # uv made the bundle's own environment, from its uv.lock


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.skipif(tool("uv") is None, reason="uv not installed (a dev dependency)")
@pytest.mark.parametrize(("name", "extras"), [("default.txt", []), ("test.txt", ["--extra", "dev", "--extra", "llm"])])
def test_the_exported_requirements_agree_with_uv_lock(name: str, extras: list[str]) -> None:
    """requirements/*.txt are what `just export-lock` writes from uv.lock, so pip installs
    exactly the locked versions (`just lock` / `just relock` keep them together)."""
    args = ["export", "--frozen", "--quiet", "--no-header", "--format", "requirements-txt", "--no-emit-project"]
    out = subprocess.run(
        [str(tool("uv")), *args, "--no-dev", *extras], capture_output=True, text=True, cwd=ROOT, check=True
    )
    committed = (ROOT / "requirements" / name).read_text("utf-8").splitlines()
    assert committed[0].startswith("# This file was autogenerated by uv")
    assert [line for line in committed if not line.startswith("#  ") and not line.startswith("# This")] == [
        line for line in out.stdout.splitlines() if not line.startswith("#  ")
    ]
