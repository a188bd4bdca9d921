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
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, TypeAlias

from localmem.config import Settings
from localmem.errors import InputError
from localmem.memory import generator, open_store
from localmem.storage.engine.retry import WAITING, Patience, patiently
from localmem.storage.write.store import Store

# a string: argparse's _SubParsersAction is generic only in the type stubs
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"

__all__ = ["Subparsers", "generator", "open_patient", "open_store", "print_json", "print_result", "say_waiting"]


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


def print_result(table: str, result: Any, as_json: bool) -> None:
    """A benchmark's table on stdout and, with ``--json``, its result as one JSON line
    (the last line, for scripts)."""
    print(table)
    if as_json:
        print(json.dumps(result))


@contextmanager
def interrupts() -> Iterator[None]:
    """SIGTERM and SIGINT both end the work inside as Ctrl-C does (KeyboardInterrupt:
    the batch in progress rolls back, a child is stopped cleanly), instead of a kill
    without a word. SIGINT is set explicitly: a process started in the background by a
    non-interactive shell inherits it ignored, and would otherwise not stop on it."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def positive_ints(text: str, what: str) -> list[int]:
    """The comma-separated positive integers of an option's value (``what``: its name, for the error)."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not values or any(v <= 0 for v in values):
        raise InputError(f"{what} must be positive integers, got {text!r}")
    return values
