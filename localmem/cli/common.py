"""Helpers every command module of the CLI shares: opening the store, printing JSON.

Invariant: commands open the store only through ``localmem.memory.open_store`` (re-exported
here) and resolve the model through ``localmem.memory.generator``: the same path as
``localmem.open()`` and the MCP server, so all three agree on embedder and settings.
Commands that write open it with ``open_patient``: a write that meets another process's
lock waits for it (saying so once per wait on stderr) instead of failing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TypeAlias

from localmem.config import Settings
from localmem.memory import generator, open_store
from localmem.storage.retry import WAITING, Patience, patiently
from localmem.storage.store import Store

# a string: argparse's _SubParsersAction is generic only in the type stubs
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

__all__ = ["Subparsers", "generator", "open_patient", "open_store", "print_json", "say_waiting"]


def say_waiting() -> None:
    print(f"localmem: {WAITING}", file=sys.stderr, flush=True)


def open_patient(settings: Settings, *, rebind: bool = False) -> Store:
    """``open_store`` for a command that writes: it, and every write of the store it
    returns, wait out another process's write lock with back-off, however long."""
    store = patiently(lambda: open_store(settings, rebind=rebind), say_waiting)
    store.patience = Patience(say_waiting)
    return store


def print_json(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False))
