"""The store's embedder binding: which embedder wrote the live vector tables (meta:
``embedder_id``, ``embedder_dim``, ``embedder_spec``), checked when a store opens, at the
start of every read snapshot and inside every write of new vectors.

Invariants:
- the vectors of a store are of one embedder; an embedder chosen explicitly that is not
  it is refused with an ``EmbedderMismatch`` naming both ids and both ways out
  (``--embedder`` the recorded one, or ``localmem reembed --model`` this one);
- a store opened to follow its record (``follow``: the embedder setting left at
  ``default``) uses the recorded embedder, loaded by its spec, when it opens and again
  whenever a ``reembed`` switched the store since, so a long-lived reader embeds each
  query with the model that wrote the vectors that snapshot ranks, never the other one;
- a write whose vectors were embedded before a switch is refused inside its transaction
  (``EmbedderSwitched``), before it writes a row; the store embeds it again and retries.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from localmem.errors import EmbedderMismatch, LocalmemError
from localmem.models.embedding import Embedder
from localmem.storage.engine.db import Conn
from localmem.storage.vectors.rebuild import Recorded, recorded

Loader = Callable[[str], Embedder]  # a spec ("default", a folder or file path) -> its embedder


class EmbedderSwitched(EmbedderMismatch):
    """The store's vectors were switched to another embedder after this write's vectors
    were embedded (``localmem reembed`` in another process)."""


def spec_of(embedder: Embedder) -> str | None:
    """How the registry loads ``embedder`` again, when it was made by the registry."""
    spec = getattr(embedder, "spec", None)
    return spec if isinstance(spec, str) and spec else None


def load_spec(rec: Recorded) -> str:
    """The spec to load ``rec``'s embedder by. A record without one (stores bound before
    specs were recorded) or with the alias "default" (stores written before the default
    changed, issue 39: "default" then meant MiniLM) is loaded by its model id, which
    names the packaged embedder that wrote it; "default" would load today's default."""
    return rec.embedder_id if rec.spec in (None, "", "default") else rec.spec


def matches(rec: Recorded | None, embedder: Embedder) -> bool:
    return rec is None or (rec.embedder_id == embedder.model_id and rec.dim == embedder.dim)


def mismatch(path: Path, rec: Recorded, embedder: Embedder) -> EmbedderMismatch:
    spec = load_spec(rec)
    use = f"`--embedder {spec}`" if spec != rec.embedder_id else f"the embedder {rec.embedder_id!r} it was written with"
    target = spec_of(embedder) or "M"
    return EmbedderMismatch(
        f"{path} holds vectors of embedder {rec.embedder_id!r} ({rec.dim}-d), but it was opened with "
        f"{embedder.model_id!r} ({embedder.dim}-d). Open it with {use}, or move the store to this embedder "
        f"with `localmem reembed --model {target}` (reads keep working while it runs)."
    )


def resolve(conn: Conn, path: Path, embedder: Embedder, follow: Loader | None) -> Embedder:
    """The embedder to read and write this store's vectors with: ``embedder`` when the
    record names it (or there is none yet); with ``follow``, the recorded one, loaded;
    else an ``EmbedderMismatch``."""
    rec = recorded(conn)
    if rec is None or matches(rec, embedder):
        return embedder
    if follow is None:
        raise mismatch(path, rec, embedder)
    spec = load_spec(rec)
    try:
        loaded = follow(spec)
    except LocalmemError as exc:
        raise EmbedderMismatch(
            f"{path} holds vectors of embedder {rec.embedder_id!r} ({rec.dim}-d), recorded as {spec!r}, "
            f"which cannot be loaded here ({exc}). Open it with `--embedder` naming that model, or move the "
            "store to another embedder with `localmem reembed --model M`."
        ) from exc
    if not matches(rec, loaded):
        raise EmbedderMismatch(
            f"{path} holds vectors of embedder {rec.embedder_id!r} ({rec.dim}-d), but {spec!r} is now "
            f"{loaded.model_id!r} ({loaded.dim}-d): its files changed. Run `localmem reembed --model {spec}` "
            "to embed the store again with it."
        )
    return loaded


def check_write(conn: Conn, embedder: Embedder) -> None:
    """Inside a write transaction that adds vectors embedded by ``embedder``: refuse it
    (``EmbedderSwitched``) when the store's vectors are now another embedder's."""
    rec = recorded(conn)
    if not matches(rec, embedder):
        assert rec is not None
        raise EmbedderSwitched(
            f"the store's vectors were switched to {rec.embedder_id!r} while this write was embedded with "
            f"{embedder.model_id!r}"
        )
