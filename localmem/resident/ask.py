"""The one call behind ``localmem query``, the hook entry point ``localmem recall`` and any
hook wiring: the store's resident process if one answers, else the same read in-process.

Invariant: the in-process read path (numpy, SQLite, the embedding model) is imported only
when no resident process answered, so a process served over the socket stays light
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

from typing import Any, Literal

from localmem.config import Settings
from localmem.resident import client
from localmem.resident.wire import Query

Via = Literal["resident", "in-process"]


def context(settings: Settings, query: Query) -> tuple[dict[str, Any], Via]:
    """The context of ``query`` (``Context.to_dict()``) and where it was read."""
    got = client.ask(settings, query)
    if got is not None:
        return got, "resident"
    # lazy: the read path is loaded only when no resident process answered
    from localmem.resident.local import context_here

    return context_here(settings, query), "in-process"
