"""Another device's changes into this store: the write of one fold step, as
``layers.cues.commit_extractions`` is the write of one extraction step.

``localmem.sync`` reads and checks a segment and turns each change into a record here
(``Incoming``: tombstones, sessions of turns, session headers, ``Derived`` changes by
turn hash); ``commit_segment`` stores all of it and records the file as folded in ONE
short transaction, so a segment is folded whole or not at all. Everything it changes
goes through the door (``write.changes``) with ``origin=<device>``.

The merge rules (docs/sync.md, ``localmem/sync/apply.py``) need the store's state at the
moment of writing, so they run here, inside the transaction, as conditional writes:
- forget wins: tombstones first (their hashes join the forget set), then turns without
  the forgotten ones; a derived change about a forgotten turn is dropped;
- a derived change whose turn has not arrived waits in ``sync_pending`` (its JSON as the
  segment held it), and ``commit_pending`` applies it when the turn comes;
- a cue that the turn has already (another model made it) is merged, not added twice;
- a session header only fills in a session that has turns here: a session exists only
  with turns (the write path makes none without), so a forgotten one stays gone;
- a topic change older than the one applied (hybrid-clock stamp) is skipped whole.

Model calls (embedding new turns and folded cues) happen before the transaction opens;
a turn that another process removed meanwhile is embedded inside, as ``Store`` does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from localmem.records import SessionIn
from localmem.storage.engine import db
from localmem.storage.sync import log as sync_log
from localmem.storage.sync import state as sync_state
from localmem.storage.write import binding, forgets
from localmem.storage.write import changes as door
from localmem.storage.write.graph import link_semantic
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_doc


@dataclass(frozen=True)
class TopicChange:
    """A topic made, changed or removed on another device, by its key."""

    key: str
    hlc: int
    removed: bool = False
    kind: str = ""
    label: str = ""
    summary: str = ""
    updated_at: str = ""
    add: tuple[str, ...] = ()  # turn hashes joining it
    remove: tuple[str, ...] = ()  # turn hashes leaving it
    topics: tuple[str, ...] = ()  # keys of the session topics a theme groups


@dataclass(frozen=True)
class Derived:
    """A model-derived change, by the hashes of the turns it is about (``needs``: it
    waits for them and is dropped if one is forgotten; a topic needs nothing)."""

    kind: str  # enrichment / cue / antecedent / topic / topic_removed
    raw: str  # the change as the segment held it (JSON): what waits in sync_pending
    model: str
    needs: tuple[str, ...] = ()
    turn: str = ""  # enrichment, cue: the turn's hash
    enrichment: door.EnrichmentWrite | None = None
    cue: door.CueWrite | None = None
    link: tuple[str, str, float, str] | None = None  # antecedent: src, dst hashes, weight, reason
    topic: TopicChange | None = None


@dataclass(frozen=True)
class Incoming:
    """One segment's changes, in the order they apply."""

    forgets: tuple[str, ...] = ()
    sessions: tuple[SessionIn, ...] = ()
    headers: tuple[door.SessionWrite, ...] = ()
    derived: tuple[Derived, ...] = ()


@dataclass(frozen=True)
class FoldedFile:
    """The segment file being folded, as ``sync_folded`` records it; ``hlc``: this
    device's clock after observing the segment's newest stamp."""

    device: str
    number: int
    name: str
    sha256: str
    changes: int
    size: int
    hlc_hi: int
    hlc: int


@dataclass
class Counts:
    turns: int = 0
    forgotten: int = 0
    derived: int = 0
    pending: int = 0
    dropped: int = 0


_CueVectors = dict[int, tuple[str, np.ndarray]]  # id() of a cue change -> its indexed text and vector


def commit_segment(store: Store, f: FoldedFile, incoming: Incoming) -> Counts:
    """Apply a segment's changes and record it as folded, in one transaction."""
    staged = store.stage(incoming.sessions)
    vectors = store.embed(staged.fresh)
    known = {p.hash: (p.turn.speaker, p.ts) for _, ps in staged.sessions for p in ps}
    cues = _embed_cues(store, incoming.derived, known)
    conn = store.conn

    def commit() -> Counts:
        out = Counts()
        with db.transaction(conn):
            if cues:  # embedded before a reembed switched the store? refused, folded again next pass
                binding.check_write(conn, store.embedder)
            if incoming.forgets:
                forgets.mark_forgotten(conn, incoming.forgets)
                out.forgotten += door.forget(conn, incoming.forgets, origin=f.device)
                staged.sessions[:] = forgets.drop_forgotten(conn, staged.sessions)
            results = store.write_staged(staged, dict(vectors), f.device)
            out.turns += sum(r.new_turns for r in results)
            for header in incoming.headers:  # fills a session in, never makes one without turns
                if sync_state.session_exists(conn, header.source, header.key):
                    door.add_session(conn, header, origin=f.device)
            _apply_derived(store, f.device, incoming.derived, cues, out)
            sync_log.record_folded(conn, f.device, f.number, f.sha256, f.name, f.changes, f.size, f.hlc_hi)
            sync_state.save_hlc(conn, f.hlc)
        return out

    return store.retrying(commit)


def commit_pending(store: Store, device: str, derived: Sequence[Derived], rows: Sequence[int]) -> Counts:
    """Apply derived changes that waited for a turn (``rows``: their ``sync_pending``
    ids, removed in the same transaction); one still missing a turn waits again."""
    cues = _embed_cues(store, derived, {})
    conn = store.conn

    def commit() -> Counts:
        out = Counts()
        with db.transaction(conn):
            if cues:
                binding.check_write(conn, store.embedder)
            sync_log.drop_pending(conn, list(rows))
            _apply_derived(store, device, derived, cues, out)
        return out

    return store.retrying(commit)


