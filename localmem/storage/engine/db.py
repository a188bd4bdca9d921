"""SQLite connections and schema migrations.

Every connection we open gets WAL, a busy timeout, foreign keys and sqlite-vec, on
that connection only (nothing process-wide). Migrations are the numbered files
``migrations/NNNN_name.sql`` shipped inside the package; each one and its
``PRAGMA user_version`` bump commit together in one transaction, so a failed
migration leaves the database exactly as it was. A database whose version is newer
than the newest migration we know is refused.

The whole schema lives in ``migrations/``: the vector tables and their code tables, whose
vector size is the embedder's, are the template ``migrations/vectors.sql``, made by
``create_vector_tables`` when a store is first bound to an embedder (and remade by
reindex); other files there than ``NNNN_name.sql`` are not migrations. A migration that
must also move data the SQL cannot name (version 10: the vectors out of the vec0 tables a
bound store made before it) has a Python step in ``_AFTER``, run in its transaction. Connections are
``Conn``: an ``apsw.Connection`` whose rows are typed ``tuple[Any, ...]``. An encrypted store is
unlocked (``storage.keys.unlock``) before anything else on the connection.
"""

from __future__ import annotations

import gc
import importlib.util
import logging
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import apsw

from localmem.errors import NotFound, SchemaError
from localmem.storage.engine import checkpoints, faults, keys, partials
from localmem.storage.engine.retry import DEFAULT_BUSY_TIMEOUT_MS, busy_timeout_ms
from localmem.util import private

log = logging.getLogger("localmem.db")

Row: TypeAlias = tuple[Any, ...]
"""A result row. Its cells' types depend on the query, so readers convert what they read
(``int(row[0])``) rather than narrowing apsw's union of every SQLite type cell by cell."""


class Conn(apsw.Connection):
    """Every connection localmem opens (``connect()``): an ``apsw.Connection`` whose
    statements return rows typed as ``Row``."""

    readonly_reason: str | None = None  # why it was opened read-only (``connect``), for the error a write gets
    autocheckpoint: int | None = None  # pages, as last set by ``_leave_checkpoints_to_litestream``
    path: str = ""  # the store's file, when it is one (``connect``)

    def one(self, statements: str, bindings: apsw.Bindings | None = None) -> Row:
        """The first row of a query that always returns one (an aggregate, ``INSERT ...
        RETURNING``, a row known to exist); none is ``NotFound``, not a ``TypeError`` later."""
        cursor = self.execute(statements, bindings)
        try:
            row = cursor.fetchone()
        finally:
            # Closing resets the statement now: a half-read cursor would otherwise keep a
            # read transaction open on its snapshot, and the next BEGIN IMMEDIATE after
            # another connection's commit fails at once with SQLITE_BUSY_SNAPSHOT.
            cursor.close()
        if row is None:
            raise NotFound(f"no row where one was expected: {' '.join(statements.split())[:120]}")
        return row

    def content_cache(self, name: str) -> dict[Any, Any]:
        """A dict named ``name`` for values derived from the database's content, kept on
        this connection and emptied whenever that content may have changed: a commit by
        another connection or process (``PRAGMA data_version``, read as a statement so
        it is that of the caller's transaction) or a row changed by this connection,
        committed or not (``total_changes``). Inside a write transaction, whose rows may
        yet roll back without moving either counter, nothing is kept (a fresh dict)."""
        if self.txn_state("main") == apsw.SQLITE_TXN_WRITE:
            return {}
        key = (self.one("PRAGMA data_version")[0], self.total_changes())
        caches: dict[str, Any] = self.__dict__.setdefault("_content_caches", {})
        if caches.get("") != key:
            caches.clear()
            caches[""] = key
        out: dict[Any, Any] = caches.setdefault(name, {})
        return out

    if TYPE_CHECKING:

        def execute(
            self,
            statements: str,
            bindings: apsw.Bindings | None = None,
            *,
            can_cache: bool = True,
            prepare_flags: int = 0,
            explain: int = -1,
        ) -> Cursor: ...

        def executemany(
            self,
            statements: str,
            sequenceofbindings: Iterable[apsw.Bindings],
            *,
            can_cache: bool = True,
            prepare_flags: int = 0,
            explain: int = -1,
        ) -> Cursor: ...


if TYPE_CHECKING:

    class Cursor(apsw.Cursor):
        """What ``Conn.execute`` returns, for the type checker: an ``apsw.Cursor`` whose rows are ``Row``."""

        def fetchone(self) -> Row | None: ...

        def fetchall(self) -> list[Row]: ...

        def __iter__(self) -> Cursor: ...

        def __next__(self) -> Row: ...


BUSY_TIMEOUT_MS = DEFAULT_BUSY_TIMEOUT_MS
_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """The packaged migrations in version order; numbering must be 1..N with no gap."""
    found: list[Migration] = []
    for entry in _migrations_dir().iterdir():
        m = _NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), m.group(2), entry.read_text("utf-8")))
    found.sort(key=lambda mig: mig.version)
    for expected, mig in enumerate(found, start=1):
        if mig.version != expected:
            raise SchemaError(f"migration numbering has a gap or duplicate at {mig.name}")
    return found


