"""Where a store's resident socket is and the checks both sides make on it, in the standard
library alone: the ``localmem`` command's fast entry (``resident.quick``) uses it before
anything of localmem's settings or storage is imported, and ``wire``, ``client`` and
``server`` use the same functions, so there is one rule for each.

- the socket of a store: ``<folder>/<sha256 of the store's real path, 24 hex>.sock``; the
  folder is the runtime dir when that path fits a Unix socket address (``SUN_PATH_MAX``),
  else the short :func:`fallback_dir`, ``/tmp/localmem-<uid>`` (a long ``$HOME`` without
  ``$XDG_RUNTIME_DIR``: ssh without pam_systemd, a container, cron; a long macOS user
  name). The runtime dir is ``$XDG_RUNTIME_DIR/localmem`` when that folder exists, else
  ``run`` in the user data dir (platformdirs' rule, which :func:`user_data_dir` spells for
  Linux and macOS). The choice reads lengths and the environment only, so a client and
  the server it started choose alike (:func:`socket_in`);
- every name bound fits: the server binds a temporary name (:func:`bind_name`) in the
  socket's own folder, exactly as long as the socket's, then renames it into place;
- only the same user: the folder is a folder of this user, not a link, with no group or
  other bits (:func:`private_folder`; another user's ``/tmp/localmem-<uid>`` is refused,
  never used, and :func:`unserved` names it for ``localmem doctor``), the socket file is
  this user's (:func:`own_socket`), and the process at the other end is this user's
  (:func:`peer_uid`, ``SO_PEERCRED``). A folder a ``/tmp`` cleaner removed is made again
  by the next server (``private_folder(create=True)``).

Invariant: imports the standard library only (tests/resident/test_quick.py checks it in a
real process), and nothing here raises for a missing or foreign file: a check says False.
"""

from __future__ import annotations

import _socket  # socket.py's C module: socket.py adds selectors and its enums, ~2.5 ms of the fast entry's ~25
import json
import os
import stat
import struct
import sys

TYPE_CHECKING = False  # typing costs ~3 ms of a served query; type checkers take this branch
if TYPE_CHECKING:
    from typing import Any

try:  # the builtin sha256 (0.2 ms): hashlib would load OpenSSL (2.7 ms of a served query's ~50)
    from _sha256 import sha256  # type: ignore[import-not-found]  # CPython's own module, no stub
except ImportError:  # another build or version (3.12: _sha2): the same function through hashlib
    from hashlib import sha256

APP = "localmem"  # config.APP (tests/resident/test_quick.py checks they agree)
PROTOCOL = 2  # 2: the `cli` op (a raw command line); a side of another protocol is refused
MAX_LINE = 1 << 20  # a request is a question and a few options; a context reply is at most ~1 MB of text
MAX_REPLY = 64 << 20  # a 32k-token context with its turn list fits many times over
SUN_PATH_MAX = 100  # AF_UNIX paths are limited to 104 (macOS) or 108 (Linux) bytes; every name bound stays under both
SOCKET_SUFFIX = ".sock"
BIND_SUFFIX = ".tmp"  # a temporary bind name's (:func:`bind_name`)
# The fallback's parent: not $TMPDIR, which differs between a shell, launchd, sudo and cron (a
# client and its server must agree) and on macOS is itself ~50 bytes; /tmp is sticky, so no
# one else can rename or remove this user's folder in it.
SHARED_TMP = "/tmp"
# What the daemon's log (its stderr) says when it could not serve: the server's warning, the
# command's error line, a logged error; a traceback's last line is taken too (:func:`unserved`).
LOG_FAILURES = ("not served", " error: ", " ERROR ")
LOG_TAIL = 1 << 16  # a daemon's log is a few lines; a long one's end is what it said last
CONNECT_S = 0.5  # a live server accepts at once; a full backlog means busy: read in-process
REPLY_S = 30.0  # the longest a caller waits for a reply before it reads in-process instead
# What the settings loader reads beyond ``LOCALMEM_*`` (platformdirs' folders, ``~``): a raw
# command line (op ``cli``) is served only when the caller's values are the server's own.
PLATFORM_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME")
SQLITE_MAGIC = b"SQLite format 3\x00"  # storage.engine.keys.SQLITE_MAGIC: a plaintext store's first bytes


# Where platformdirs puts the user's folders when no $XDG_* variable names one, by OS: both
# folders are ~/Library/Application Support on macOS (platformdirs >= 4.3 honours $XDG_*
# there too; an older one that does not names another store, which the server's own check
# of the caller's settings then refuses: the full CLI reads).
_HOME_DEFAULTS = {"linux": (".local/share", ".config"), "darwin": ("Library/Application Support",) * 2}


def user_data_dir() -> str | None:
    """``platformdirs.user_data_dir("localmem")`` on Linux and macOS, without importing
    platformdirs (~16 ms); None where this rule is not known to match (another OS, a
    relative $HOME)."""
    return _xdg("XDG_DATA_HOME", 0)


