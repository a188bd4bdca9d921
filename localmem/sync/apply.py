"""The merge rules of docs/sync.md: what another device's changes become in this store.
This module reads a segment's changes and hands them, as records, to ONE storage call
per segment (``storage.sync.folding.commit_segment``), which writes them through the
one door (``storage.changes``) with ``origin=<device>`` in one transaction.

- Identity is content: a turn is its hash (the same on every device, because the segment
  carries every field the hash is made of), a cue its (turn hash, kind, text), an
  antecedent edge its two turn hashes, a topic its random key. Applying what is stored
  already writes nothing, so folding a segment twice, or two copies of it, is a no-op.
- Forget wins: a tombstone deletes the turn and, by cascade, everything derived from it,
  and its hash joins the forget set, which the write path consults: the turn is not
  written again by a late segment, an old export, or a re-ingest. A derived change about
  a forgotten turn is dropped. Tombstones apply first, whatever their place in the segment.
- A derived change whose turn has not arrived (it came through a third device) waits in
  ``sync_pending`` and is applied when the turn comes, whatever order segments arrive in.
- Derived layers of two models for one turn: every cue is kept with the model that made
  it; where two models made the same cue (a cue is unique per turn, kind and text) the
  row is the smaller model id's version with the union of both models' tags, and a turn's
  extraction record is the smaller model id's, so every device ends with the same rows
  whatever order they arrive in.
- Topics: last writer wins per topic key by hybrid-clock stamp; an older change to a
  topic than the one applied is skipped (whole), a removal is a change like any other.
  A topic keeps the time it was updated on its device (``updated_at``; for a change
  journaled before that was carried, the time of the change).

The rules that depend on what the store holds at the moment of writing (forgotten, not
arrived yet, an older topic stamp, a cue another model made) are conditional writes in
``commit_segment``'s transaction; this module decides everything else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from localmem.records import SessionIn, TurnIn
from localmem.storage.sync.folding import Counts, Derived, Incoming, TopicChange
from localmem.storage.write import changes as door

DERIVED = ("enrichment", "cue", "antecedent", "topic", "topic_removed")
KNOWN = ("forget", "turn", "session", *DERIVED)


@dataclass
class Applied:
    turns: int = 0
    forgotten: int = 0
    derived: int = 0
    pending: int = 0
    dropped: int = 0
    unknown: dict[str, int] = field(default_factory=dict)

    def add(self, c: Counts) -> None:
        self.turns += c.turns
        self.forgotten += c.forgotten
        self.derived += c.derived
        self.pending += c.pending
        self.dropped += c.dropped


def incoming(items: Sequence[dict[str, Any]], out: Applied) -> Incoming:
    """A segment's changes as records in the order they apply: tombstones, sessions
    with their turns, session headers, derived changes. A kind this localmem does not
    know is counted in ``out.unknown`` and skipped (a newer device's layer)."""
    for c in items:
        if c["kind"] not in KNOWN:
            out.unknown[c["kind"]] = out.unknown.get(c["kind"], 0) + 1
    return Incoming(
        forgets=tuple(str(c["key"]) for c in items if c["kind"] == "forget"),
        sessions=_sessions([c for c in items if c["kind"] == "turn" and "turn" in c]),
        headers=tuple(
            door.session_from_data(c["data"])
            for c in items
            if c["kind"] == "session" and isinstance(c.get("data"), dict)
        ),
        derived=derived([c for c in items if c["kind"] in DERIVED]),
    )


def _sessions(items: list[dict[str, Any]]) -> tuple[SessionIn, ...]:
    by_session: dict[tuple[str, str, bool], list[dict[str, Any]]] = {}
    for c in items:
        t = c["turn"]
        # A turn without a time of its own must not take the session's start as its time:
        # that would change its hash. It goes in a session record without a start.
        by_session.setdefault((str(t["source"]), str(t["session"]), t["ts"] is None), []).append(t)
    out = []
    for (source, key, untimed), turns in by_session.items():
        turns.sort(key=lambda t: (int(t["ord"]), str(t["ts"] or "")))
        out.append(
            SessionIn(
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
        )
    return tuple(out)


def derived(items: Sequence[dict[str, Any]]) -> tuple[Derived, ...]:
    """Model-derived changes (from a segment, or waiting in ``sync_pending``) as records."""
    return tuple(_derived(c) for c in items)


def _derived(c: dict[str, Any]) -> Derived:
    d = c.get("data") or {}
    kind, model = str(c["kind"]), str(c.get("model") or "")
    raw = json.dumps(c, sort_keys=True)
    if kind == "enrichment":
        e = door.EnrichmentWrite(
            d.get("memory_type"),
            str(d["type_source"]),
            bool(d["low_info"]),
            int(d["cues_kept"]),
            int(d["cues_rejected"]),
        )
        return Derived(kind, raw, model, needs=(str(c["key"]),), turn=str(c["key"]), enrichment=e)
    if kind == "cue":
        cue = door.CueWrite(
            kind=str(d["kind"]),
            text=str(d["text"]),
            start=int(d["span"][0]),
            end=int(d["span"][1]),
            subject=d.get("subject"),
            relation=d.get("relation"),
            object=d.get("object"),
            tags=tuple(str(t) for t in d.get("tags", [])),
        )
        return Derived(kind, raw, model, needs=(str(d["turn"]),), turn=str(d["turn"]), cue=cue)
    if kind == "antecedent":
        link = (str(d["src"]), str(d["dst"]), float(d["weight"]), str(d["reason"]))
        return Derived(kind, raw, model, needs=link[:2], link=link)
    if kind == "topic_removed":
        return Derived(kind, raw, model, topic=TopicChange(str(c["key"]), int(c["hlc"]), removed=True))
    topic = TopicChange(
        key=str(c["key"]),
        hlc=int(c["hlc"]),
        kind=str(d["kind"]),
        label=str(d["label"]),
        summary=str(d.get("summary") or ""),
        updated_at=str(d.get("updated_at") or _iso(c.get("at"))),
        add=tuple(str(h) for h in d.get("add", [])),
        remove=tuple(str(h) for h in d.get("remove", [])),
        topics=tuple(str(k) for k in d.get("topics", [])),
    )
    return Derived(kind, raw, model, needs=topic.add, topic=topic)


def _iso(at: Any) -> str:
    """A change's time (seconds since the epoch) as topics store theirs (``now_iso``)."""
    if not isinstance(at, int | float):
        return ""
    return datetime.fromtimestamp(float(at), UTC).replace(tzinfo=None).isoformat(timespec="milliseconds")
