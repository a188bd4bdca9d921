"""The age keys a sync folder's segments are encrypted with (PyPI ``pyrage``, the Rust
``age`` implementation; no cryptography of our own).

Either a passphrase (age's scrypt recipient: every segment costs a deliberate ~1 s key
derivation to write and to read, fine for a few segments a minute) or X25519 identities
(``AGE-SECRET-KEY-1…`` lines in a file, as ``age-keygen`` writes them): segments are
encrypted to every identity's public key plus any extra ``age1…`` recipients, and
decrypted with any of the identities. Invariant: a body that does not decrypt raises
``Refused``; nothing is ever folded from it. ``pyrage`` (a dependency of localmem) is imported
only when a key is set, so a plaintext sync never loads it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localmem.errors import ConfigError
from localmem.storage.engine.keys import SYNC_PASSPHRASE_ENV, read_age_identities, read_key_file
from localmem.sync.errors import Refused

_CHECK = b"localmem sync key check 1"
_MATCHED: dict[tuple[bytes, bytes], bool] = {}  # (check, passphrase) digests -> matched, this process


def _pyrage() -> Any:
    try:
        import pyrage  # lazy: only a sync with a key loads it
    except ImportError:  # a dependency, missing where localmem was installed with --no-deps
        raise ConfigError(
            "encrypted sync needs pyrage, a dependency of localmem missing here: pip install 'pyrage>=1.2'"
        ) from None
    return pyrage


@dataclass(frozen=True)
class Keyring:
    passphrase: str | None = None
    identities: tuple[str, ...] = ()  # AGE-SECRET-KEY-1... strings
    recipients: tuple[str, ...] = field(default=())  # extra age1... public keys

    @property
    def encrypts(self) -> bool:
        return bool(self.passphrase or self.identities or self.recipients)

    def describe(self) -> str:
        if self.passphrase:
            return "age (passphrase)"
        if self.identities or self.recipients:
            return f"age ({len(self.identities)} identities, {len(self.recipients)} extra recipients)"
        return "none (plaintext)"

    @property
    def sealed(self) -> str:
        """How a segment body is kept under this keyring: ``age`` or ``plain``."""
        return "age" if self.encrypts else "plain"

    def check(self) -> bytes:
        """A record of this keyring that says whether a later one is the same, without
        holding the key: ``plain``; for identities and recipients the sha256 of the
        public keys segments go to; for a passphrase a short text age-encrypted with it."""
        if not self.encrypts:
            return b"plain"
        if not self.passphrase:
            return b"x25519:" + hashlib.sha256("\n".join(sorted(self._recipient_keys())).encode()).hexdigest().encode()
        return b"scrypt:" + self.encrypt(_CHECK)

    def matches(self, check: bytes) -> bool:
        """Whether ``check`` (from ``check()``) was made by the same keys as this keyring
        (a passphrase costs one scrypt, once per process)."""
        if not check.startswith(b"scrypt:") or not self.passphrase:
            return check == self.check()
        memo = (hashlib.sha256(check).digest(), hashlib.sha256(self.passphrase.encode()).digest())
        if memo not in _MATCHED:
            try:
                _MATCHED[memo] = (
                    bytes(_pyrage().passphrase.decrypt(check[len(b"scrypt:") :], self.passphrase)) == _CHECK
                )
            except _pyrage().DecryptError:
                _MATCHED[memo] = False
        return _MATCHED[memo]

    def _recipient_keys(self) -> list[str]:
        pyrage = _pyrage()
        try:
            own = [str(pyrage.x25519.Identity.from_str(i).to_public()) for i in self.identities]
        except (pyrage.IdentityError, ValueError) as exc:
            raise ConfigError(f"a sync key is not a valid age identity: {exc}") from None
        return own + list(self.recipients)

    def encrypt(self, data: bytes) -> bytes:
        pyrage = _pyrage()
        if self.passphrase:
            return bytes(pyrage.passphrase.encrypt(data, self.passphrase))
        try:
            recipients = [pyrage.x25519.Identity.from_str(i).to_public() for i in self.identities]
            recipients += [pyrage.x25519.Recipient.from_str(r) for r in self.recipients]
        except (pyrage.IdentityError, pyrage.RecipientError, ValueError) as exc:
            raise ConfigError(f"a sync key is not a valid age identity or recipient: {exc}") from None
        return bytes(pyrage.encrypt(data, recipients))

    def decrypt(self, data: bytes) -> bytes:
        if not self.encrypts:
            raise Refused(
                "the segment is age encrypted and no key is set on this device (--passphrase-file/--identity)"
            )
        pyrage = _pyrage()
        try:
            if self.passphrase:
                return bytes(pyrage.passphrase.decrypt(data, self.passphrase))
            if not self.identities:
                raise Refused("the segment is encrypted; recipients alone cannot decrypt it (give --identity)")
            ids = [pyrage.x25519.Identity.from_str(i) for i in self.identities]
            return bytes(pyrage.decrypt(data, ids))
        except pyrage.DecryptError as exc:
            raise Refused(f"the segment does not decrypt with this device's key ({exc})") from None


def new_identity() -> str:
    """A new age X25519 identity (``AGE-SECRET-KEY-1…``), as ``age-keygen`` makes one."""
    return str(_pyrage().x25519.Identity.generate())


def load_keyring(
    passphrase_file: Path | None, identity_files: list[Path], recipients: list[str], env_passphrase: str | None
) -> Keyring:
    """The keyring the command line asks for. Key files are read by the one reader
    (``storage.engine.keys``): a file that is missing, empty or readable by others
    (not ``chmod 600``) is a ``ConfigError``."""
    passphrase = env_passphrase or None
    if passphrase_file is not None:
        passphrase = read_key_file(passphrase_file)
    identities: list[str] = []
    for f in identity_files:
        found = read_age_identities(f)
        if any(not i.startswith("AGE-SECRET-KEY-") for i in found):
            raise ConfigError(f"{f}: sync takes age identities (age-keygen), not ssh keys")
        identities += found
    if passphrase and (identities or recipients):
        raise ConfigError("give a passphrase or identities/recipients, not both")
    return Keyring(passphrase, tuple(identities), tuple(recipients))


# -- the command line's key flags (``localmem sync``, ``serve`` / ``localmem-mcp`` / ``watch --sync``) --


def add_key_flags(c: argparse.ArgumentParser, prefix: str = "") -> None:
    c.add_argument(
        f"--{prefix}passphrase-file",
        type=Path,
        help=f"encrypt segments with age to the passphrase in this file, mode 600 (or set ${SYNC_PASSPHRASE_ENV})",
    )
    c.add_argument(
        f"--{prefix}identity",
        type=Path,
        action="append",
        default=[],
        help="an age identity file (age-keygen, mode 600): encrypt to its public key, decrypt with it (repeatable)",
    )
    c.add_argument(
        f"--{prefix}recipient", action="append", default=[], help="also encrypt to this age1… public key (repeatable)"
    )


def add_sync_flags(c: argparse.ArgumentParser) -> None:
    """``--sync DIR`` and its interval and keys, for a command that syncs in the background."""
    c.add_argument("--sync", type=Path, metavar="DIR", help="also sync with this folder in the background")
    c.add_argument("--sync-interval", type=float, default=30.0, help="seconds between background syncs (default 30)")
    add_key_flags(c, "sync-")


def keyring(args: argparse.Namespace, prefix: str = "") -> Keyring:
    """The keyring ``add_key_flags``' flags (with ``prefix``) and the environment ask for."""
    p = prefix.replace("-", "_")
    return load_keyring(
        getattr(args, f"{p}passphrase_file"),
        list(getattr(args, f"{p}identity")),
        list(getattr(args, f"{p}recipient")),
        os.environ.get(SYNC_PASSPHRASE_ENV),
    )