def user_config_dir() -> str | None:
    """``platformdirs.user_config_dir("localmem")`` on Linux and macOS, as :func:`user_data_dir`."""
    return _xdg("XDG_CONFIG_HOME", 1)


def _xdg(variable: str, which: int) -> str | None:
    system = "linux" if sys.platform.startswith("linux") else sys.platform
    if system not in _HOME_DEFAULTS:
        return None
    base = os.environ.get(variable, "")
    if not os.path.isabs(base):
        home = os.environ.get("HOME")
        if home is not None and not os.path.isabs(home):
            return None  # platformdirs then reads the passwd entry
        base = os.path.expanduser("~/" + _HOME_DEFAULTS[system][which])
        if not os.path.isabs(base):
            return None
    return os.path.join(base, APP)


def runtime_dir() -> str | None:
    """The folder of the stores' sockets (module docstring); None where :func:`user_data_dir` is."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        return os.path.join(base, APP)
    data = user_data_dir()
    return None if data is None else os.path.join(data, "run")


def socket_name(db: str | os.PathLike[str]) -> str:
    """The file name of the socket of the store at ``db``: a hash of its real path."""
    real = os.path.realpath(db)
    digest: str = sha256(real.encode("utf-8", "surrogateescape")).hexdigest()
    return digest[:24] + SOCKET_SUFFIX


def fallback_dir() -> str:
    """The folder of the sockets whose path in the runtime dir would not fit (module
    docstring): ``/tmp/localmem-<uid>``, at most 25 bytes."""
    return os.path.join(SHARED_TMP, f"{APP}-{os.getuid()}")


def fits(path: str | os.PathLike[str]) -> bool:
    """Whether a socket can be bound at ``path`` on Linux and macOS (so can its
    :func:`bind_name`, which is as long)."""
    return len(os.fsencode(path)) <= SUN_PATH_MAX


def socket_in(folder: str | os.PathLike[str], db: str | os.PathLike[str]) -> str | None:
    """The socket of the store at ``db``: in ``folder`` (the runtime dir) when that path
    fits, else in :func:`fallback_dir`; None when neither does (then there is no fast path
    for that store)."""
    name = socket_name(db)
    for where in (os.fspath(folder), fallback_dir()):
        path = os.path.join(where, name)
        if fits(path):
            return path
    return None


def bind_name(path: str | os.PathLike[str]) -> str:
    """A fresh name to bind the socket at ``path`` under before it is renamed into place:
    in the same folder (a rename, never a copy), hidden, random, and exactly as long as
    ``path``, so that it fits wherever ``path`` does (a longer one overflowed sun_path
    while ``path`` fitted: no daemon ever served)."""
    folder, name = os.path.split(os.fspath(path))
    tag = os.urandom(len(name)).hex()[: len(name) - 1 - len(BIND_SUFFIX)]  # 24 hex: 96 random bits
    return os.path.join(folder, f".{tag}{BIND_SUFFIX}")


def socket_to_ask(folder: str | os.PathLike[str], db: str | os.PathLike[str]) -> str | None:
    """The socket of the store at ``db`` (:func:`socket_in`) when a caller may ask it: a
    socket file of this user (:func:`own_socket`) in this user's private folder
    (:func:`private_folder`); else None. Both clients (``quick``, ``client``) ask only this."""
    path = socket_in(folder, db)
    if path is None or not own_socket(path) or not private_folder(os.path.dirname(path), create=False):
        return None
    return path


def unserved(folder: str | os.PathLike[str], db: str | os.PathLike[str]) -> str | None:
    """Why no process can serve the store at ``db`` on its socket, in words (``localmem
    doctor``): no socket path fits, its folder may not hold sockets (:func:`folder_problem`;
    a missing one is not a problem: the next server makes it), or, while nothing accepts on the
    socket, the log of the last daemon started for it (``<socket>.log``,
    ``resident.daemon``) says that it could not serve; None when nothing stands in the way."""
    path = socket_in(folder, db)
    if path is None:
        return (
            f"no socket path for this store fits a Unix socket address ({SUN_PATH_MAX} bytes), in "
            f"{os.fspath(folder)} or in {fallback_dir()}: queries and hooks always read in-process"
        )
    where = os.path.dirname(path)
    problem = folder_problem(where, create=False) if os.path.lexists(where) else None  # missing: the server makes it
    if problem is not None:
        return (
            f"no process can serve this store: its socket's folder {problem} (queries and hooks read in-process "
            "until it is a folder of this user with mode 700: remove it, or `chmod 700` it if it is yours)"
        )
    if _accepts(path):
        return None
    log = os.path.splitext(path)[0] + ".log"  # resident.daemon's ``path.with_suffix(".log")``
    said = _failures(log)
    if said is None:
        return None
    return f"the last daemon started for this store could not serve it: {said} (its log: {log})"


def _accepts(path: str) -> bool:
    """Whether a process accepts connections on the socket at ``path``."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_S)
        sock.connect(path)
    except OSError:
        return False
    finally:
        sock.close()
    return True


