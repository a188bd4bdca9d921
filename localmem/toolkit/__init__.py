"""The MRAgent traversal toolkit: small, bounded steps over the Cue–Tag–Content graph.

Each function takes a store and returns a :class:`Page` of compact, cited records
(every record names its turn ids, sessions and times), so a model can reconstruct the
past step by step (MRAgent 3.4): search cues -> tags of a cue -> turns of a (cue, tag)
-> cues and context of a turn -> time, people's facts, topics. The active loop
(``store.explore``) and the MCP server call these same functions.

Invariants:
- read-only: plain SELECTs on ``store.conn`` plus the in-memory vector mirrors;
- every list is paged (``limit``, ``offset``) and capped: ``limit`` is clamped to
  :data:`MAX_LIMIT`, a turn's text to :data:`MAX_TEXT_CHARS` (``clipped`` says so;
  the full text is one ``turn`` lookup away), so no call dumps the graph;
- a "cue" in MRAgent's sense is an entity or phrase that may recur across turns:
  functions that take a cue accept a cue id or its text and act on every cue with the
  same text (case-insensitive);
- facts are cues of kind ``fact``: ``subject`` = the person, ``relation`` = the
  aspect, ``object`` = the value (``localmem/extract.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np

from localmem import search
from localmem.errors import InputError, NotFound
from localmem.text import fts_query, parse_time

if TYPE_CHECKING:
    from localmem.store import Store

MAX_LIMIT = 50
DEFAULT_LIMIT = 10
MAX_OFFSET = 10_000
MAX_TEXT_CHARS = 800
MAX_WINDOW = 5
CUE_KINDS = ("statement", "triple", "keyword", "fact")
_POOL = 200  # candidates looked at per matching method in search_cues

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of results: ``next_offset`` is None on the last page."""

    items: list[T]
    offset: int
    limit: int
    total: int
    next_offset: int | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": [asdict(i) if is_dataclass(i) and not isinstance(i, type) else i for i in self.items],
            "offset": self.offset,
            "limit": self.limit,
            "total": self.total,
            "next_offset": self.next_offset,
        }


@dataclass(frozen=True)
class TurnRef:
    turn_id: int
    session: str
    timestamp: str | None
    speaker: str
    text: str
    clipped: bool = False
    source_id: str | None = None


@dataclass(frozen=True)
class CueRef:
    cue_id: int
    kind: str
    text: str
    turn_id: int
    tags: list[str] = field(default_factory=list)
    subject: str | None = None
    relation: str | None = None
    object: str | None = None


@dataclass(frozen=True)
class CueHit:
    cue: CueRef
    match: str  # exact / all_words / similar / some_words
    score: float
    timestamp: str | None
    speaker: str


@dataclass(frozen=True)
class TagCount:
    tag: str
    turns: int
    cue_ids: list[int]


@dataclass(frozen=True)
class TurnCues:
    turn: TurnRef
    cues: list[CueRef]


@dataclass(frozen=True)
class Neighbour:
    offset: int  # places from the turn in its session (-2, -1, 1, 2, ...)
    turn: TurnRef


@dataclass(frozen=True)
class Link:
    kind: str  # temporal / semantic / antecedent
    direction: str  # out (this turn -> other) / in (other -> this turn)
    weight: float
    reason: str
    turn: TurnRef


@dataclass(frozen=True)
class TurnContext:
    turn: TurnRef
    neighbours: list[Neighbour]
    links: list[Link]
    links_total: int


@dataclass(frozen=True)
class TurnTime:
    turn_id: int
    timestamp: str | None
    session: str
    session_started: str | None
    position: int  # 1-based place in its session
    session_turns: int


@dataclass(frozen=True)
class Aspect:
    aspect: str
    facts: int
    latest: str | None


@dataclass(frozen=True)
class Fact:
    cue_id: int
    person: str
    aspect: str
    value: str
    turn_id: int
    timestamp: str | None
    session: str


@dataclass(frozen=True)
class Topic:
    topic_id: int
    label: str
    summary: str
    turns: int


# -- helpers ---------------------------------------------------------------------------


