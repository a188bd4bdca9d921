"""Whether the file at a store's path is still the one this process's connection opened.

A store can be replaced under a process that holds it: renamed over (``mv``, a restore by
another tool, a sync client) or rewritten in place (``cp backup.db memory.db`` keeps the
inode). The connection goes on reading its own ``-wal`` and ``-shm`` over pages that are no
longer there, and when it closes as the last connection it checkpoints its frames into
whatever file is at the path now and deletes the ``-wal`` by name: the replacement is
damaged and its own recent turns are lost. So a process checks before it serves and before
it closes, and a replaced store is closed without a checkpoint
(``SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE``).

How a replacement shows:
- by rename: the path names another inode (``os.stat``, which opens nothing);
- in place: every store carries a random ``application_id`` in its header (``stamp``, set
  once), and every copy localmem makes (a backup, a restore) gets a new one
  (``new_nonce``). The header's raw bytes, read through SQLite's file layer
  (``fileread``), name another store once a copy is written over the file. A header still
  0 there is this store before its first checkpoint wrote the stamp into the file. An
  encrypted store's header is ciphertext (SQLite3MC), so for it only a rename is seen.

Invariants: reads only (``stamp`` aside, one small write transaction when the header says
0); never a Python ``open`` of the store (``fileread`` says why); a copy made with
``cp`` of a file whose header was not re-stamped (not made by localmem) is not seen in
place: docs/security.md says to restore with ``localmem restore``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from localmem.storage.engine import fileread, keys

APP_ID_AT = 68  # the header's application_id: 4 bytes, big-endian (SQLite's file format, 1.3)


@dataclass(frozen=True)
class FileIdentity:
    path: str
    dev: int
    ino: int
    app_id: int


def new_nonce() -> int:
    """A random, non-zero application_id (a signed 32-bit value in SQLite's header)."""
    return 1 + secrets.randbelow(2**31 - 2)


def stamp(conn: apsw.Connection) -> int:
    """The store's application_id, made non-zero first when it is 0 and the connection may
    write (one transaction; a store another process keeps busy stays unstamped until a
    later open)."""
    current = _app_id(conn)
    if current != 0 or conn.readonly("main"):
        return current
    try:
        conn.execute("BEGIN IMMEDIATE")
    except apsw.BusyError:
        return 0
    try:
        current = _app_id(conn)
        if current == 0:
            current = new_nonce()
            conn.execute(f"PRAGMA application_id = {current}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return current


def _app_id(conn: apsw.Connection) -> int:
    value: Any = conn.execute("PRAGMA application_id").fetchall()[0][0]
    return int(value)


def capture(conn: apsw.Connection, path: str | Path) -> FileIdentity | None:
    """What ``conn``'s store is now: its file and its header's stamp (None for ``:memory:``
    or a file that is gone)."""
    if str(path) == ":memory:" or str(path).startswith("file:"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    # an encrypted store's header is ciphertext past its first bytes: only the inode tells
    app_id = 0 if fileread.read_head(path, len(keys.SQLITE_MAGIC)) != keys.SQLITE_MAGIC else _app_id(conn)
    return FileIdentity(os.path.realpath(path), st.st_dev, st.st_ino, app_id)


def replaced(ident: FileIdentity | None) -> str | None:
    """Why the file at the store's path is not the one ``ident`` describes any more (deleted,
    another file there, rewritten in place), or None while it still is."""
    if ident is None:
        return None
    try:
        st = os.stat(ident.path)
    except OSError:
        return "the store file was deleted or moved away"
    if (st.st_dev, st.st_ino) != (ident.dev, ident.ino):
        return "another file was put at the store's path (renamed or moved over it)"
    head = fileread.read_head(ident.path, APP_ID_AT + 4)
    if ident.app_id == 0 or head is None or len(head) < APP_ID_AT + 4:
        return None
    raw = int.from_bytes(head[APP_ID_AT : APP_ID_AT + 4], "big", signed=True)
    if raw not in (0, ident.app_id):
        return "the store file was overwritten in place by another store (a copy of a backup?)"
    return None


def close(conn: apsw.Connection, ident: FileIdentity | None) -> str | None:
    """Close ``conn``; when its store was replaced, without the checkpoint (and the ``-wal``
    deletion) SQLite does when the last connection closes. Returns why it was replaced."""
    why = replaced(ident)
    if why is not None:
        with contextlib.suppress(apsw.Error):  # closed already: nothing left to checkpoint
            conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1)
    conn.close()
    return why
