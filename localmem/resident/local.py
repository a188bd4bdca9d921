"""The read a resident process does for a caller, and the same read in the caller's own
process when no resident process answers: one function, so both give the same context
and both write the same recall-log row (best effort: a busy store costs the row, never
the caller's context).
"""

from __future__ import annotations

from typing import Any

from localmem.config import Settings
from localmem.memory import open_store
from localmem.resident.wire import PROJECT_PREFIX, Query
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.layers import recalls
from localmem.storage.layers.recalls import RecallWrite
from localmem.storage.write.store import Store


def context(store: Store, query: Query) -> dict[str, Any]:
    """``reconstruct``'s context of ``query`` on ``store``, as ``Context.to_dict()``, its
    recall-log row written."""
    ctx, record = read(store, query)
    log(store, record)
    return ctx


def read(store: Store, query: Query) -> tuple[dict[str, Any], RecallWrite]:
    """The context and the recall-log row it leaves to write (a resident process writes it
    once its reply is on its way: ``resident.server``)."""
    ctx = reconstruct(
        store, query.text, query.budget, as_of=query.as_of, scope=query.scope, exclude_session=query.exclude
    )
    scope = query.scope or ""
    project = scope[len(PROJECT_PREFIX) :] if scope.startswith(PROJECT_PREFIX) else None
    record = recalls.from_context(
        ctx, query.client, query.tool, as_of=query.as_of, scope=query.scope, session=query.exclude, project=project
    )
    return ctx.to_dict(), record


def log(store: Store, record: RecallWrite) -> None:
    """Write a read's recall-log row (best effort: a busy store costs the row)."""
    recalls.log(store.conn, record, store.settings.recall_log)


def context_here(settings: Settings, query: Query) -> dict[str, Any]:
    """The same context read in this process (the store opened and closed here)."""
    with open_store(settings) as store:
        return context(store, query)