def _migrations_dir() -> Traversable:
    # The wheel carries them as localmem/migrations; a source checkout (editable
    # install, tests) has them at the repository's top level.
    packaged = resources.files("localmem").joinpath("migrations")
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parents[3] / "migrations"


def connect(path: str | Path, *, readonly: bool = False) -> Conn:
    """A connection to the database ``path`` (made if missing, unless ``readonly``). A
    file whose folder cannot be written opens read-only (``faults.readonly_uri``), so it
    still serves reads; SQLite's failures to open are named errors (``faults``)."""
    target = str(path)
    # A URI ("file:/x.db?mode=ro") names an existing file: taking it as a path made a folder
    # called "file:" in the working directory.
    if target != ":memory:" and not target.startswith("file:"):
        private.make_private_dir(Path(target).parent)  # 700 when made here; an existing one is left as it is
        partials.clear_stale(target)  # a killed encrypt/decrypt's copy: never left for long
        if not readonly:
            # A new store is made 600 before SQLite opens it: its -wal/-shm/-journal take the
            # db file's mode, whatever the umask. Only a missing file is opened (O_EXCL), never
            # an existing store: closing a descriptor would drop this process's SQLite locks.
            private.reserve(target)
    with faults.faults(target):
        try:
            return _open(target, readonly=readonly, path=target)
        except (apsw.ReadOnlyError, apsw.CantOpenError):
            uri = faults.readonly_uri(target)
            if uri is None:
                raise
            return _open(uri, readonly=True, reason=faults.why_read_only(target, folder_said=True), path=target)


