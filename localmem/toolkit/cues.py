"""Cue tools: find cues for a text, the tags of a cue, the turns of a (cue, tag).

The first steps of MRAgent's walk (3.4): search cues -> tags of a cue -> turns of a
(cue, tag).

Invariants:
- a "cue" in MRAgent's sense is an entity or phrase that may recur across turns:
  functions that take a cue accept a cue id or its text and act on every cue with the
  same text (case-insensitive, :func:`_cue_group`);
- results are paged and capped as in :mod:`localmem.toolkit.common`; read-only
  (``localmem.storage.reads.traversal``'s reads), apart from embedding the query text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from localmem.errors import InputError, NotFound
from localmem.storage.reads import queries, traversal
from localmem.storage.vectors.stored import turn_vectors
from localmem.storage.write.store import Store
from localmem.toolkit.common import (
    DEFAULT_LIMIT,
    _bounds,
    _cue_refs,
    _page,
    _slice,
    _time,
    _visible,
    snapshot_read,
    turn_refs,
)
from localmem.toolkit.records import CueHit, Page, TagCount, TurnRef
from localmem.util.text import fts_query

CUE_KINDS = ("statement", "triple", "keyword", "fact")
_POOL = 200  # candidates looked at per matching method in search_cues


def _all_words_query(text: str) -> str:
    """FTS5 MATCH for rows holding every content word of ``text`` (quoted, ANDed)."""
    words = [w for w in fts_query(text, queries.STOPWORDS).split(" OR ") if w]
    return " AND ".join(words)


@snapshot_read
def search_cues(
    store: Store,
    text: str,
    *,
    kinds: Sequence[str] | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    as_of: str | None = None,
    scope: str | None = None,
) -> Page[CueHit]:
    """Cues matching ``text``, best first: exact text matches, then cues holding all its
    words (FTS5, stemmed; the indexed text carries the speaker and date), then the
    most similar by embedding, then cues sharing some words. Each hit has its tags."""
    if not isinstance(text, str) or not text.strip():
        raise InputError("text must be a non-empty string")
    limit, offset = _bounds(limit, offset)
    want = tuple(kinds) if kinds else CUE_KINDS
    bad = [k for k in want if k not in CUE_KINDS]
    if bad:
        raise InputError(f"unknown cue kind(s) {bad}; kinds are {list(CUE_KINDS)}")
    cut = _time(as_of, "as_of")
    pool = min(_POOL, offset + limit + 50)
    best: dict[int, tuple[int, float, str]] = {}  # cue id -> (tier, score, match)

    def add(cid: int, tier: int, score: float, match: str) -> None:
        have = best.get(cid)
        if have is None or (tier, score) > (have[0], have[1]):
            best[cid] = (tier, score, match)

    for cid in traversal.cue_ids_with_text(store.conn, text.strip(), pool):
        add(cid, 3, 1.0, "exact")
    match_all = _all_words_query(text)
    match_any = fts_query(text, queries.STOPWORDS)
    for table in ("cues_fts", "extracted_cues_fts"):
        for match, tier, name in ((match_all, 2, "all_words"), (match_any, 0, "some_words")):
            if not match:
                continue
            ranked = traversal.fts_match(store.conn, table, match, pool)
            top = max((s for _, s in ranked), default=1.0) or 1.0
            for cid, s in ranked:
                add(cid, tier, s / top, name)
    with store.snapshot():
        mirror = store.mirror("cue")
        if len(mirror.ids):
            qvec = store.embedder.embed([text])[0].astype(np.float32)
            pos, sims = mirror.nearest(store.conn, qvec, pool)
            for cid, sim in zip(mirror.ids[pos].tolist(), sims.tolist(), strict=True):
                add(cid, 1, sim, "similar")
    if not best:
        return _page([], 0, limit, offset)
    ids = list(best)
    rows = traversal.cue_hits(store.conn, ids)
    keep = [cid for cid in ids if cid in rows and rows[cid].cue.kind in want]
    if cut is not None or scope:
        seen = _visible(store, [rows[c].cue.turn_id for c in keep], cut, scope)
        keep = [c for c in keep if rows[c].cue.turn_id in seen]
    keep.sort(key=lambda c: (-best[c][0], -best[c][1], c))
    page = keep[offset : offset + limit]
    refs = {c.cue_id: c for c in _cue_refs(store, [rows[c].cue for c in page])}
    hits = [CueHit(refs[c], best[c][2], round(best[c][1], 4), rows[c].ts, rows[c].speaker) for c in page]
    return _page(hits, len(keep), limit, offset)


def _cue_group(store: Store, cue: int | str) -> list[int]:
    """Ids of every cue with the same text as ``cue`` (an id or a text), case-insensitive."""
    if isinstance(cue, int) and not isinstance(cue, bool):
        found = traversal.cue_text(store.conn, cue)
        if found is None:
            raise NotFound(f"no cue with id {cue}")
        text = found
    elif isinstance(cue, str) and cue.strip():
        text = cue.strip()
    else:
        raise InputError("cue must be a cue id or a non-empty cue text")
    ids = traversal.cue_ids_with_text(store.conn, text)
    if not ids:
        raise NotFound(f"no cue {text!r}; use search_cues to find cues")
    return ids


@snapshot_read
def cue_tags(store: Store, cue: int | str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TagCount]:
    """The tags (relation / aspect labels) of a cue, over every turn where it occurs,
    most used first. Statement cues have none; extracted keywords and facts do."""
    limit, offset = _bounds(limit, offset)
    ids = _cue_group(store, cue)
    items = [TagCount(r.tag, r.turns, r.cue_ids[:20]) for r in traversal.tag_counts(store.conn, ids)]
    return _slice(items, limit, offset)


@snapshot_read
def cue_turns(
    store: Store,
    cue: int | str,
    tag: str | None = None,
    *,
    query: str | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
) -> Page[TurnRef]:
    """Turns where the cue occurs (with ``tag``, when given). When there are many, the
    ones most similar to ``query`` (default: the cue's text) come first."""
    limit, offset = _bounds(limit, offset)
    ids = _cue_group(store, cue)
    turn_ids = traversal.tagged_turns(store.conn, ids, tag) if tag else traversal.turns_of_cues(store.conn, ids)
    if len(turn_ids) > 1:
        probe = query or traversal.cue_text(store.conn, ids[0]) or ""
        turn_ids = _by_similarity(store, turn_ids, probe)
    page = turn_ids[offset : offset + limit]
    refs = turn_refs(store, page)
    return _page([refs[t] for t in page if t in refs], len(turn_ids), limit, offset)


def _by_similarity(store: Store, turn_ids: list[int], text: str) -> list[int]:
    ids = np.array(turn_ids, dtype=np.int64)
    qvec = store.embedder.embed([text])[0].astype(np.float32)
    with store.snapshot():
        pos = store.turn_mirror().index_of(ids)
        vecs = turn_vectors(store.conn, ids, store.embedder.dim)
    sims = np.where(pos >= 0, vecs @ qvec, -2.0)
    order = np.argsort(-sims, kind="stable")
    return [int(ids[i]) for i in order]
