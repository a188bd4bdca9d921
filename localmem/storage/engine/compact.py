"""Give a store's free pages back to the disk: ``VACUUM``, then the WAL emptied.

A change that drops much (a reembed's old vector tables, a redaction's old text) leaves
free pages in the file. SQLite reuses them for later writes but never shrinks the file by
itself, and a free page still holds the bytes it held. ``VACUUM`` writes the store anew
without them; it needs about the store's size free on disk while it runs and is refused
while another process holds the store (a reader mid-query, a writer).

Invariant: refusal is an answer, not an error. A busy or locked store, or a full disk,
leaves the store as it was and is returned as the reason; the caller says it.
"""

from __future__ import annotations

import apsw

from localmem.storage.engine.db import Conn


def rebuild(conn: Conn) -> str:
    """Rebuild the file without its free pages and empty the WAL; '' when done, else why not
    (``ExceptionName: message``). Run outside any transaction of ``conn``."""
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    except apsw.Error as exc:  # busy, locked by another process, or no room: the store stands as it was
        return f"{type(exc).__name__}: {exc}"
    return ""
