"""localmem: embedded, local-first long-term memory for LLM assistants.

``localmem.open(path)`` returns a ``Store``: write turns, reconstruct the context that
answers a question, forget. Everything lives in one SQLite file.
"""

from __future__ import annotations

from pathlib import Path

from localmem.config import Settings, load_settings
from localmem.embedding import Embedder
from localmem.records import Context, EvidenceTurn, SessionIn, TurnIn, WriteResult
from localmem.store import Store

__version__ = "0.1.0"


def open(path: str | Path | None = None, embedder: Embedder | None = None, settings: Settings | None = None) -> Store:
    """Open (creating and migrating if needed) the store at ``path``; default: the
    configured database (``LOCALMEM_DB`` or the user data dir)."""
    settings = settings or load_settings()
    target = Path(path) if path is not None else settings.db
    return Store(target, embedder=embedder, settings=settings.with_overrides(db=target))


__all__ = [
    "Context",
    "Embedder",
    "EvidenceTurn",
    "SessionIn",
    "Settings",
    "Store",
    "TurnIn",
    "WriteResult",
    "__version__",
    "open",
]
