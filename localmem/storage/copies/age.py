"""age-encrypted exports and backups (PyPI ``pyrage``, a dependency of localmem), and reading them back.

Writing: the plaintext goes to age as it is produced (through a pipe to ``pyrage.encrypt_io``
in a thread), into a file beside the destination that is renamed over it once complete and
flushed; a plaintext store's backup is made in memory (the backup API into ``:memory:``,
checked, serialized), so no plaintext copy touches the disk. An encrypted store's backup is
already ciphertext (SQLite3MC, the store's key) and is age-encrypted on top.

Reading: an age file is recognised by its header; it is decrypted with the identities in
``--age-identity FILE`` / ``$LOCALMEM_AGE_IDENTITY`` (mode 600, like a key file) into an
anonymous in-memory file (``memfd``), whose ``/proc/self/fd`` path is read like any file.

Recipients: ``age1…`` (X25519), ``ssh-ed25519 …`` / ``ssh-rsa …``, or a file of them, one per
line (``#`` comments). Nothing here implements cryptography: age does.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import apsw

from localmem.errors import ConfigError, InputError, LocalmemError
from localmem.storage.copies import backup
from localmem.storage.engine import db, keys
from localmem.util import private

IDENTITY_ENV = keys.AGE_IDENTITY_ENV
MAGIC = b"age-encryption.org/v1\n"
ARMOR = b"-----BEGIN AGE ENCRYPTED FILE-----"


def _pyrage() -> Any:
    try:
        import pyrage  # lazy: only exports, backups and reads of .age files load it (a query never does)
    except ImportError as exc:  # a dependency, missing where localmem was installed with --no-deps
        raise ConfigError(
            "age encryption needs pyrage, a dependency of localmem missing here: pip install 'pyrage>=1.2'"
        ) from exc
    return pyrage


def is_age(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(len(ARMOR))
    except OSError:
        return False
    return head.startswith(MAGIC) or head.startswith(ARMOR)


def recipients(specs: list[str]) -> list[Any]:
    """Parsed age recipients from ``--encrypt-to`` values (each a recipient or a file of them)."""
    pyrage = _pyrage()
    lines: list[tuple[str, str]] = []
    for spec in specs:
        p = Path(spec)
        if not spec.startswith(("age1", "ssh-")) and p.is_file():
            lines += [(f"{p}:{n}", ln.strip()) for n, ln in enumerate(p.read_text("utf-8").splitlines(), 1)]
        else:
            lines.append(("--encrypt-to", spec.strip()))
    out = []
    for where, text in lines:
        if not text or text.startswith("#"):
            continue
        try:
            out.append(
                pyrage.ssh.Recipient.from_str(text)
                if text.startswith("ssh-")
                else pyrage.x25519.Recipient.from_str(text)
            )
        except Exception as exc:
            raise InputError(f"not an age recipient (age1…, ssh-ed25519 …): {exc}", path=where) from exc
    if not out:
        raise InputError("no age recipient given", path="--encrypt-to")
    return out


def identities(path: str | Path | None = None) -> list[Any]:
    """The identities to decrypt with, from ``path`` or ``$LOCALMEM_AGE_IDENTITY``."""
    pyrage = _pyrage()
    named = path or os.environ.get(IDENTITY_ENV)
    if not named:
        raise ConfigError("this file is age-encrypted; give its identity: --age-identity FILE or LOCALMEM_AGE_IDENTITY")
    found = []
    for text in keys.read_age_identities(named):  # the one reader: exists, mode 600, the lines
        try:
            if text.startswith("AGE-SECRET-KEY-"):
                found.append(pyrage.x25519.Identity.from_str(text))
            else:
                found.append(pyrage.ssh.Identity.from_buffer(text.encode()))
        except Exception as exc:
            raise ConfigError(f"{named}: not an age identity or ssh private key age can use: {exc}") from exc
    return found


@contextmanager
def encrypting(out: IO[bytes], recips: list[Any]) -> Iterator[IO[bytes]]:
    """A file to write plaintext to; age encrypts it into ``out`` as it comes."""
    pyrage = _pyrage()
    rfd, wfd = os.pipe()
    failed: list[BaseException] = []

    def pump() -> None:
        try:
            with os.fdopen(rfd, "rb") as reader:
                pyrage.encrypt_io(reader, out, recips)
        except BaseException as exc:
            failed.append(exc)

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    writer = os.fdopen(wfd, "wb")
    try:
        yield writer
    finally:
        writer.close()  # end of input: age writes its last chunk
        thread.join()
    if failed:
        raise LocalmemError(f"age encryption failed: {failed[0]}")


@contextmanager
def encrypted_file(dest: Path, recips: list[Any]) -> Iterator[IO[bytes]]:
    """``encrypting`` into ``dest``, which appears only once complete (written beside it, renamed)."""
    tmp = dest.with_name(f".{dest.name}.part")
    try:
        with private.open_private(tmp, "wb") as fh:  # 600 whatever the umask, as every file localmem makes
            with encrypting(fh, recips) as plain:
                yield plain
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise InputError(f"cannot write: {exc}", path=str(dest)) from exc
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def backup_encrypted(source: Path, dest: Path, recips: list[Any], *, force: bool = False) -> dict[str, object]:
    """An age-encrypted online backup of ``source`` at ``dest`` (see the module docstring)."""
    if dest.exists() and not force:
        raise InputError("already exists; pass --force to replace it", path=str(dest))
    if not dest.parent.is_dir():
        raise InputError("its folder does not exist", path=str(dest))
    if keys.is_encrypted(source):
        inner = dest.with_name(f".{dest.name}.inner-{os.getpid()}")
        try:
            report = backup.backup(source, inner, force=True)  # ciphertext (the store's key) on disk
            with encrypted_file(dest, recips) as plain, inner.open("rb") as src:
                while chunk := src.read(1 << 20):
                    plain.write(chunk)
        finally:
            inner.unlink(missing_ok=True)
        return {"path": str(dest), "turns": report.turns, "sessions": report.sessions, "bytes": dest.stat().st_size}
    live = db.connect(source)
    mem = apsw.Connection(":memory:")
    try:
        with mem.backup("main", live, "main") as b:
            b.step(-1)  # one read transaction: one consistent snapshot, in memory
        check = [str(r[0]) for r in mem.execute("PRAGMA integrity_check")]
        if check != ["ok"]:
            raise LocalmemError(f"the backup failed its integrity check: {'; '.join(check[:5])}")
        row: tuple[Any, ...] = mem.execute(
            "SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM sessions)"
        ).fetchall()[0]
        image = mem.serialize("main")
    finally:
        mem.close()
        live.close()
    with encrypted_file(dest, recips) as plain:
        plain.write(image)
    return {"path": str(dest), "turns": int(row[0]), "sessions": int(row[1]), "bytes": dest.stat().st_size}


def decrypt_to_memory(path: Path, idents: list[Any]) -> tuple[int, Path]:
    """Decrypt the age file ``path`` into an in-memory file; its descriptor (close it when
    done) and a path that opens it in this process."""
    pyrage = _pyrage()
    fd = os.memfd_create(f"localmem-{path.name}")
    try:
        with path.open("rb") as src, os.fdopen(os.dup(fd), "wb") as dst:
            pyrage.decrypt_io(src, dst, idents)
    except Exception as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise InputError(f"cannot read: {exc.strerror or exc}", path=str(path)) from exc
        raise InputError(f"cannot decrypt with the identity given: {exc}", path=str(path)) from exc
    return fd, Path(f"/proc/self/fd/{fd}")
