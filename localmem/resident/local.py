"""The read a resident process does for a caller, and the same read in the caller's own
process when no resident process answers: one function, so both give the same context.
"""

from __future__ import annotations

from typing import Any

from localmem.config import Settings
from localmem.memory import open_store
from localmem.resident.wire import Query
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.write.store import Store


def context(store: Store, query: Query) -> dict[str, Any]:
    """``reconstruct``'s context of ``query`` on ``store``, as ``Context.to_dict()``."""
    return reconstruct(
        store, query.text, query.budget, as_of=query.as_of, scope=query.scope, exclude_session=query.exclude
    ).to_dict()


def context_here(settings: Settings, query: Query) -> dict[str, Any]:
    """The same context read in this process (the store opened and closed here)."""
    with open_store(settings) as store:
        return context(store, query)
