"""Reading a store file's first bytes through SQLite's own file layer, never Python's ``open``.

POSIX gives a process one set of ``fcntl`` locks per file, and closing ANY descriptor of
that file drops them all (SQLite's "How To Corrupt An SQLite Database File", §2.2). A
process that holds a connection to a store and opens and closes the store's file through
Python silently loses SQLite's locks: the next client thinks it is alone, checkpoints and
deletes the live ``-wal`` under it, and the turns written meanwhile are gone. SQLite's unix
VFS knows every descriptor it has on a file (its inode table) and, while any connection of
the process holds a lock there, keeps a closed descriptor open for later instead of closing
it. A file opened and closed through ``apsw.VFSFile`` on that VFS therefore drops nothing.

``held`` says whether a file is one a connection of this process holds (a database, its
``-wal``, ``-shm`` or ``-journal``): such a file is never opened through Python (an ingest
given the store itself as its input is refused by it).

Invariants: every read of a store's own files (the database, ``-wal``, ``-shm``,
``-journal``) made by localmem while it may hold a connection comes through here or through
a connection; nothing here writes; a missing file is None, not an error.
"""

from __future__ import annotations

import os
from pathlib import Path

import apsw

VFS = "unix"  # the OS layer under SQLite3MC's default VFS: the same inode table, no cipher on reads


def read_head(path: str | Path, size: int) -> bytes | None:
    """The first ``size`` bytes of the file at ``path`` (fewer for a shorter file); None
    when it is missing, not a regular file, or cannot be read."""
    try:
        if not os.path.isfile(path):
            return None
        f = apsw.VFSFile(VFS, os.path.abspath(path), [apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_MAIN_DB, 0])
    except apsw.Error:
        return None
    try:
        return bytes(f.xRead(size, 0))
    except apsw.Error:
        return None
    finally:
        f.xClose()


def held_files() -> dict[tuple[int, int], str]:
    """(device, inode) -> name of every file this process's open connections use."""
    out: dict[tuple[int, int], str] = {}
    for conn in apsw.connections():
        try:
            names = [conn.filename, conn.filename_wal, conn.filename_journal]
        except apsw.Error:  # closed meanwhile
            continue
        if not names[0]:
            continue  # :memory:, a temporary database
        names.append(names[0] + "-shm")
        for name in names:
            try:
                st = os.stat(name)
            except OSError:
                continue
            out[(st.st_dev, st.st_ino)] = name
    return out


def held(path: str | Path) -> str | None:
    """The name under which a connection of this process holds the file at ``path``, or None."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return held_files().get((st.st_dev, st.st_ino))
