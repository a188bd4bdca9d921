"""The MCP Bundle's entry point: localmem's MCP server over stdio, run by ``uv`` in the
bundle's folder (``uv run --directory <bundle> --frozen server/main.py``). It runs
``localmem [--db DB] serve [--model M]``, as ``localmem mcp-config`` entries do, so the
server also answers a ``localmem query`` or an agent's hook over its socket.

The host passes the user's settings from the manifest's ``user_config`` as
``LOCALMEM_BUNDLE_DB`` and ``LOCALMEM_BUNDLE_MODEL``. A field left empty (or a host that
leaves the ``${user_config.*}`` placeholder as it is) means "not set": localmem's own
default database in the user data folder, and no model (no answer tool, no background
enrichment). Any other ``LOCALMEM_*`` setting in the environment applies as usual.
"""

from __future__ import annotations

import os
import sys

from localmem.cli import main


def _setting(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return None if not value or value.startswith("${") else value


def argv() -> list[str]:
    args: list[str] = []
    db = _setting("LOCALMEM_BUNDLE_DB")
    if db:
        args += ["--db", db]
    args.append("serve")
    model = _setting("LOCALMEM_BUNDLE_MODEL")
    if model:
        args += ["--model", model]
    return args


if __name__ == "__main__":
    sys.exit(main(argv()))