def _failures(log: str) -> str | None:
    """The lines of a daemon's log that say it could not serve (``LOG_FAILURES``), in one;
    None when it says none or there is no log."""
    try:
        with open(log, "rb") as fh:
            fh.seek(max(0, os.fstat(fh.fileno()).st_size - LOG_TAIL))
            lines = [line.strip() for line in fh.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return None
    said = [line for line in lines if any(mark in line for mark in LOG_FAILURES)]
    if any(line.startswith("Traceback") for line in lines):
        said.append(lines[-1])  # the exception that ended it
    return "; ".join(dict.fromkeys(said))[:500] or None


def store_identity(db: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The store file's real path and identity (device, inode); None when it is missing."""
    real = os.path.realpath(db)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return {"path": real, "dev": st.st_dev, "ino": st.st_ino}


def plaintext(db: str | os.PathLike[str]) -> bool:
    """Whether the file at ``db`` starts as a plaintext SQLite database does (an encrypted
    store has no plaintext header: its key rules need the storage layer)."""
    try:
        with open(db, "rb") as fh:
            return fh.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def private_folder(folder: str | os.PathLike[str], *, create: bool) -> bool:
    """Whether ``folder`` is this user's own, not a link, with no access for group or
    others (made so when ``create`` and it is missing)."""
    return folder_problem(folder, create=create) is None


def folder_problem(folder: str | os.PathLike[str], *, create: bool) -> str | None:
    """Why ``folder`` may not hold this user's sockets, in words; None when it may
    (:func:`private_folder`). A link is refused even to a private folder: in ``/tmp``
    its owner, whoever made it, could point it elsewhere between a check and a connect."""
    try:
        if create:
            from localmem.util import private  # off the fast path, which never creates

            private.make_private_dir(folder)  # its missing parents too (the data folder): 700
        st = os.lstat(folder)
    except OSError as exc:
        return f"{os.fspath(folder)}: {exc.strerror or exc}"
    if stat.S_ISLNK(st.st_mode):
        return f"{os.fspath(folder)} is a symbolic link, not a folder"
    if not stat.S_ISDIR(st.st_mode):
        return f"{os.fspath(folder)} is not a folder"
    if st.st_uid != os.getuid():
        return f"{os.fspath(folder)} belongs to another user (uid {st.st_uid}), not to this one (uid {os.getuid()})"
    if st.st_mode & 0o077:
        return f"{os.fspath(folder)} is open to group or others (mode {stat.S_IMODE(st.st_mode):o}, not 700)"
    return None


def own_socket(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a socket file of this user (not a link to one)."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_uid == os.getuid()


def peer_uid(sock: _socket.socket) -> int | None:
    """The uid of the process at the other end (Linux: SO_PEERCRED); None where the OS
    does not say (the private folder is then the only check). ``sock``: a ``socket.socket``
    or the C module's own."""
    opt = getattr(_socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    creds = sock.getsockopt(_socket.SOL_SOCKET, opt, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def peer_pid(path: str) -> int | None:
    """The pid of the process accepting on the socket at ``path`` (Linux: SO_PEERCRED, as
    it was when it listened); None where the OS does not say or nothing accepts. A
    connection that sends nothing is dropped by the server, and is no request: it does not
    reset a daemon's idle time."""
    opt = getattr(_socket, "SO_PEERCRED", None)
    if opt is None:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_S)
        sock.connect(path)
        pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(_socket.SOL_SOCKET, opt, struct.calcsize("3i")))
    except OSError:
        return None
    finally:
        sock.close()
    return int(pid)


def read_line(sock: _socket.socket, limit: int) -> bytes:
    """Bytes up to the first newline (or the end); ValueError past ``limit``."""
    parts: list[bytes] = []
    size = 0
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            break
        newline = chunk.find(b"\n")
        if newline >= 0:
            parts.append(chunk[:newline])
            break
        parts.append(chunk)
        size += len(chunk)
        if size > limit:
            raise ValueError("message too long")
    return b"".join(parts)


def encode(obj: dict[str, Any]) -> bytes:
    """One message: a JSON object on one line (UnicodeEncodeError for a lone surrogate)."""
    return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One message; ValueError when it is not a JSON object."""
    obj = json.loads(line.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError("a message is a JSON object")
    return obj


def exchange(path: str, message: bytes, reply_s: float = REPLY_S) -> dict[str, Any]:
    """Send one request on the socket at ``path`` and read its reply; OSError or ValueError
    when it cannot be had (refused, a stale socket, another user's process, timed out,
    not JSON)."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_S)
        sock.connect(path)
        if peer_uid(sock) not in (None, os.getuid()):
            raise ValueError("the socket's process belongs to another user")
        sock.settimeout(reply_s)
        sock.sendall(message)
        sock.shutdown(_socket.SHUT_WR)
        return decode(read_line(sock, MAX_REPLY))
    finally:
        sock.close()
