"""Private by default: the folders and files localmem creates are its user's alone (folders
0700, files 0600) whatever the umask, and the check ``doctor`` runs on a store that other
local users can read.

Why: under Debian's default umask (022) a new store, its ``-wal``/``-shm``, exports and
backups came out 0644 in a 0755 folder, and any other user of the machine could read the
plaintext memory.

Invariants:
- a folder is made 0700 only when localmem creates it (each missing level of a path); a
  folder that already exists is never changed (``--db /tmp/x/m.db``: ``/tmp/x`` is the
  user's), nor is any file localmem did not create;
- a file is created with ``O_CREAT`` mode 0600 (the umask can only take bits away) and then
  ``fchmod``-ed to exactly 0600, so no umask (022, 000, 277) leaves it otherwise;
- a store's own files (db, ``-wal``, ``-shm``, ``-journal``) are never opened here once
  SQLite may hold them: closing any descriptor of a file drops every POSIX lock this
  process holds on it, SQLite's included ("How To Corrupt An SQLite Database File" §2.2).
  :func:`reserve` opens only a path that did not exist (``O_EXCL``: no connection can hold
  it yet); an existing file is only ``chmod``-ed or ``stat``-ed, by path. SQLite gives a
  store's ``-wal``/``-shm``/``-journal`` the mode of the db file, so a db created 0600 is
  what keeps them private.

Standard library only (os, stat) and cheap to import: the hooks' status file and the
resident socket folder import it lazily, off the hooks' fast path.
"""

from __future__ import annotations

import os
import shlex
import stat

TYPE_CHECKING = False  # typing costs a hook's import time; type checkers take the branch
if TYPE_CHECKING:
    from typing import IO, Any

FILE_MODE = 0o600
DIR_MODE = 0o700
# what SQLite writes beside a store, and the hooks' status file (``hooks.status``)
STORE_SUFFIXES = ("", "-wal", "-shm", "-journal", "-hooks.json")


def make_private_dir(path: str | os.PathLike[str]) -> None:
    """Make the folder ``path`` and any missing folder above it, each new one mode 0700;
    folders that exist are left as they are. ``FileExistsError`` when ``path`` (or a
    level above it) is a file, as ``Path.mkdir(parents=True, exist_ok=True)``."""
    missing = []
    p = os.path.abspath(path)
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, DIR_MODE)
        except FileExistsError:
            if not os.path.isdir(folder):
                raise
            continue  # another process made it meanwhile: theirs, left as it is
        os.chmod(folder, DIR_MODE)  # a umask such as 277 took the owner's bits too


def create(path: str | os.PathLike[str], *, exclusive: bool = False) -> int:
    """A write-only descriptor on ``path``, a new (or emptied) file of mode 0600;
    ``exclusive``: ``FileExistsError`` when it exists. For localmem's own files only
    (never a store a connection may hold: see the module docstring)."""
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else os.O_TRUNC)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)  # POSIX / Windows only
    fd = os.open(path, flags, FILE_MODE)
    try:
        # the umask, or a leftover of another mode (Windows has no fchmod, nor these modes)
        if stat.S_IMODE(os.fstat(fd).st_mode) != FILE_MODE and hasattr(os, "fchmod"):
            os.fchmod(fd, FILE_MODE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private(path: str | os.PathLike[str], mode: str = "wb", encoding: str | None = None) -> IO[Any]:
    """``open(path, mode)`` for writing a new file of mode 0600: ``mode`` is ``wb``/``w``
    (created or emptied) or ``xb``/``x`` (``FileExistsError`` when it exists)."""
    if mode not in ("wb", "w", "xb", "x"):
        raise ValueError(f"open_private writes new files only, not mode {mode!r}")
    fd = create(path, exclusive=mode.startswith("x"))
    binary = mode.endswith("b")
    return os.fdopen(fd, "wb" if binary else "w", encoding=None if binary else (encoding or "utf-8"))


def write_file(path: str | os.PathLike[str], data: bytes | str) -> None:
    """Write ``data`` to ``path`` (created or emptied, mode 0600) and sync it to disk."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with open_private(path, "wb") as fh:
        fh.write(raw)
        fh.flush()
        os.fsync(fh.fileno())


def reserve(path: str | os.PathLike[str]) -> bool:
    """Make ``path`` an empty file of mode 0600 when nothing is there yet, for SQLite (or
    another program) to fill: a database SQLite creates in it keeps that mode, and so do
    its ``-wal``/``-shm``/``-journal``. True when this call made it. An existing file is
    never opened (a connection of this process may hold its locks); a path that cannot be
    made here is left for SQLite to name the error, as before."""
    if not os.fspath(path):
        return False
    try:
        fd = create(path, exclusive=True)
    except OSError:
        return False
    os.close(fd)  # made just now with O_EXCL: no lock of this process is on it
    return True


def restrict(path: str | os.PathLike[str]) -> None:
    """Set the file ``path`` localmem made (another program may have written it: a
    Litestream restore) to mode 0600, by path: no descriptor, so no lock is dropped."""
    os.chmod(path, FILE_MODE)


def _open_to_others(path: str) -> int | None:
    """The permission bits of ``path`` when group or others have any access; None when
    they have none or it is missing."""
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None
    return mode if mode & 0o077 else None


def _folder_is_shared_by_design(folder: str) -> bool:
    """A folder whose openness is not the store's to fix: one with the sticky bit (/tmp),
    the file system's root, the home folder, or one another user owns."""
    try:
        st = os.stat(folder)
    except OSError:
        return True
    home = os.path.realpath(os.path.expanduser("~"))
    return bool(st.st_mode & stat.S_ISVTX) or folder in ("/", home) or st.st_uid != os.getuid()


def store_privacy(db: str | os.PathLike[str]) -> tuple[bool, str]:
    """Whether the store at ``db`` is its user's alone, and one line saying so: what group
    or others can reach (the db, its ``-wal``/``-shm``/``-journal``, the hooks' status file,
    its folder) and the one command that fixes it. Reads modes by path only (``stat``)."""
    real = os.path.realpath(db)
    if not os.path.isfile(real):
        return True, f"{db} does not exist yet (it is created mode 600, in a folder made 700)"
    folder = os.path.dirname(real)
    files = [(real + s, m) for s in STORE_SUFFIXES if (m := _open_to_others(real + s)) is not None]
    folder_mode = None if _folder_is_shared_by_design(folder) else _open_to_others(folder)
    if not files and folder_mode is None:
        return True, f"{real}: only you can read it (its files 600, its folder not open to others)"
    named = [f"{os.path.basename(p)} (mode {m:03o})" for p, m in files]
    if folder_mode is not None:
        named.append(f"its folder {folder} (mode {folder_mode:03o})")
    fix = []
    if files:
        fix.append("chmod 600 " + " ".join(shlex.quote(p) for p, _ in files))  # by name: a glob could hit a folder
    if folder_mode is not None:
        fix.append(f"chmod 700 {shlex.quote(folder)}")
    return False, (
        f"other users of this machine can read or list the store: {', '.join(named)}; fix: `{' && '.join(fix)}`"
    )
