"""The fast entry of ``localmem query`` and ``localmem recall``: the command line is sent raw
to the store's resident process (op ``cli``) before anything but the standard library is
imported, and what it replies is printed; the ``localmem`` command (``localmem.__main__``)
runs the full CLI only when :func:`run` says None.

What is sent: argv, the folder, the ``LOCALMEM_*`` variables but the secret ones
(``SECRET_ENV``, and any with a word of ``SECRET_WORDS`` in its name: ``..._TOKEN``), the values
of ``unix.PLATFORM_ENV``, the store's identity and, for ``recall``, stdin. The server parses
the command line with the real parser, loads the settings from those sources and answers
only when they name its store and give the settings it serves (``localmem.cli.served``).

Invariants (docs/architecture.md, "The resident fast path"):
- imports the standard library and ``resident.unix`` only (``tomllib`` only when the store
  must be read from the config file); tests/resident/test_quick.py checks it in a process;
- asks only as ``resident.client`` does (this user's socket in this user's private folder,
  a process of this user), and never about an encrypted store (no plaintext SQLite header):
  its key rules need the storage layer, so the full CLI applies them;
- never raises for the fast path's sake and writes nothing unless answered: None, with
  stdin as it was read given back to ``sys.stdin``, and the full CLI does everything as
  without a resident process; answered, it writes exactly the stdout and stderr the
  in-process command would have, through this process's own streams, and returns its
  exit code.
"""

from __future__ import annotations

import io
import os
import sys

from localmem import __version__
from localmem.resident import unix

TYPE_CHECKING = False  # typing costs ~3 ms of this entry; type checkers take the branch
if TYPE_CHECKING:
    from typing import Any

COMMANDS = ("query", "recall")
VALUE_FLAGS = ("--db", "--embedder")  # the global flags taken before the command; any other: the full CLI
# storage.engine.keys.SECRET_ENV (tests/resident/test_quick.py checks this holds it), and any
# variable whose name says it holds or names a secret: none of them is a setting.
SECRET_ENV = ("LOCALMEM_KEY", "LOCALMEM_KEY_FILE", "LOCALMEM_SYNC_PASSPHRASE", "LOCALMEM_AGE_IDENTITY")
SECRET_WORDS = ("KEY", "PASS", "PASSPHRASE", "PASSWORD", "TOKEN", "SECRET", "IDENTITY", "CREDENTIALS")
MAX_STDIN = 1 << 20  # cli.query.MAX_STDIN: recall reads this much + 1, as the command does


def run(argv: list[str]) -> int | None:
    """``localmem ARGV`` answered by the store's resident process: its exit code, the output
    written; or None, nothing written (module docstring)."""
    split = command_of(argv)
    if split is None:
        return None
    db, command = split
    raw: bytes | None = None
    reply = None
    try:
        target = find(db)
        if target is not None:
            if command == "recall":  # read only once a server is there to take it
                raw = sys.stdin.buffer.read(MAX_STDIN + 1)
            reply = _ask(*target, argv, raw)
    except (OSError, ValueError, AttributeError):  # no stdin, a stale socket, a cut reply, not JSON, no UTF-8
        reply = None
    if reply is None:
        if raw is not None:  # the full CLI reads the same bytes
            sys.stdin = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
        return None
    stdout, stderr, code = reply
    sys.stdout.write(stdout)
    if stderr:
        sys.stderr.write(stderr)
    return code


def command_of(argv: list[str] | tuple[str, ...]) -> tuple[str | None, str] | None:
    """The ``--db`` value and the command, when the global flags are only ``--db`` and
    ``--embedder`` and the command is ``query`` or ``recall``; else None."""
    db = None
    i = 0
    while i < len(argv):
        if argv[i] in COMMANDS:
            return db, argv[i]
        got = option(argv, i, VALUE_FLAGS)
        if got is None:
            return None
        name, value, i = got
        if name == "--db":
            db = value
    return None


def option(argv: list[str] | tuple[str, ...], i: int, names: tuple[str, ...]) -> tuple[str, str, int] | None:
    """The option at ``argv[i]`` when it is one of ``names``, its value (``--name=value`` or
    ``--name value``) and the index after it; None for another option, or one without its
    value (the real parser says why)."""
    name, eq, value = argv[i].partition("=")
    if name not in names:
        return None
    if not eq:
        i += 1
        if i == len(argv) or argv[i].startswith("-"):
            return None
        value = argv[i]
    return name, value, i + 1


def store_path(db: str | None) -> str | None:
    """The store the settings loader would pick: ``--db``, ``$LOCALMEM_DB``, the config
    file's ``db``, the user data dir's ``memory.db``; None when that cannot be told here."""
    if db is None:
        db = os.environ.get("LOCALMEM_DB") or None
    if db is None:
        folder = unix.user_config_dir()
        config = os.environ.get("LOCALMEM_CONFIG") or (folder and os.path.join(folder, "config.toml"))
        if not config:
            return None
        if os.path.isfile(config):
            import tomllib  # lazy: ~5 ms, for a store named only in the config file

            with open(config, "rb") as fh:
                named = tomllib.load(fh).get("db")
            if named is not None and not isinstance(named, str):
                return None
            db = named
    if db is None:
        data = unix.user_data_dir()
        return None if data is None else os.path.join(data, "memory.db")
    return os.path.expanduser(db)


def secret(name: str) -> bool:
    """Whether the variable ``name`` holds or names a secret (never sent)."""
    return name in SECRET_ENV or any(word in SECRET_WORDS for word in name[len("LOCALMEM_") :].split("_"))


def caller() -> dict[str, Any]:
    """What a raw command line carries of its process: its folder, its ``LOCALMEM_*``
    variables but the secret ones, its values of ``unix.PLATFORM_ENV``."""
    return {
        "cwd": os.getcwd(),
        "env": {k: v for k, v in os.environ.items() if k.startswith("LOCALMEM_") and not secret(k)},
        "platform": {k: os.environ.get(k) for k in unix.PLATFORM_ENV},
    }


def find(db: str | None) -> tuple[str, dict[str, Any]] | None:
    """The socket to ask and the store's identity, when this user's socket of a plaintext
    store is there; else None (the hooks' fast path, ``hooks.quick``, asks only this too)."""
    path = store_path(db)
    folder = unix.runtime_dir()
    if path is None or folder is None:
        return None
    sock = unix.socket_to_ask(folder, path)
    if sock is None:
        return None
    identity = unix.store_identity(path)
    if identity is None or not unix.plaintext(identity["path"]):
        return None
    return sock, identity


def _ask(sock: str, identity: dict[str, Any], argv: list[str], stdin: bytes | None) -> tuple[str, str, int] | None:
    request = {
        "protocol": unix.PROTOCOL,
        "version": __version__,
        "op": "cli",
        "store": identity,
        "argv": argv,
        "stdin": None if stdin is None else stdin.decode("utf-8"),
        **caller(),
    }
    reply = unix.exchange(sock, unix.encode(request))
    stdout, stderr, code = reply.get("stdout"), reply.get("stderr"), reply.get("code")
    if reply.get("ok") is not True or not isinstance(stdout, str) or not isinstance(stderr, str):
        return None
    if not isinstance(code, int) or isinstance(code, bool):
        return None
    for text, stream in ((stdout, sys.stdout), (stderr, sys.stderr)):
        text.encode(stream.encoding, stream.errors or "strict")  # as print would: else the full CLI fails alike
    return stdout, stderr, code
