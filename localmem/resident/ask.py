"""The one call behind ``localmem query``, the hook entry point ``localmem recall`` and any
hook wiring: the store's resident process if one answers, else the same read in-process.

Invariant: the in-process read path (numpy, SQLite, the embedding model) is imported only
when no resident process answered, so a process served over the socket stays light
(docs/architecture.md, "Start-up").
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
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
    warm_model(settings)  # the model loads in a thread while the read path is imported
    from localmem.resident.local import context_here  # lazy: the read path (numpy, SQLite, the store)

    return context_here(settings, query), "in-process"


def warm_model(settings: Settings) -> None:
    """Start loading, in a thread of its own, the embedder a store opened with ``settings``
    will be read with (``models.registry.warm``), for a process about to read it once
    in-process: a query, a recall, a hook's. Nothing when that cannot be told."""
    # lazy: only a process that reads in-process loads the model layer (numpy, the registry)
    from localmem.models import registry
    from localmem.storage.write import binding

    spec = following(settings, binding.peek_spec)
    if spec is not None:  # not when it cannot be told: a wrong guess would cost a second load
        registry.warm(spec)


def following(settings: Settings, peek: Callable[[Path], str | None]) -> str | None:
    """The embedder spec a store opened with ``settings`` will be read with: the setting,
    or when it follows the store's record (left at "default"), the record ``peek`` reads;
    the default for a store not made yet. None when that cannot be told now (a store whose
    record cannot be read without opening it: encrypted, busy)."""
    spec = settings.embedder
    if spec not in ("", "default"):
        return spec
    path = Path(settings.db)
    recorded = peek(path)
    if recorded is not None:
        return recorded
    return None if path.exists() else spec


def absolute_project(query: Query, cwd: str | None = None) -> Query:
    """``query`` with a ``project:PATH`` scope's path absolute (``~`` expanded), against
    ``cwd`` (default: this process's folder; a resident process passes its caller's)."""
    scope = query.scope
    if scope is None or not scope.startswith(PROJECT_PREFIX) or not scope[len(PROJECT_PREFIX) :].strip():
        return query
    path = os.path.expanduser(scope[len(PROJECT_PREFIX) :].strip())
    path = os.path.normpath(os.path.join(cwd or os.getcwd(), path))  # os.path.abspath, from ``cwd``
    return replace(query, scope=PROJECT_PREFIX + path)
