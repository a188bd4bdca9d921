"""A check, for the tests and for anyone chasing a lost write: no Python ``open`` of a
file that one of this process's SQLite connections has open.

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's
included (``storage.engine.fileread`` says why that destroys a store). With
``$LOCALMEM_OPEN_GUARD`` naming a file, every localmem process installs an audit hook
(PEP 578) on its first use of the storage engine; the hook sees each ``open`` made through
Python (``open``, ``io.open``, ``os.open``, ``pathlib``, ``shutil``…) and, when the file is
the database, ``-wal``, ``-shm`` or ``-journal`` of a connection open in this process
(``apsw.connections()``), and localmem's code made the open (a frame of ``localmem`` or
``mcp_server`` on the stack: a test reading a file's raw bytes is not the product), appends one line (pid, file, the calling frames) to that file and
makes the open fail. The test suite sets the variable for itself and every process it
starts, and fails a test that left a line (tests/conftest.py).

Invariants: off (nothing installed, nothing paid) unless the variable is set; the hook never
raises for a file that is not a live store's; it cannot be removed once installed (audit
hooks cannot), so it is installed at most once per process.
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any

from localmem.storage.engine import fileread

ENV = "LOCALMEM_OPEN_GUARD"
_installed = False
# the packages' folders: engine -> storage -> localmem -> the folder that holds both
_ROOTS = tuple(str(Path(__file__).resolve().parents[3] / name) + os.sep for name in ("localmem", "mcp_server"))
_SELF = str(Path(__file__).resolve())
_busy = threading.local()  # the hook's own writes are opens too


class StoreFileOpened(RuntimeError):
    """A Python open of a file a connection of this process holds (module docstring)."""


def install() -> bool:
    """Install the hook when ``$LOCALMEM_OPEN_GUARD`` is set; True when it is (now or before)."""
    global _installed
    if _installed:
        return True
    log = os.environ.get(ENV)
    if not log:
        return False
    sys.addaudithook(lambda event, args: _hook(event, args, log))
    _installed = True
    return True


def _hook(event: str, args: tuple[Any, ...], log: str) -> None:
    if event != "open" or getattr(_busy, "on", False):
        return
    target = args[0] if args else None
    if not isinstance(target, (str, bytes, os.PathLike)):
        return  # a descriptor already open (os.fdopen, open(fd)): nothing new is opened
    if _exclusive(args):
        return  # O_EXCL: fails on any existing file, so no descriptor of a held one is made
    if not _ours(sys._getframe(1)):
        return
    _busy.on = True
    try:
        name = fileread.held(os.fsdecode(target))  # a file being created cannot be one a connection holds
        if name is None:
            return
        frames = "".join(traceback.format_stack(limit=12)[:-2])
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"pid {os.getpid()} opened {os.fsdecode(target)} (held as {name}) at:\n{frames}\n")
    finally:
        _busy.on = False
    raise StoreFileOpened(f"{os.fsdecode(target)} is open in an SQLite connection of this process ({ENV})")


def _ours(frame: Any) -> bool:
    """Whether localmem's own code is on the stack from ``frame`` up (not the hook's module)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith(_ROOTS) and name != _SELF:
            return True
        frame = frame.f_back
    return False


def _exclusive(args: tuple[Any, ...]) -> bool:
    """Whether the open creates its file exclusively (``os.open``'s O_CREAT|O_EXCL, mode "x")."""
    mode, flags = (*args, None, None)[1:3]
    excl = os.O_CREAT | os.O_EXCL
    return (isinstance(flags, int) and flags & excl == excl) or (isinstance(mode, str) and "x" in mode)
