"""Apply another device's changes to this store, through the one door (``storage.changes``)
with ``origin=<device>``: the merge rules of docs/sync.md.

- Identity is content: a turn is its hash (the same on every device, because the segment
  carries every field the hash is made of), a cue its (turn hash, kind, text), an
  antecedent edge its two turn hashes, a topic its random key. Applying what is stored
  already writes nothing, so folding a segment twice, or two copies of it, is a no-op.
- Forget wins: a tombstone deletes the turn and, by cascade, everything derived from it,
  and its hash joins the forget set, which the write path consults: the turn is not
  written again by a late segment, an old export, or a re-ingest. A derived change about
  a forgotten turn is dropped.
- A derived change whose turn has not arrived (it came through a third device) waits in
  ``sync_pending`` and is applied when the turn comes, whatever order segments arrive in.
- Derived layers of two models for one turn: every cue is kept with the model that made
  it; where two models made the same cue (a cue is unique per turn, kind and text) the
  row is the smaller model id's version with the union of both models' tags, and a turn's
  extraction record is the smaller model id's, so every device ends with the same rows
  whatever order they arrive in.
- Topics: last writer wins per topic key by hybrid-clock stamp; an older change to a
  topic than the one applied is skipped (whole), a removal is a change like any other.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db
from localmem.storage.sync import log as sync_log
from localmem.storage.sync import state as sync_state
from localmem.storage.write import changes as door
from localmem.storage.write import forgets
from localmem.storage.write.graph import link_semantic
from localmem.storage.write.store import Store
from localmem.storage.write.vectorize import turn_doc

DERIVED = ("enrichment", "cue", "antecedent", "topic", "topic_removed")


@dataclass
class Applied:
    turns: int = 0
    forgotten: int = 0
    derived: int = 0
    pending: int = 0
    dropped: int = 0
    unknown: dict[str, int] = field(default_factory=dict)


def apply_changes(store: Store, device: str, items: Sequence[dict[str, Any]], out: Applied) -> None:
    """Apply one segment's changes: forgets first (forget wins whatever the order), then
    sessions and turns, then the derived layers."""
    gone = [c["key"] for c in items if c["kind"] == "forget"]
    if gone:

        def forget() -> None:
            with db.transaction(store.conn):
                forgets.mark_forgotten(store.conn, gone)
                out.forgotten += door.forget(store.conn, gone, origin=device)

        store.retrying(forget)
    _turns(store, device, [c for c in items if c["kind"] == "turn" and "turn" in c], out)
    sessions = [c for c in items if c["kind"] == "session" and isinstance(c.get("data"), dict)]
    if sessions:

        def fill() -> None:
            with db.transaction(store.conn):
                for c in sessions:
                    door.add_session(store.conn, door.session_from_data(c["data"]), origin=device)

        store.retrying(fill)
    apply_derived(store, device, [c for c in items if c["kind"] in DERIVED], out)
    for c in items:
        if c["kind"] not in DERIVED and c["kind"] not in ("forget", "turn", "session"):
            out.unknown[c["kind"]] = out.unknown.get(c["kind"], 0) + 1


def _turns(store: Store, device: str, items: list[dict[str, Any]], out: Applied) -> None:
    gone = forgets.forgotten_among(store.conn, [c["key"] for c in items])
    by_session: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}
    for c in items:
        if c["key"] in gone:
            continue
        t = c["turn"]
        # A turn without a time of its own must not take the session's start as its time:
        # that would change its hash. It goes in a session record without a start.
        by_session.setdefault((str(t["source"]), str(t["session"]), t["ts"] is None), []).append(t)
    for (source, key, untimed), turns in by_session.items():
        turns.sort(key=lambda t: (int(t["ord"]), str(t["ts"] or "")))
        sess = SessionIn(
            key=key,
            source=source,
            title=str(turns[0].get("title") or ""),
            started_at=None if untimed else turns[0].get("started_at"),
            turns=tuple(
                TurnIn(
                    text=str(t["text"]),
                    speaker=str(t["speaker"]),
                    role=str(t["role"]),
                    timestamp=t["ts"],
                    source_id=t["source_id"],
                )
                for t in turns
            ),
        )
        res = store.write(sess, origin=device)
        out.turns += res.new_turns


def _hashes_of(c: dict[str, Any]) -> list[str]:
    d = c.get("data") or {}
    kind = c["kind"]
    if kind == "enrichment":
        return [c["key"]]
    if kind == "cue":
        return [str(d["turn"])]
    if kind == "antecedent":
        return [str(d["src"]), str(d["dst"])]
    if kind == "topic":
        return [str(h) for h in d.get("add", [])]
    return []


def apply_derived(
    store: Store, device: str, items: Sequence[dict[str, Any]], out: Applied, drop: Sequence[int] = ()
) -> None:
    """Apply model-derived changes whose turns are here; keep the others pending. ``drop``:
    the pending rows ``items`` came from, removed in the same transaction."""
    conn = store.conn
    needed = {h for c in items for h in _hashes_of(c)}
    removed = {str(h) for c in items if c["kind"] == "topic" for h in (c.get("data") or {}).get("remove", [])}
    ids = sync_state.turn_ids(conn, needed | removed)
    gone = forgets.forgotten_among(conn, needed - set(ids))
    ready: list[dict[str, Any]] = []
    waiting: list[tuple[str, dict[str, Any]]] = []
    for c in items:
        hashes = _hashes_of(c)
        if c["kind"] != "topic" and any(h in gone for h in hashes):
            out.dropped += 1
        elif missing := [h for h in hashes if h not in ids and h not in gone]:
            waiting.append((missing[0], c))
        else:
            ready.append(c)
    cues = [c for c in ready if c["kind"] == "cue"]
    who = sync_state.turn_docs(conn, [ids[str(c["data"]["turn"])] for c in cues])
    docs: list[str] = []
    for c in cues:
        speaker, ts = who[ids[str(c["data"]["turn"])]]
        docs.append(turn_doc(speaker, str(c["data"]["text"]), ts))
    vecs = store.embedder.embed(docs) if docs else None  # outside the transaction

    def write() -> None:
        with db.transaction(conn):
            sync_log.drop_pending(conn, list(drop))
            linked: list[int] = []
            for missing, c in waiting:
                sync_log.add_pending(conn, device, missing, json.dumps(c, sort_keys=True))
            at = 0
            for c in ready:
                if c["kind"] == "cue":
                    tid = ids[str(c["data"]["turn"])]
                    assert vecs is not None
                    if _cue(conn, device, c, tid, docs[at], vecs[at]):
                        linked.append(tid)
                    at += 1
                else:
                    _derived(conn, device, c, ids)
            if linked:
                link_semantic(conn, store.mirrors(), linked, store.params.semantic_k)

    store.retrying(write)
    out.derived += len(ready)
    out.pending += len(waiting)


def _cue(conn: db.Conn, device: str, c: dict[str, Any], tid: int, doc: str, vec: Any) -> bool:
    d = c["data"]
    cw = door.CueWrite(
        kind=str(d["kind"]),
        text=str(d["text"]),
        start=int(d["span"][0]),
        end=int(d["span"][1]),
        subject=d.get("subject"),
        relation=d.get("relation"),
        object=d.get("object"),
        tags=tuple(str(t) for t in d.get("tags", [])),
    )
    model = str(c.get("model") or "")
    cid = door.add_cue(conn, tid, str(d["turn"]), cw, model, origin=device)
    if cid is None:
        door.merge_cue(conn, tid, str(d["turn"]), cw, model, origin=device)
        return False
    sync_state.index_cue(conn, cid, doc, vec)
    return True


def _derived(conn: db.Conn, device: str, c: dict[str, Any], ids: dict[str, int]) -> None:
    d = c.get("data") or {}
    model = str(c.get("model") or "")
    kind = c["kind"]
    if kind == "enrichment":
        tid = ids[c["key"]]
        ew = door.EnrichmentWrite(
            d.get("memory_type"),
            str(d["type_source"]),
            bool(d["low_info"]),
            int(d["cues_kept"]),
            int(d["cues_rejected"]),
        )
        if door.add_enrichment(conn, tid, ew, model, origin=device) is None:
            door.merge_enrichment(conn, tid, str(c["key"]), ew, model, origin=device)
        sync_state.extraction_done(conn, tid)
    elif kind == "antecedent":
        link = door.LinkWrite(ids[str(d["src"])], ids[str(d["dst"])], float(d["weight"]), str(d["reason"]))
        door.add_antecedents(conn, [link], model, origin=device)
    else:
        _topic(conn, device, c, ids)


def _topic(conn: db.Conn, device: str, c: dict[str, Any], ids: dict[str, int]) -> None:
    key, hlc = c["key"], int(c["hlc"])
    if hlc <= sync_state.topic_clock(conn, key):
        return  # an older change than the one applied: last writer wins
    sync_state.set_topic_clock(conn, key, hlc)
    found = sync_state.topic_of(conn, key)
    if c["kind"] == "topic_removed":
        if found:
            door.remove_topic(conn, found[0], found[1], origin=device)
        return
    d = c["data"]
    members = sync_state.topic_ids(conn, [str(k) for k in d.get("topics", [])])
    tw = door.TopicWrite(
        id=None if found is None else found[0],
        kind=str(d["kind"]),
        label=str(d["label"]),
        summary=str(d.get("summary") or ""),
        updated_at=str(c.get("updated_at") or ""),
        add_turns=tuple(ids[h] for h in d.get("add", []) if h in ids),
        remove_turns=tuple(ids[h] for h in d.get("remove", []) if h in ids),
        add_topics=tuple(members.values()),
    )
    door.put_topic(conn, tw, c.get("model"), origin=device, key=key)
