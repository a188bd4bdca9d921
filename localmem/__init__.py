"""localmem: embedded, local-first long-term memory for LLM assistants.

``localmem.open(path)`` returns a ``Memory``: write turns, reconstruct the context that
answers a question, forget. Everything lives in one SQLite file.
"""

from __future__ import annotations

from localmem.config import Settings
from localmem.memory import Memory
from localmem.memory import open_memory as open
from localmem.models.embedding import Embedder
from localmem.records import Context, EvidenceTurn, SessionIn, TurnIn, WriteResult

__version__ = "0.1.0"

__all__ = [
    "Context",
    "Embedder",
    "EvidenceTurn",
    "Memory",
    "SessionIn",
    "Settings",
    "TurnIn",
    "WriteResult",
    "__version__",
    "open",
]
