"""What a command says when the store itself is the trouble: an encrypted store opened
without its key or with a wrong one, and a damaged store, each with the way back.

``explain`` turns such an error into the one line a command prints: ``localmem.cli.main``
for every command (``stats`` among them) and ``doctor``'s checks. A key error is said as
storage says it (``keys.NEEDS_KEY``: "encrypted, no key given", or "wrong key"), never as
"locked" or an exception's class name. A damaged store is named as damaged, with the
command that puts its newest backup in place: ``localmem restore --latest`` where a rolling
backup of it exists, else ``localmem restore BACKUP --force``.

Invariants:
- ``explain`` never raises: it runs while another error is being reported;
- a damaged store is never sent to ``localmem backup`` (that copies the damage);
- the rolling backups (``storage.copies.rolling``) are optional here: without them (a
  checkout older than they are) a damaged store gets the generic hint.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from types import ModuleType

import apsw

from localmem.config import default_db_path
from localmem.errors import StoreCorrupt
from localmem.storage.engine import faults, keys

rolling: ModuleType | None
try:
    # the ignore is for a checkout without the rolling backups (mypy: no such attribute)
    from localmem.storage.copies import rolling  # type: ignore[attr-defined, no-redef, unused-ignore]
except ImportError:  # a checkout without the rolling backups: the generic hint (module docstring)
    rolling = None


def explain(exc: BaseException, db: str | Path | None = None) -> str | None:
    """The line for ``exc``, met using the store ``db`` (None: the path the error names),
    when it says the store is damaged or encrypted without a key that opens it; None for
    any other error."""
    if isinstance(exc, apsw.CorruptError):
        return damaged(db, _said(exc))
    if isinstance(exc, StoreCorrupt):
        cause = exc.__cause__
        return damaged(exc.path or db, _said(cause) if isinstance(cause, apsw.Error) else "")
    if isinstance(exc, keys.StoreLocked):
        return str(exc)
    return None


def damaged(db: str | Path | None, said: str = "") -> str:
    """A damaged store, named as damaged (``said``: SQLite's words), and the way back."""
    why = f" ({said})" if said else ""
    if db is None:
        return f"the store is damaged{why}; {faults.restore_hint()}"
    return f"the store at {db} is damaged{why}; {way_back(db)}"


def way_back(db: str | Path) -> str:
    """The command that restores the store ``db``: from its newest rolling backup when it
    has one, else from a backup file the person names."""
    command = "localmem" if _is_default(db) else f"localmem --db {shlex.quote(str(db))}"
    newest = newest_backup(db)
    if newest is None:
        return faults.restore_hint(command)
    return f"restore its newest backup ({newest}) with `{command} restore --latest`"


def newest_backup(db: str | Path) -> Path | None:
    """The newest rolling backup of ``db``; None when there is none, or no rolling backups
    in this checkout, or they cannot be listed (a hint must not fail its message)."""
    if rolling is None:
        return None
    try:
        found = rolling.latest(db)
    except Exception:  # any failure to list them: the generic hint, never a second error
        return None
    return Path(found) if found else None


def _is_default(db: str | Path) -> bool:
    try:
        return Path(db).resolve() == default_db_path().resolve()
    except OSError:
        return False


def _said(exc: apsw.Error) -> str:
    return str(exc).splitlines()[0] if str(exc) else ""
