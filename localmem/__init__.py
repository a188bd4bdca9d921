"""localmem: embedded, local-first long-term memory for LLM assistants.

``localmem.open(path)`` returns a ``Memory``: write turns, reconstruct the context that
answers a question, forget. Everything lives in one SQLite file.

``Memory``, ``open``, ``Embedder``, ``Settings`` and the records are resolved on first use
(PEP 562): every ``import localmem.<module>`` runs this file first, and a process that needs
only a light module (``localmem --help``, a query answered by a resident server, the hook
entry point) must not pay for numpy, SQLite and the read path, nor, for the fast entry
(``localmem.resident.quick``), for the settings (typing, dataclasses, platformdirs, tomllib:
~35 ms) (docs/architecture.md, "Start-up").
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself costs ~3 ms of the fast entry; type checkers take the branch
if TYPE_CHECKING:  # what the lazy names are, for type checkers; at run time __getattr__ loads them
    from typing import Any

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


def __getattr__(name: str) -> Any:
    if name in ("Memory", "open"):
        # lazy: the facade's module loads numpy, SQLite and the read path
        from localmem.memory import Memory, open_memory

        value: Any = Memory if name == "Memory" else open_memory
    elif name == "Settings":
        # lazy: the settings' module loads typing, dataclasses, platformdirs and tomllib
        from localmem.config import Settings

        value = Settings
    elif name == "Embedder":
        # lazy: its module loads numpy
        from localmem.models.embedding import Embedder

        value = Embedder
    elif name in ("Context", "EvidenceTurn", "SessionIn", "TurnIn", "WriteResult"):
        # lazy: ten dataclasses, ~5 ms of a start that a query answered over the socket does not use
        from localmem import records

        value = getattr(records, name)
    else:
        raise AttributeError(f"module 'localmem' has no attribute {name!r}")
    globals()[name] = value  # resolved once
    return value