def record_refusal(store: Store, device: str, name: str, reason: str, *, incomplete: bool) -> None:
    """A segment not folded (refused, or still arriving), with the reason."""

    def record() -> None:
        with db.transaction(store.conn):
            sync_log.record_refused(store.conn, device, name, reason, incomplete=incomplete)

    store.retrying(record)


def forget_refusals(store: Store, device: str, present: set[str]) -> None:
    """Drop the refusals of ``device``'s files that are no longer in its folder."""
    if all(r.name in present for r in sync_log.refused(store.conn) if r.device == device):
        return  # nothing to drop: no write transaction

    def tidy() -> None:
        with db.transaction(store.conn):
            sync_log.clear_refused(store.conn, device, present)

    store.retrying(tidy)


# -- inside the transaction ------------------------------------------------------------


def _embed_cues(store: Store, derived: Sequence[Derived], known: dict[str, tuple[str, str | None]]) -> _CueVectors:
    """The indexed text and vector of each folded cue whose turn is stored or arriving
    (who said it and when come from the turn), embedded before the transaction."""
    cues = [d for d in derived if d.kind == "cue" and d.cue is not None]
    ids = sync_state.turn_ids(store.conn, [d.turn for d in cues if d.turn not in known])
    who = sync_state.turn_docs(store.conn, ids.values())
    here = {h: who[i] for h, i in ids.items() if i in who}
    out: _CueVectors = {}
    docs: list[tuple[int, str]] = []
    for d in cues:
        speaker_ts = known.get(d.turn) or here.get(d.turn)
        if speaker_ts is not None and d.cue is not None:
            docs.append((id(d), turn_doc(speaker_ts[0], d.cue.text, speaker_ts[1])))
    if docs:
        vecs = store.embedder.embed([doc for _, doc in docs])
        out = {key: (doc, np.asarray(vecs[i])) for i, (key, doc) in enumerate(docs)}
    return out


def _apply_derived(store: Store, device: str, derived: Sequence[Derived], cues: _CueVectors, out: Counts) -> None:
    conn = store.conn
    needed = {h for d in derived for h in d.needs}
    removed = {h for d in derived if d.topic is not None for h in d.topic.remove}
    ids = sync_state.turn_ids(conn, needed | removed)
    gone = forgets.forgotten_among(conn, needed - set(ids))
    linked: list[int] = []
    for d in derived:
        if d.kind != "topic" and any(h in gone for h in d.needs):
            out.dropped += 1
            continue
        missing = [h for h in d.needs if h not in ids and h not in gone]
        if missing:
            sync_log.add_pending(conn, device, missing[0], d.raw)
            out.pending += 1
            continue
        out.derived += 1
        if d.cue is not None:
            if _cue(store, device, d, ids[d.turn], cues):
                linked.append(ids[d.turn])
        elif d.enrichment is not None:
            tid = ids[d.turn]
            if door.add_enrichment(conn, tid, d.enrichment, d.model, origin=device) is None:
                door.merge_enrichment(conn, tid, d.turn, d.enrichment, d.model, origin=device)
            sync_state.extraction_done(conn, tid)
        elif d.link is not None:
            src, dst, weight, reason = d.link
            door.add_antecedents(conn, [door.LinkWrite(ids[src], ids[dst], weight, reason)], d.model, origin=device)
        elif d.topic is not None:
            _topic(conn, device, d, ids)
    if linked:
        link_semantic(conn, store.mirrors(), linked, store.params.semantic_k)


def _cue(store: Store, device: str, d: Derived, tid: int, cues: _CueVectors) -> bool:
    """Add the cue (its FTS row and vector with it), or merge it into the one the turn
    has; True when added."""
    assert d.cue is not None
    conn = store.conn
    cid = door.add_cue(conn, tid, d.turn, d.cue, d.model, origin=device)
    if cid is None:
        door.merge_cue(conn, tid, d.turn, d.cue, d.model, origin=device)
        return False
    found = cues.get(id(d))
    if found is None:  # its turn arrived from another process meanwhile: embed it here
        speaker, ts = sync_state.turn_docs(conn, [tid])[tid]
        doc = turn_doc(speaker, d.cue.text, ts)
        found = (doc, store.embedder.embed([doc])[0])
    sync_state.index_cue(conn, cid, found[0], found[1])
    return True


def _topic(conn: db.Conn, device: str, d: Derived, ids: dict[str, int]) -> None:
    t = d.topic
    assert t is not None
    if t.hlc <= sync_state.topic_clock(conn, t.key):
        return  # an older change than the one applied: last writer wins
    sync_state.set_topic_clock(conn, t.key, t.hlc)
    found = sync_state.topic_of(conn, t.key)
    if t.removed:
        if found:
            door.remove_topic(conn, found[0], found[1], origin=device)
        return
    members = sync_state.topic_ids(conn, list(t.topics))
    write = door.TopicWrite(
        id=None if found is None else found[0],
        kind=t.kind,
        label=t.label,
        summary=t.summary,
        updated_at=t.updated_at,
        add_turns=tuple(ids[h] for h in t.add if h in ids),
        remove_turns=tuple(ids[h] for h in t.remove if h in ids),
        add_topics=tuple(members.values()),
    )
    door.put_topic(conn, write, d.model or None, origin=device, key=t.key)
