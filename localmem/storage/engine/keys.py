"""The encryption key of a store, and unlocking a connection with it.

Encryption at rest is SQLite3 Multiple Ciphers (the ``apsw-sqlite3mc`` build of apsw,
localmem's dependency, whose default cipher is ChaCha20-Poly1305): every page of the database, its WAL and a backup's pages
are encrypted by the engine; nothing here encrypts anything itself.

Where the key comes from, first found wins: the file named by ``$LOCALMEM_KEY_FILE`` (the
CLI's ``--key-file`` sets it, so the worker, the MCP server and every subprocess inherit it),
``$LOCALMEM_KEY``, and, for a store that is already encrypted, the OS keyring (service
``localmem``, user = the store's absolute path, then ``default``) when the ``keyring`` package
is installed. Never a command-line value: argv shows in the process list. A key file that
group or others may read is refused.

Invariants: ``unlock`` runs first on every connection ``storage.db.connect`` opens, before any
other statement (SQLite3MC needs the key before the first page is read). A plaintext store is
opened as it is whatever key is set (``localmem encrypt`` converts it); a new store is created
encrypted when a key is set. A wrong or missing key is one ``StoreLocked`` line, never
"file is not a database".
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import apsw

from localmem.errors import ConfigError
from localmem.storage.engine import fileread

KEY_ENV = "LOCALMEM_KEY"
KEY_FILE_ENV = "LOCALMEM_KEY_FILE"
SYNC_PASSPHRASE_ENV = "LOCALMEM_SYNC_PASSPHRASE"
AGE_IDENTITY_ENV = "LOCALMEM_AGE_IDENTITY"
# Secrets (or where they are) that localmem reads from its environment: a process that is
# not localmem (Litestream) is started without them.
SECRET_ENV = (KEY_ENV, KEY_FILE_ENV, SYNC_PASSPHRASE_ENV, AGE_IDENTITY_ENV, "LOCALMEM_MCP_TOKEN")
KEYRING_SERVICE = "localmem"
SQLITE_MAGIC = b"SQLite format 3\x00"
# said as the way out: a person reads "locked" as "another process holds it"
NEEDS_KEY = "this store is encrypted, no key given (pass --key-file FILE or set LOCALMEM_KEY_FILE)"

State = Literal["new", "plain", "encrypted"]


class StoreLocked(ConfigError):
    """The store is encrypted and no key, or a wrong one, was given."""


def encryption_available() -> bool:
    """Whether the installed apsw is the SQLite3 Multiple Ciphers build."""
    return hasattr(apsw, "mc_version")


def file_state(path: str | Path) -> State:
    """What the file at ``path`` holds, from its first bytes: nothing yet, a plaintext
    SQLite database (the magic string), or, for anything else whose size is a whole number
    of pages (>= 512 bytes), an encrypted one (SQLite3MC leaves no plaintext header)."""
    p = Path(path)
    try:
        st = p.stat()  # a stat opens nothing
    except (FileNotFoundError, NotADirectoryError):
        return "new"
    except OSError:
        return "plain"  # unreadable: let SQLite say why, as before
    if stat.S_ISDIR(st.st_mode):
        return "new"  # as before: SQLite says why it cannot open a folder
    size = st.st_size
    if size == 0:
        return "new"
    # through SQLite's file layer: a Python open and close here would drop the locks this
    # process's connections hold on the store (storage.engine.fileread)
    head = fileread.read_head(p, len(SQLITE_MAGIC))
    if head is None:
        return "plain"  # unreadable: let SQLite say why, as before
    if head == SQLITE_MAGIC or size < 512 or size % 512:
        return "plain"  # a plaintext store, or not a database at all (SQLite says which)
    return "encrypted"


def read_key_file(path: str | Path) -> str:
    """The key in ``path`` (one trailing newline dropped), refusing a file that group or
    others may read or write (``chmod 600``). Every key file localmem reads comes through
    here: the store's key, sync's passphrase and identities, age identities."""
    p = Path(path)
    try:
        mode = p.stat().st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"key file {p} is not a regular file")
        if mode & 0o077:
            raise ConfigError(f"key file {p} is readable by others (mode {stat.S_IMODE(mode):03o}); chmod 600 it")
        text = p.read_text("utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"key file {p} does not exist") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"key file {p} is not UTF-8 text") from exc
    except OSError as exc:
        raise ConfigError(f"key file {p}: {exc.strerror or exc}") from exc
    key = text[:-1] if text.endswith("\n") else text
    key = key[:-1] if key.endswith("\r") else key
    if not key:
        raise ConfigError(f"key file {p} is empty")
    return key


def read_age_identities(path: str | Path) -> list[str]:
    """The age identities in a key file, with ``read_key_file``'s checks (mode 600 among
    them): the whole text of an OpenSSH private key (one identity), else every
    ``AGE-SECRET-KEY-1…`` line. The one reader of age identities: sync's ``--identity``,
    and export, backup and restore's ``--age-identity`` / ``$LOCALMEM_AGE_IDENTITY``."""
    text = read_key_file(path)
    if "PRIVATE KEY-----" in text:
        return [text]
    found = [line.strip() for line in text.splitlines() if line.strip().startswith("AGE-SECRET-KEY-")]
    if not found:
        raise ConfigError(
            f"key file {path}: no AGE-SECRET-KEY-1… line (an age identity file: make one with age-keygen)"
        )
    return found


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a program that is not localmem (Litestream): ``base`` (this
    process's environment by default) without localmem's secrets (``SECRET_ENV``)."""
    return {k: v for k, v in (os.environ if base is None else base).items() if k not in SECRET_ENV}


def resolve_key(store: str | Path | None = None, *, keyring: bool = True) -> str | None:
    """The key from the sources in the module docstring's order, or None."""
    if named := os.environ.get(KEY_FILE_ENV):
        return read_key_file(named)
    if value := os.environ.get(KEY_ENV):
        return value
    return _from_keyring(store) if keyring else None


def _from_keyring(store: str | Path | None) -> str | None:
    try:
        import keyring  # optional: absent is "no keyring"
    except Exception:
        return None
    users = ([str(Path(store).resolve())] if store is not None else []) + ["default"]
    for user in users:
        try:
            found = keyring.get_password(KEYRING_SERVICE, user)
        except Exception:  # no backend, a locked one, no D-Bus: no key from the keyring
            return None
        if found:
            return str(found)
    return None


def no_cipher() -> str:
    """Why this environment's ``apsw`` cannot encrypt, and the one command that repairs it."""
    # lazy: it loads the email package (~12 ms), which a hook or query served over the socket does not need
    import importlib.metadata

    try:
        importlib.metadata.version("apsw-sqlite3mc")
    except importlib.metadata.PackageNotFoundError:
        return (
            "encryption needs apsw-sqlite3mc, localmem's build of apsw, and this environment has plain apsw: "
            "pip uninstall -y apsw && pip install --force-reinstall apsw-sqlite3mc (docs/security.md)"
        )
    return (
        "the apsw module here is plain apsw, installed over apsw-sqlite3mc (both provide `apsw`): "
        "pip uninstall -y apsw && pip install --force-reinstall --no-deps apsw-sqlite3mc (docs/security.md)"
    )


def apply_key(conn: apsw.Connection, key: str) -> None:
    """Key ``conn`` (its first statement) and keep its temporary tables in memory."""
    if not encryption_available():
        raise ConfigError(no_cipher())
    conn.pragma("key", key)
    conn.pragma("temp_store", "MEMORY")  # a sort or temp index spilled to /tmp would be plaintext


def unlock(conn: apsw.Connection, path: str | Path) -> bool:
    """Apply the store's key to a connection just opened on ``path`` (see the module
    docstring); True when the connection is encrypted."""
    target = str(path)
    if target == ":memory:" or target.startswith("file:"):
        return False
    state = file_state(target)
    if state == "plain":
        return False
    key = resolve_key(target, keyring=state == "encrypted")
    if key is None:
        if state == "encrypted":
            raise StoreLocked(f"{target}: {NEEDS_KEY}, unless it is not a localmem database at all")
        return False
    apply_key(conn, key)
    if state == "encrypted":
        check_key(conn, target)
    return True


def check_key(conn: apsw.Connection, target: str) -> None:
    """Read page 1 now, so that a wrong key is a clear error here and not later."""
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()
    except apsw.NotADBError as exc:
        raise StoreLocked(
            f"{target}: wrong key: the key does not open this store (or it is not a localmem database)"
        ) from exc


def is_encrypted(path: str | Path) -> bool:
    return file_state(path) == "encrypted"


def cipher_name() -> str:
    """The SQLite3MC version and the cipher a new encrypted store gets (its default)."""
    if not encryption_available():
        return "no cipher (plain apsw)"
    conn = apsw.Connection(":memory:")
    try:
        cipher = conn.execute("PRAGMA cipher").fetchall()
    finally:
        conn.close()
    return f"{getattr(apsw, 'mc_version', 'SQLite3MC')}, {cipher[0][0] if cipher else 'default cipher'}"


def key_opens(path: str | Path) -> bool:
    """Whether this process's key sources open the encrypted store at ``path``: a
    connection opened read-only, keyed, page 1 read, closed. A caller checks this before
    it asks a resident process (which holds the store open with its own key) to read the
    store, so the process keeps to the rules it would meet opening the store itself."""
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return False
    try:
        unlock(conn, path)
        return True
    except (ConfigError, apsw.Error):  # StoreLocked is a ConfigError: no key, or a wrong one
        return False
    finally:
        conn.close()
