"""The library's front door: the one way every entry point opens a store, and the
``Memory`` facade a Python caller holds.

Invariants:
- ``localmem.open()``, the CLI and the MCP server all open through ``open_store``: the
  same settings (file < environment < explicit arguments), the same embedder resolved
  by ``localmem.models.registry`` (``LOCALMEM_EMBEDDER`` means the same thing for all;
  left at "default", the embedder the store records, so a reembedded store just works),
  the same generator resolution (``generator``);
- ``Memory`` adds the read path to the store without the store knowing about it: the
  storage layer never imports retrieval.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from localmem.config import Settings, load_settings
from localmem.errors import InputError
from localmem.models import registry
from localmem.models.embedding import Embedder
from localmem.records import Context, ProjectScope, SessionIn, TurnIn, WriteResult
from localmem.retrieval.reconstruct import reconstruct
from localmem.retrieval.scope import project_scope
from localmem.retrieval.scorer_file import weights_for
from localmem.storage.write.store import Store

if TYPE_CHECKING:  # a read never loads the generation side (registry.generator_for does)
    from localmem.models.llm import LlamaGenerator


def open_store(
    settings: Settings, *, embedder: Embedder | None = None, rebind: bool = False, attempts: int = 6
) -> Store:
    """The store at ``settings.db`` with the configured embedder (or ``embedder``).
    ``rebind=True`` opens a store built with another embedder, for ``reindex``.

    Another process creating or migrating the same file at the same moment can hold the
    lock that switching to WAL needs past the busy timeout: opening is retried then."""
    emb = embedder or registry.embedder_for(settings)
    # The embedder setting left at "default" follows the store: a store moved to another
    # embedder by `localmem reembed` is read with that one (storage/write/binding).
    follow = registry.default_embedder if embedder is None and settings.embedder in ("", "default") else None
    for i in range(attempts):
        try:
            store = Store(settings.db, embedder=emb, settings=settings, rebind=rebind, follow=follow)
        except (apsw.BusyError, apsw.LockedError):
            if i == attempts - 1:
                raise
            time.sleep(0.2 * 2**i)
            continue
        try:  # the embedder's own scorer file (scorer_file): a malformed one is refused here, not mid-read
            weights_for(store.embedder)
        except BaseException:
            store.close()
            raise
        return store
    raise AssertionError("unreachable")


def generator(settings: Settings, model: str | None = None) -> LlamaGenerator:
    """The generation model an entry point uses: ``model`` (a flag), else the configured
    one, else the embedded default."""
    return registry.generator_for(settings, model)


class Memory:
    """A memory on one SQLite file: write turns, reconstruct the context that answers a
    question, forget. ``memory.store`` reaches the storage layer for everything else."""

    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def path(self) -> Path:
        return self.store.path

    @property
    def settings(self) -> Settings:
        return self.store.settings

    def write(
        self,
        turns: Sequence[TurnIn] | SessionIn,
        session: str | None = None,
        *,
        source: str = "api",
        started_at: str | None = None,
        origin: str | None = None,
    ) -> WriteResult:
        """Store turns in one transaction; returns the id of every turn given.
        ``origin``: the device they were folded from (None: made here), journaled."""
        return self.store.write(turns, session, source=source, started_at=started_at, origin=origin)

    def reconstruct(
        self,
        query: str,
        budget_tokens: int | None = None,
        as_of: str | None = None,
        scope: str | ProjectScope | None = None,
        *,
        project: str | Path | None = None,
    ) -> Context:
        """The context of at most ``budget_tokens`` that best answers ``query`` (no model
        call). ``scope``: a source or session key, or ``project:PATH``; ``project``: a
        folder, the same as ``scope=f"project:{project}"`` (``localmem.retrieval.scope``)."""
        if project is not None:
            if scope is not None:
                raise InputError("give scope or project, not both")
            scope = project_scope(project)
        return reconstruct(self.store, query, budget_tokens, as_of, scope)

    def forget(
        self,
        turn_ids: Sequence[int] = (),
        session: str | None = None,
        before: str | None = None,
        source: str | None = None,
        *,
        origin: str | None = None,
    ) -> int:
        """Delete turns by id, by session, or older than a time; returns how many.
        ``origin``: the device the forget was folded from (None: made here), journaled."""
        return self.store.forget(turn_ids, session=session, before=before, source=source, origin=origin)

    def stats(self) -> dict[str, Any]:
        return self.store.stats()

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_memory(
    path: str | Path | None = None, *, embedder: Embedder | None = None, settings: Settings | None = None
) -> Memory:
    """Open (creating and migrating if needed) the memory at ``path``; default: the
    configured database (``LOCALMEM_DB``, the config file, or the user data dir)."""
    settings = settings or load_settings()
    if path is not None:
        settings = settings.with_overrides(db=path)
    return Memory(open_store(settings, embedder=embedder))