def _bounds(limit: int, offset: int) -> tuple[int, int]:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(f"limit must be a positive integer; got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise InputError(f"offset must be a non-negative integer; got {offset!r}")
    if offset > MAX_OFFSET:
        raise InputError(f"offset must be at most {MAX_OFFSET}; narrow the query instead")
    return min(limit, MAX_LIMIT), offset


def _page(items: Sequence[T], total: int, limit: int, offset: int) -> Page[T]:
    nxt = offset + len(items)
    return Page(list(items), offset, limit, total, nxt if nxt < total else None)


def _slice(items: Sequence[T], limit: int, offset: int) -> Page[T]:
    return _page(items[offset : offset + limit], len(items), limit, offset)


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _text(text: str) -> tuple[str, bool]:
    if len(text) <= MAX_TEXT_CHARS:
        return text, False
    return text[:MAX_TEXT_CHARS].rstrip() + " …", True


def turn_refs(store: Store, ids: Sequence[int]) -> dict[int, TurnRef]:
    rows = search.turn_rows(store.conn, ids)
    out: dict[int, TurnRef] = {}
    for tid, r in rows.items():
        text, clipped = _text(r.text)
        out[tid] = TurnRef(tid, r.session_key, r.ts, r.speaker, text, clipped, r.source_id)
    return out


def _turn_ref(store: Store, turn_id: int) -> TurnRef:
    ref = turn_refs(store, [int(turn_id)]).get(int(turn_id))
    if ref is None:
        raise NotFound(f"no turn with id {turn_id}")
    return ref


def _tags_of(store: Store, cue_ids: Sequence[int]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for start in range(0, len(cue_ids), 500):
        chunk = list(cue_ids[start : start + 500])
        for cid, name in store.conn.execute(
            f"SELECT ct.cue_id, t.name FROM cue_tags ct JOIN tags t ON t.id = ct.tag_id "
            f"WHERE ct.cue_id IN ({_marks(len(chunk))}) ORDER BY t.name",
            chunk,
        ):
            out.setdefault(int(cid), []).append(str(name))
    return out


_CUE_COLS = "c.id, c.kind, c.text, c.turn_id, c.subject, c.relation, c.object"


def _cue_refs(store: Store, rows: Sequence[Sequence[Any]]) -> list[CueRef]:
    tags = _tags_of(store, [int(r[0]) for r in rows])
    return [CueRef(int(r[0]), str(r[1]), str(r[2]), int(r[3]), tags.get(int(r[0]), []), r[4], r[5], r[6]) for r in rows]


def _cue_group(store: Store, cue: int | str) -> list[int]:
    """Ids of every cue with the same text as ``cue`` (an id or a text), case-insensitive."""
    if isinstance(cue, int) and not isinstance(cue, bool):
        row = store.conn.execute("SELECT text FROM cues WHERE id = ?", (cue,)).fetchone()
        if row is None:
            raise NotFound(f"no cue with id {cue}")
        text = str(row[0])
    elif isinstance(cue, str) and cue.strip():
        text = cue.strip()
    else:
        raise InputError("cue must be a cue id or a non-empty cue text")
    ids = [int(r[0]) for r in store.conn.execute("SELECT id FROM cues WHERE lower(text) = lower(?)", (text,))]
    if not ids:
        raise NotFound(f"no cue {text!r}; use search_cues to find cues")
    return ids


def _visible(store: Store, turn_ids: Sequence[int], as_of: str | None, scope: str | None) -> set[int]:
    """The turns of ``turn_ids`` that pass the as_of / scope filter."""
    if not turn_ids:
        return set()
    ok: set[int] = set()
    sessions = set(search.scope_sessions(store.conn, scope)) if scope else None
    for tid, r in search.turn_rows(store.conn, turn_ids).items():
        if as_of is not None and r.ts is not None and r.ts > as_of:
            continue
        if sessions is not None and r.session_id not in sessions:
            continue
        ok.add(tid)
    return ok


def _time(value: str | None, name: str, *, end: bool = False) -> str | None:
    if value is None or value == "":
        return None
    try:
        iso = parse_time(value)
    except ValueError as exc:
        raise InputError(f"{name}: {exc}") from exc
    if end and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        iso = iso[:10] + "T23:59:59"  # a date as an end means the whole day
    return iso


# -- search ----------------------------------------------------------------------------

_WORD = re.compile(r"[\w']+", re.UNICODE)


def _all_words_query(text: str) -> str:
    """FTS5 MATCH for rows holding every content word of ``text`` (quoted, ANDed)."""
    words = [w for w in fts_query(text, search.STOPWORDS).split(" OR ") if w]
    return " AND ".join(words)


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

    for (cid,) in store.conn.execute(
        "SELECT id FROM cues WHERE lower(text) = lower(?) LIMIT ?", (text.strip(), pool)
    ).fetchall():
        add(int(cid), 3, 1.0, "exact")
    match_all = _all_words_query(text)
    match_any = fts_query(text, search.STOPWORDS)
    for table in ("cues_fts", "extracted_cues_fts"):
        for match, tier, name in ((match_all, 2, "all_words"), (match_any, 0, "some_words")):
            if not match:
                continue
            rows = store.conn.execute(
                f"SELECT rowid, -bm25({table}) FROM {table} WHERE {table} MATCH ? ORDER BY bm25({table}) LIMIT ?",
                (match, pool),
            ).fetchall()
            top = max((float(s) for _, s in rows), default=1.0) or 1.0
            for cid, s in rows:
                add(int(cid), tier, float(s) / top, name)
    mirror = store.mirror("cue")
    if len(mirror.ids):
        qvec = store.embedder.embed([text])[0]
        for cid, _tid, sim in mirror.top(qvec, pool):
            add(cid, 1, sim, "similar")
    if not best:
        return _page([], 0, limit, offset)
    ids = list(best)
    rows = {
        int(r[0]): r
        for start in range(0, len(ids), 500)
        for r in store.conn.execute(
            f"SELECT {_CUE_COLS}, t.ts, t.speaker FROM cues c JOIN turns t ON t.id = c.turn_id "
            f"WHERE c.id IN ({_marks(len(ids[start : start + 500]))})",
            ids[start : start + 500],
        )
    }
    keep = [cid for cid in ids if cid in rows and rows[cid][1] in want]
    if cut is not None or scope:
        seen = _visible(store, [int(rows[c][3]) for c in keep], cut, scope)
        keep = [c for c in keep if int(rows[c][3]) in seen]
    keep.sort(key=lambda c: (-best[c][0], -best[c][1], c))
    page = keep[offset : offset + limit]
    refs = {c.cue_id: c for c in _cue_refs(store, [rows[c][:7] for c in page])}
    hits = [CueHit(refs[c], best[c][2], round(best[c][1], 4), rows[c][7], str(rows[c][8])) for c in page]
    return _page(hits, len(keep), limit, offset)


# -- cue -> tags -> turns --------------------------------------------------------------


def cue_tags(store: Store, cue: int | str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TagCount]:
    """The tags (relation / aspect labels) of a cue, over every turn where it occurs,
    most used first. Statement cues have none; extracted keywords and facts do."""
    limit, offset = _bounds(limit, offset)
    ids = _cue_group(store, cue)
    rows = store.conn.execute(
        f"SELECT t.name, count(DISTINCT ct.turn_id), group_concat(DISTINCT ct.cue_id) FROM cue_tags ct "
        f"JOIN tags t ON t.id = ct.tag_id WHERE ct.cue_id IN ({_marks(len(ids))}) "
        "GROUP BY t.name ORDER BY 2 DESC, t.name",
        ids,
    ).fetchall()
    items = [TagCount(str(n), int(k), sorted(int(x) for x in str(c).split(","))[:20]) for n, k, c in rows]
    return _slice(items, limit, offset)


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
    if tag:
        sql = (
            f"SELECT DISTINCT ct.turn_id FROM cue_tags ct JOIN tags t ON t.id = ct.tag_id "
            f"WHERE ct.cue_id IN ({_marks(len(ids))}) AND lower(t.name) = lower(?)"
        )
        turn_ids = [int(r[0]) for r in store.conn.execute(sql, [*ids, tag])]
    else:
        turn_ids = [
            int(r[0])
            for r in store.conn.execute(f"SELECT DISTINCT turn_id FROM cues WHERE id IN ({_marks(len(ids))})", ids)
        ]
    if len(turn_ids) > 1:
        probe = query or str(store.conn.execute("SELECT text FROM cues WHERE id = ?", (ids[0],)).fetchone()[0])
        turn_ids = _by_similarity(store, turn_ids, probe)
    page = turn_ids[offset : offset + limit]
    refs = turn_refs(store, page)
    return _page([refs[t] for t in page if t in refs], len(turn_ids), limit, offset)


def _by_similarity(store: Store, turn_ids: list[int], text: str) -> list[int]:
    tm = store.turn_mirror()
    ids = np.array(turn_ids, dtype=np.int64)
    pos = tm.index_of(ids)
    qvec = store.embedder.embed([text])[0].astype(np.float32)
    sims = np.where(pos >= 0, tm.mat[np.clip(pos, 0, None)] @ qvec if len(tm.ids) else 0.0, -2.0)
    order = np.argsort(-sims, kind="stable")
    return [int(ids[i]) for i in order]


# -- turn -> cues, context, time -------------------------------------------------------


def turn_cues(store: Store, turn_id: int, *, limit: int = 20, offset: int = 0) -> Page[TurnCues]:
    """The turn and its cues (sentences, keywords, triples, facts) with their tags.
    One item; the cues inside it are paged."""
    limit, offset = _bounds(limit, offset)
    turn = _turn_ref(store, turn_id)
    total = int(store.conn.execute("SELECT count(*) FROM cues WHERE turn_id = ?", (turn_id,)).fetchone()[0])
    rows = store.conn.execute(
        f"SELECT {_CUE_COLS} FROM cues c WHERE c.turn_id = ? "
        "ORDER BY CASE c.kind WHEN 'fact' THEN 0 WHEN 'triple' THEN 1 WHEN 'keyword' THEN 2 ELSE 3 END, c.id "
        "LIMIT ? OFFSET ?",
        (turn_id, limit, offset),
    ).fetchall()
    item = TurnCues(turn, _cue_refs(store, rows))
    nxt = offset + len(rows)
    return Page([item], offset, limit, total, nxt if nxt < total else None)


def turn_context(store: Store, turn_id: int, *, window: int = 2, links: int = DEFAULT_LIMIT) -> TurnContext:
    """The turn, its neighbours within ``window`` places in its session, and the turns
    linked to it by semantic and antecedent edges (strongest first, at most ``links``)."""
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise InputError(f"window must be a non-negative integer; got {window!r}")
    link_limit, _ = _bounds(links, 0)
    window = min(window, MAX_WINDOW)
    turn = _turn_ref(store, turn_id)
    sid, ord_ = store.conn.execute("SELECT session_id, ord FROM turns WHERE id = ?", (turn_id,)).fetchone()
    before = store.conn.execute(
        "SELECT id FROM turns WHERE session_id = ? AND ord < ? ORDER BY ord DESC LIMIT ?", (sid, ord_, window)
    ).fetchall()
    after = store.conn.execute(
        "SELECT id FROM turns WHERE session_id = ? AND ord > ? ORDER BY ord LIMIT ?", (sid, ord_, window)
    ).fetchall()
    places = [(-i - 1, int(r[0])) for i, r in enumerate(before)] + [(i + 1, int(r[0])) for i, r in enumerate(after)]
    near = {t for _, t in places}
    edges = [
        e
        for e in search.edges_of(store.conn, [turn_id], ("semantic", "antecedent", "temporal"))
        if not (e[2] == "temporal" and e[1] in near)
    ]
    out_pairs = {
        (int(a), int(b), str(k))
        for a, b, k in store.conn.execute("SELECT src, dst, kind FROM edges WHERE src = ?", (turn_id,))
    }
    edges.sort(key=lambda e: ({"antecedent": 0, "semantic": 1, "temporal": 2}[e[2]], -e[3], e[1]))
    shown = edges[:link_limit]
    refs = turn_refs(store, [t for _, t in places] + [e[1] for e in shown])
    neighbours = [Neighbour(o, refs[t]) for o, t in sorted(places) if t in refs]
    found = [
        Link(k, "out" if (turn_id, o, k) in out_pairs else "in", round(w, 4), r, refs[o])
        for _, o, k, w, r in shown
        if o in refs
    ]
    return TurnContext(turn, neighbours, found, len(edges))


def turn_time(store: Store, turn_id: int) -> TurnTime:
    """When a turn was said: its timestamp, its session, the session's start, its place."""
    row = store.conn.execute(
        "SELECT t.ts, s.key, s.started_at, t.session_id, t.ord FROM turns t JOIN sessions s ON s.id = t.session_id "
        "WHERE t.id = ?",
        (turn_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no turn with id {turn_id}")
    ts, key, started, sid, ord_ = row
    place, n = store.conn.execute(
        "SELECT sum(ord <= ?), count(*) FROM turns WHERE session_id = ?", (ord_, sid)
    ).fetchone()
    return TurnTime(int(turn_id), ts, str(key), started, int(place), int(n))


def turns_between(
    store: Store,
    start: str | None = None,
    end: str | None = None,
    *,
    scope: str | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
) -> Page[TurnRef]:
    """Turns said between ``start`` and ``end`` (inclusive; a date alone as the end
    means that whole day), in time order. Undated turns are never in a range."""
    limit, offset = _bounds(limit, offset)
    lo, hi = _time(start, "start"), _time(end, "end", end=True)
    if lo is None and hi is None:
        raise InputError("give a start, an end, or both")
    if lo is not None and hi is not None and lo > hi:
        raise InputError(f"start {lo} is after end {hi}")
    where = ["t.ts IS NOT NULL"]
    args: list[Any] = []
    if lo is not None:
        where.append("t.ts >= ?")
        args.append(lo)
    if hi is not None:
        where.append("t.ts <= ?")
        args.append(hi)
    if scope:
        where.append("t.session_id IN (SELECT id FROM sessions WHERE source = ? OR key = ?)")
        args += [scope, scope]
    cond = " AND ".join(where)
    total = int(store.conn.execute(f"SELECT count(*) FROM turns t WHERE {cond}", args).fetchone()[0])
    ids = [
        int(r[0])
        for r in store.conn.execute(
            f"SELECT t.id FROM turns t WHERE {cond} ORDER BY t.ts, t.session_id, t.ord LIMIT ? OFFSET ?",
            [*args, limit, offset],
        )
    ]
    refs = turn_refs(store, ids)
    return _page([refs[t] for t in ids if t in refs], total, limit, offset)


# -- people and facts ------------------------------------------------------------------


def _person(person: str) -> str:
    if not isinstance(person, str) or not person.strip():
        raise InputError("person must be a non-empty name")
    return person.strip()


def person_aspects(store: Store, person: str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[Aspect]:
    """The aspects (work, family, hobby, ...) the store holds facts about for a person,
    most facts first."""
    limit, offset = _bounds(limit, offset)
    rows = store.conn.execute(
        "SELECT c.relation, count(*), max(t.ts) FROM cues c JOIN turns t ON t.id = c.turn_id "
        "WHERE c.kind = 'fact' AND lower(c.subject) = lower(?) GROUP BY lower(c.relation) "
        "ORDER BY 2 DESC, 1",
        (_person(person),),
    ).fetchall()
    return _slice([Aspect(str(a), int(n), ts) for a, n, ts in rows], limit, offset)


def person_facts(
    store: Store, person: str, aspect: str | None = None, *, limit: int = DEFAULT_LIMIT, offset: int = 0
) -> Page[Fact]:
    """Facts about a person (of one aspect, when given), newest first: the latest
    statement of a fact is the one most likely still true."""
    limit, offset = _bounds(limit, offset)
    where = "c.kind = 'fact' AND lower(c.subject) = lower(?)"
    args: list[Any] = [_person(person)]
    if aspect:
        where += " AND lower(c.relation) = lower(?)"
        args.append(aspect.strip())
    total = int(store.conn.execute(f"SELECT count(*) FROM cues c WHERE {where}", args).fetchone()[0])
    rows = store.conn.execute(
        f"SELECT c.id, c.subject, c.relation, c.object, c.turn_id, t.ts, s.key FROM cues c "
        f"JOIN turns t ON t.id = c.turn_id JOIN sessions s ON s.id = t.session_id WHERE {where} "
        "ORDER BY t.ts IS NULL, t.ts DESC, c.id DESC LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    items = [Fact(int(a), str(b), str(c), str(d), int(e), f, str(g)) for a, b, c, d, e, f, g in rows]
    return _page(items, total, limit, offset)


# -- topics ----------------------------------------------------------------------------


def topics(store: Store, text: str | None = None, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[Topic]:
    """Topics (labelled groups of turns), those whose label or summary holds ``text``
    when given; most recently updated first. Empty until the topic layer has run."""
    limit, offset = _bounds(limit, offset)
    where, args = "", []
    if text and text.strip():
        where = "WHERE p.label LIKE ? ESCAPE '\\' OR p.summary LIKE ? ESCAPE '\\'"
        like = "%" + re.sub(r"([%_\\])", r"\\\1", text.strip()) + "%"
        args = [like, like]
    total = int(store.conn.execute(f"SELECT count(*) FROM topics p {where}", args).fetchone()[0])
    rows = store.conn.execute(
        f"SELECT p.id, p.label, p.summary, (SELECT count(*) FROM topic_turns tt WHERE tt.topic_id = p.id) "
        f"FROM topics p {where} ORDER BY p.updated_at DESC, p.id DESC LIMIT ? OFFSET ?",
        [*args, limit, offset],
    ).fetchall()
    return _page([Topic(int(a), str(b), str(c), int(d)) for a, b, c, d in rows], total, limit, offset)


def topic_turns(store: Store, topic_id: int, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TurnRef]:
    """The member turns of a topic in time order."""
    limit, offset = _bounds(limit, offset)
    if store.conn.execute("SELECT 1 FROM topics WHERE id = ?", (topic_id,)).fetchone() is None:
        raise NotFound(f"no topic with id {topic_id}; use topics to list them")
    total = int(store.conn.execute("SELECT count(*) FROM topic_turns WHERE topic_id = ?", (topic_id,)).fetchone()[0])
    ids = [
        int(r[0])
        for r in store.conn.execute(
            "SELECT t.id FROM topic_turns tt JOIN turns t ON t.id = tt.turn_id WHERE tt.topic_id = ? "
            "ORDER BY t.ts IS NULL, t.ts, t.session_id, t.ord LIMIT ? OFFSET ?",
            (topic_id, limit, offset),
        )
    ]
    refs = turn_refs(store, ids)
    return _page([refs[t] for t in ids if t in refs], total, limit, offset)


def turn(store: Store, turn_id: int) -> dict[str, Any]:
    """One turn in full (its whole text), with its session and time."""
    r = search.turn_rows(store.conn, [turn_id]).get(turn_id)
    if r is None:
        raise NotFound(f"no turn with id {turn_id}")
    return {
        "turn_id": r.id,
        "session": r.session_key,
        "session_started": r.session_started,
        "position": r.ord,
        "timestamp": r.ts,
        "speaker": r.speaker,
        "role": r.role,
        "text": r.text,
        "source_id": r.source_id,
    }


def sessions(store: Store, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[dict[str, Any]]:
    """Sessions, newest first, with their turn counts and time span."""
    limit, offset = _bounds(limit, offset)
    total = int(store.conn.execute("SELECT count(*) FROM sessions").fetchone()[0])
    rows = store.conn.execute(
        "SELECT s.key, s.source, s.title, s.started_at, count(t.id), min(t.ts), max(t.ts) FROM sessions s "
        "LEFT JOIN turns t ON t.session_id = s.id GROUP BY s.id "
        "ORDER BY coalesce(s.started_at, min(t.ts)) DESC, s.id DESC LIMIT ? OFFSET ?",
        (limit, offset),
    ).fetchall()
    items = [
        {"session": k, "source": src, "title": ti, "started_at": st, "turns": n, "first": a, "last": b}
        for k, src, ti, st, n, a, b in rows
    ]
    return _page(items, total, limit, offset)


def session_turns(store: Store, session: str, *, limit: int = DEFAULT_LIMIT, offset: int = 0) -> Page[TurnRef]:
    """The turns of one session (by its key) in order."""
    limit, offset = _bounds(limit, offset)
    sids = [int(r[0]) for r in store.conn.execute("SELECT id FROM sessions WHERE key = ?", (session,))]
    if not sids:
        raise NotFound(f"no session {session!r}")
    cond = f"session_id IN ({_marks(len(sids))})"
    total = int(store.conn.execute(f"SELECT count(*) FROM turns WHERE {cond}", sids).fetchone()[0])
    ids = [
        int(r[0])
        for r in store.conn.execute(
            f"SELECT id FROM turns WHERE {cond} ORDER BY session_id, ord LIMIT ? OFFSET ?", [*sids, limit, offset]
        )
    ]
    refs = turn_refs(store, ids)
    return _page([refs[t] for t in ids if t in refs], total, limit, offset)