@cache
def vec_extension() -> str:
    """The sqlite-vec loadable extension's path, as ``sqlite_vec.loadable_path()`` gives it,
    without running the package's ``__init__`` (it imports the stdlib's sqlite3 and numpy:
    ~10 ms of a query's start for one path)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the sqlite-vec package is not installed; reinstall localmem")
    return os.path.normpath(os.path.join(next(iter(spec.submodule_search_locations)), "vec0"))


def _open(target: str, *, readonly: bool, path: str, reason: str | None = None) -> Conn:
    # ``target`` may be a read-only URI of ``path``; the key is looked up by the path.
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    if target.startswith("file:"):
        flags |= apsw.SQLITE_OPEN_URI
    conn = Conn(target, flags=flags)
    try:
        keys.unlock(conn, path)  # first: SQLite3MC needs the key before any page is read
        conn.set_busy_timeout(busy_timeout_ms())  # BUSY_TIMEOUT_MS unless $LOCALMEM_BUSY_TIMEOUT_MS
        conn.enable_load_extension(True)
        conn.load_extension(vec_extension())
        conn.enable_load_extension(False)
        conn.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            _leave_checkpoints_to_litestream(conn, path)
        conn.execute("PRAGMA user_version")  # reads the file: a file SQLite cannot read fails here, not later
        if conn.readonly("main"):  # asked to, or SQLite fell back to it (a write-protected file)
            conn.readonly_reason = reason or faults.why_read_only(conn.filename or target) or "opened read-only"
    except BaseException:
        conn.close()
        raise
    return conn


VECTOR_TABLES = ("turn_vec", "cue_vec", "turn_codes", "cue_codes")


def vector_tables_sql(dim: int) -> str:
    """The DDL of the vector and code tables for ``dim``-dimensional vectors, from the
    template ``migrations/vectors.sql`` (their size is the embedder's, so they are made when
    a store is bound to one rather than by a numbered migration)."""
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise SchemaError(f"vector dimension must be a positive integer, got {dim!r}")
    template = _migrations_dir().joinpath("vectors.sql").read_text("utf-8")
    return template.replace("{dim}", str(dim)).replace("{bytes}", str(4 * dim))


def create_vector_tables(conn: Conn, dim: int) -> None:
    """Make the vector and code tables; call inside the transaction that records the embedder."""
    conn.execute(vector_tables_sql(dim))


def drop_vector_tables(conn: Conn) -> None:
    """Drop the vector and code tables (reindex remakes them); the triggers on turns and cues stay."""
    for table in VECTOR_TABLES:
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def user_version(conn: Conn) -> int:
    row = conn.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: Conn, available: list[Migration] | None = None) -> list[int]:
    """Apply pending migrations in order; return the versions applied."""
    todo = migrations() if available is None else available
    newest = todo[-1].version if todo else 0
    current = user_version(conn)
    if current > newest:
        raise SchemaError(
            f"database schema version {current} is newer than this localmem supports "
            f"({newest}); upgrade localmem to open it"
        )
    applied: list[int] = []
    for mig in todo:
        if mig.version <= current:
            continue
        try:
            with transaction(conn):
                # Re-check inside the write lock: another process may have migrated.
                if user_version(conn) >= mig.version:
                    continue
                conn.execute(mig.sql)
                if mig.version in _AFTER:
                    _AFTER[mig.version](conn)
                conn.execute(f"PRAGMA user_version = {mig.version}")
        except apsw.Error as exc:
            raise SchemaError(f"migration {mig.version:04d}_{mig.name} failed: {exc}") from exc
        applied.append(mig.version)
    if newest >= 10 and _has_vec0(conn):
        # Version 10 applied by a build that lacked its Python step (the SQL file was
        # committed first): move the vectors now.
        with transaction(conn):
            _plain_vector_tables(conn)
    return applied


def _has_vec0(conn: apsw.Connection) -> bool:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'turn_vec'").fetchone()
    return row is not None and "vec0" in str(row[0]).lower()


def _plain_vector_tables(conn: Conn) -> None:
    """Version 10: a bound store's vec0 tables become the template's plain tables (same
    ids, same vectors; the code tables fill by their triggers)."""
    if not _has_vec0(conn):
        return  # not bound yet (binding makes the new tables), or moved already
    dim = int(conn.one("SELECT value FROM meta WHERE key = 'embedder_dim'")[0])
    for table, key in (("turn_vec", "turn_id"), ("cue_vec", "cue_id")):
        conn.execute(f"CREATE TEMP TABLE legacy_{table} AS SELECT {key} AS id, embedding FROM {table}")
    drop_vector_tables(conn)
    create_vector_tables(conn, dim)
    for table, key in (("turn_vec", "turn_id"), ("cue_vec", "cue_id")):
        conn.execute(f"INSERT INTO {table}({key}, embedding) SELECT id, embedding FROM temp.legacy_{table} ORDER BY id")
        conn.execute(f"DROP TABLE temp.legacy_{table}")
    conn.execute("UPDATE mirror_epochs SET turns = turns + 1, cues = cues + 1 WHERE id = 1")


_AFTER = {10: _plain_vector_tables}

C = TypeVar("C", bound=apsw.Connection)


@contextmanager
def transaction(conn: C) -> Iterator[C]:
    """A write transaction taken up front (BEGIN IMMEDIATE), so lock waits happen at the
    start, under the busy timeout, rather than as a failed upgrade half-way through.
    SQLite's failures inside it (a full disk, a read-only file) are named errors
    (``faults``); a failed COMMIT rolls back too, so the connection is never left in a
    transaction."""
    with faults.faults(conn.filename, conn):
        _begin(conn)
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise


def _begin(conn: apsw.Connection) -> None:
    """BEGIN IMMEDIATE; if it meets SQLITE_BUSY_SNAPSHOT, end the stale read and begin again.

    Outside a transaction, a connection still reads on an old snapshot only while one
    of its statements is half-stepped (a cursor read in part and not yet freed, or kept
    alive by apsw 3.54.0.0's cursor reference leak). Once another connection commits,
    that snapshot can never become a writer and no wait helps: SQLite fails at once with
    BUSY_SNAPSHOT, and a retry would meet it forever. Closing this connection's open
    cursors resets those statements, which ends the read; the caller that held one
    reads on a stale view anyway, and a further step on it is an error, not wrong rows."""
    if isinstance(conn, Conn) and conn.path:
        _leave_checkpoints_to_litestream(conn, conn.path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        return
    except apsw.BusyError as exc:
        # extendedresult: set on every apsw error, though its stubs do not name it
        if getattr(exc, "extendedresult", None) != apsw.SQLITE_BUSY_SNAPSHOT or conn.in_transaction:
            raise
    stale = _close_cursors(conn)
    log.warning("a stale read on %s held the write; closed %d open statement(s): %s", conn.filename, len(stale), stale)
    conn.execute("BEGIN IMMEDIATE")  # a plain busy error now is another writer: retry_locked waits for it


def _leave_checkpoints_to_litestream(conn: Conn, path: str) -> None:
    """No checkpoint of ours while a replica holds this store (``checkpoints.held``):
    no auto-checkpoint, none when the last connection closes."""
    if path == ":memory:":
        return
    conn.path = path
    pages = checkpoints.autocheckpoint_pages(path)
    if pages != conn.autocheckpoint:
        conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
        conn.autocheckpoint = pages
    conn.config(apsw.SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, int(checkpoints.held(path)))


def _close_cursors(conn: apsw.Connection) -> list[str]:
    # apsw lists no connection's cursors, and this path is rare: find them on the heap.
    closed = []
    for obj in gc.get_objects():
        if not isinstance(obj, apsw.Cursor):
            continue
        try:
            if obj.connection is not conn:
                continue
        except apsw.Error:  # a closed cursor
            continue
        sql = ""
        with suppress(apsw.Error):  # a cursor with no statement now
            sql = " ".join(str(obj.expanded_sql or "").split())[:80]
        with suppress(apsw.Error):
            obj.close()
        closed.append(sql)
    return closed


def _rollback(conn: apsw.Connection) -> None:
    # SQLite rolls back on its own after some errors (a full disk, an I/O error), and a
    # ROLLBACK that fails must not hide the error that made us roll back.
    if conn.in_transaction:
        with suppress(apsw.Error):
            conn.execute("ROLLBACK")
