"""Helpers every command module of the CLI shares: opening the store, printing JSON.

Invariant: commands open the store only through ``localmem.memory.open_store`` (re-exported
here) and resolve the model through ``localmem.memory.generator``: the same path as
``localmem.open()`` and the MCP server, so all three agree on embedder and settings.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TypeAlias

from localmem.memory import generator, open_store

# a string: argparse's _SubParsersAction is generic only in the type stubs
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

__all__ = ["Subparsers", "generator", "open_store", "print_json"]


def print_json(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False))
