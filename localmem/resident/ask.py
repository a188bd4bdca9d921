"""The one call behind ``localmem query``, the hook entry point ``localmem recall`` and any
hook wiring: the store's resident process if one answers, else the same read in-process.

Invariant: the in-process read path (numpy, SQLite, the embedding model) is imported only
when no resident process answered, so a process served over the socket stays light
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Literal

from localmem.config import Settings
from localmem.resident import client
from localmem.resident.wire import PROJECT_PREFIX, Query

Via = Literal["resident", "in-process"]


def context(settings: Settings, query: Query) -> tuple[dict[str, Any], Via]:
    """The context of ``query`` (``Context.to_dict()``) and where it was read. A project
    scope's path is made absolute here, against this process's folder: the resident
    process runs elsewhere (in-process it resolves the same)."""
    query = absolute_project(query)
    got = client.ask(settings, query)
    if got is not None:
        return got, "resident"
    # lazy: the read path is loaded only when no resident process answered
    from localmem.resident.local import context_here

    return context_here(settings, query), "in-process"


def absolute_project(query: Query, cwd: str | None = None) -> Query:
    """``query`` with a ``project:PATH`` scope's path absolute (``~`` expanded), against
    ``cwd`` (default: this process's folder; a resident process passes its caller's)."""
    scope = query.scope
    if scope is None or not scope.startswith(PROJECT_PREFIX) or not scope[len(PROJECT_PREFIX) :].strip():
        return query
    path = os.path.expanduser(scope[len(PROJECT_PREFIX) :].strip())
    path = os.path.normpath(os.path.join(cwd or os.getcwd(), path))  # os.path.abspath, from ``cwd``
    return replace(query, scope=PROJECT_PREFIX + path)
