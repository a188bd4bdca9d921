"""Build localmem's MCP Bundle (``.mcpb``, a ``uv``-type bundle): ``just bundle``.

A ``uv`` bundle ships only the project's files; the host (Claude Desktop) runs the
manifest's command, ``uv run --directory <bundle> --frozen server/main.py``, which
installs the locked dependencies (``uv.lock``) into the bundle's own environment on first
start. So the bundle holds exactly: ``manifest.json``, ``pyproject.toml``, ``uv.lock``,
``README.md``, the packages ``localmem/`` and ``mcp_server/``, ``migrations/`` and the
entry point ``server/main.py`` (no tests, docs, virtual environment or caches).

The manifest is ``packaging/bundle/manifest.json`` with two fields filled here so that
they cannot drift: ``version`` from ``pyproject.toml`` and ``tools`` from the server's own
tool list. The staged folder is checked with ``mcpb validate`` and packed with ``mcpb
pack`` (npm ``@anthropic-ai/mcpb``: ``$LOCALMEM_MCPB``, else ``.ci/node``, where
``.ci/run`` installs it, else on PATH).

    python packaging/build_bundle.py [--out dist] [--stage build/bundle]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "packaging" / "bundle"
FILES = ["pyproject.toml", "uv.lock", "README.md"]
TREES = ["localmem", "mcp_server", "migrations"]
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.db", "*.db-wal", "*.db-shm")


def mcpb() -> str:
    local = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mcpb"
    found = os.environ.get("LOCALMEM_MCPB") or (str(local) if local.exists() else shutil.which("mcpb"))
    if not found:
        raise SystemExit(
            "mcpb not found: `npm install --prefix .ci/node @anthropic-ai/mcpb@2.1.2` (as .ci/run does), "
            "or set LOCALMEM_MCPB"
        )
    return found


def manifest() -> dict[str, object]:
    sys.path.insert(0, str(ROOT))
    from localmem.config import Settings  # the tool list as the server builds it
    from mcp_server.tools import build

    data: dict[str, object] = json.loads((HERE / "manifest.json").read_text("utf-8"))
    data["version"] = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["version"]
    data["tools"] = [
        {"name": fn.__name__, "description": " ".join(text.split())[:300]}
        for fn, text in build(Settings(), answering=True)
    ]
    return data


def stage(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    for name in FILES:
        shutil.copy2(ROOT / name, folder / name)
    for name in TREES:
        shutil.copytree(ROOT / name, folder / name, ignore=IGNORE)
    (folder / "server").mkdir()
    shutil.copy2(HERE / "server" / "main.py", folder / "server" / "main.py")
    (folder / "manifest.json").write_text(json.dumps(manifest(), indent=2) + "\n", "utf-8")
    return folder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Build and validate localmem's .mcpb bundle.")
    p.add_argument("--out", type=Path, default=ROOT / "dist", help="folder for the .mcpb (default dist/)")
    p.add_argument("--stage", type=Path, default=ROOT / "build" / "bundle", help="staging folder (replaced)")
    args = p.parse_args(argv)
    tool = mcpb()
    folder = stage(args.stage.resolve())
    subprocess.run([tool, "validate", str(folder / "manifest.json")], check=True)
    version = json.loads((folder / "manifest.json").read_text("utf-8"))["version"]
    args.out.mkdir(parents=True, exist_ok=True)
    target = (args.out / f"localmem-{version}.mcpb").resolve()
    subprocess.run([tool, "pack", str(folder), str(target)], check=True)
    print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
