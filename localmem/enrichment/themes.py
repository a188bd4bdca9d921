"""Cross-session themes: session topics that recur in several sessions, grouped and
labelled (MRAgent's abstraction layer, over episodes of many sessions).

A theme is a ``topics`` row of kind ``theme`` (migration 0006). Its member turns are
rows of ``topic_turns`` (the union of its session topics' turns), so topic -> turns
reads a theme like any topic; ``theme_topics`` links it to the session topics it
groups, each in at most one theme. ``run_themes`` is one pass:

- its work is what the ``themed`` flag marks: session topics created, grown or shrunk
  since the last pass, themes that lost turns to ``forget``;
- a theme whose topics no longer span two sessions is dissolved and its topics are
  placed again;
- a changed topic already in a theme stays in it (its new turns join the theme);
- any other changed topic joins the most similar theme, or pairs with the most similar
  theme-less topic of another session into a new theme, when the score reaches
  ``SIMILAR``; otherwise it waits, theme-less, for a later topic to match it. The score
  is the cosine of centred centroids (mean member turn vector minus the store's mean
  turn vector: chat turns share a common direction that makes any two topics look
  alike) plus ``KEYWORD_BONUS`` when the two share one of their top keywords;
- only themes whose membership changed are labelled again: one schema-constrained model
  call each, or without a model (or when the call fails or its reply is refused:
  logged, counted in ``ThemeStats.label_failures``) their top keywords as the label
  and their topics' labels and dates as the summary. The calls go to the call log
  (``localmem/storage/layers/calls.py``) in the pass's transaction, even when it conflicts.

Why a pass and not a job kind of its own: the ``themed`` flag already records the work
durably, cleared in the same transaction that changes a topic's turns, so a queue row
would only repeat it. The pass reads, calls the model outside any transaction, then
writes everything in ONE transaction (``localmem/storage/layers/topics.py``: each theme made,
changed or dissolved passes the door for changes) after checking that the topic tables are still
as it read them (otherwise it writes nothing and the next pass starts over). A crash or
a concurrent writer therefore never leaves a half-built theme, and a failed model call
costs a label, never a grouping. ``localmem.enrichment.worker.run_topics`` runs it after the topics jobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from localmem.enrichment import topics
from localmem.enrichment.stats import ThemeStats
from localmem.models.llm import Generator
from localmem.models.replies import CallRecord
from localmem.storage.engine import db
from localmem.storage.layers import topics as stored
from localmem.storage.vectors.stored import mean_vector
from localmem.storage.write.changes import TopicWrite
from localmem.storage.write.store import Store
from localmem.util.clock import now_iso

SIMILAR = 0.5
KEYWORD_BONUS = 0.1
TOP_KEYWORDS = 5
RARE_SHARE, RARE_MIN = 0.1, 3
MODEL_LABELS = 8  # per pass; more changed themes get keyword labels now, the model's later
PROMPT_TOPICS = 12
PROMPT = """You name a theme that comes back in several conversations. Each line is one
conversation's topic: its date, then its label and summary. Reply with JSON: "label" (two
to five words for what the lines have in common) and "summary" (one sentence saying what
the theme is about and how it went on over time)."""


@dataclass
class _Topic:
    id: int
    label: str
    summary: str
    themed: bool
    theme: int | None
    turns: list[int] = field(default_factory=list)
    sessions: set[int] = field(default_factory=set)
    first: str = ""


@dataclass
class _Theme:
    id: int | None  # None until written
    members: list[int]
    changed: bool


def _read(conn: db.Conn) -> Snapshot:
    """Everything a pass depends on (``storage/layers/topics.theme_snapshot``); read again inside
    the write transaction to see whether anything changed meanwhile."""
    return stored.theme_snapshot(conn)


Snapshot = stored.Snapshot
Label = tuple[str, str, str | None]  # label, summary, the model that wrote them (None: keywords)


class _Pass:
    """One pass's state: session topics, themes, centroids; ``place`` decides."""

    def __init__(self, store: Store, snap: Snapshot) -> None:
        rows, members = snap
        self.store = store
        self.topics: dict[int, _Topic] = {}
        self.themes: dict[int, _Theme] = {}
        self.theme_turns: dict[int, set[int]] = {}
        for tid, kind, themed, label, summary, _at, theme in rows:
            if kind == "theme":
                self.themes[int(tid)] = _Theme(int(tid), [], not themed)
            else:
                t = _Topic(int(tid), str(label), str(summary), bool(themed), None if theme is None else int(theme))
                self.topics[t.id] = t
        for tid, turn, sess, ts in members:
            if tid in self.themes:
                self.theme_turns.setdefault(int(tid), set()).add(int(turn))
            elif tid in self.topics:
                t = self.topics[int(tid)]
                t.turns.append(int(turn))
                t.sessions.add(int(sess))
                if ts and (not t.first or ts < t.first):
                    t.first = str(ts)
        for t in self.topics.values():
            if t.theme is not None and t.theme in self.themes:
                self.themes[t.theme].members.append(t.id)
        self.centroid = self._centroids()
        self._theme_centroids: dict[int, np.ndarray] = {}
        self._keywords: dict[int, set[str]] = {}
        self._spread: dict[str, int] = {}
        self.turn_topic = {x: t.id for t in self.topics.values() for x in t.turns}
        self.dissolved: list[int] = []
        self.records: list[CallRecord] = []  # the label calls, for the call log

    def _centroids(self) -> dict[int, np.ndarray]:
        mean = mean_vector(self.store.conn, "turn_vec", self.store.embedder.dim)  # zero when none
        with_turns = [t for t in self.topics.values() if t.turns]
        vecs = topics.vectors(self.store, [x for t in with_turns for x in t.turns])
        out: dict[int, np.ndarray] = {}
        at = 0
        for t in with_turns:
            c = vecs[at : at + len(t.turns)].mean(axis=0) - mean
            at += len(t.turns)
            out[t.id] = c / (float(np.linalg.norm(c)) or 1.0)
        return out

    def theme_centroid(self, key: int) -> np.ndarray:
        if key not in self._theme_centroids:
            vecs = [self.centroid[m] for m in self.themes[key].members if m in self.centroid]
            c = np.mean(vecs, axis=0) if vecs else np.zeros_like(next(iter(self.centroid.values())))
            self._theme_centroids[key] = c / (float(np.linalg.norm(c)) or 1.0)
        return self._theme_centroids[key]

    def keywords(self, topic_id: int) -> set[str]:
        """A topic's top keywords (extracted keyword cues, else words) that few topics
        hold, read on demand: only pairs near the threshold need them."""
        if topic_id not in self._keywords:
            turns = self.topics[topic_id].turns
            top = topics.keywords(self.store, turns).most_common(TOP_KEYWORDS) if turns else []
            self._keywords[topic_id] = {w for w, _ in top if self._rare(w)}
        return self._keywords[topic_id]

    def _rare(self, word: str) -> bool:
        """Whether few session topics (``RARE_SHARE`` of them, at least ``RARE_MIN``) hold
        ``word``: a word most topics have ("great", a nickname) says nothing about
        recurrence."""
        if word not in self._spread:
            phrase = '"' + word.replace('"', '""') + '"'
            hits = stored.turns_matching(self.store.conn, phrase)
            self._spread[word] = len({self.turn_topic.get(t) for t in hits} - {None})
        return self._spread[word] <= max(RARE_MIN, RARE_SHARE * len(self.topics))

    def best(self, topic_id: int, free: list[int]) -> tuple[str, int] | None:
        """The theme or theme-less topic of another session that ``topic_id`` matches
        best, if any reaches ``SIMILAR``; a theme wins a tie."""
        topic = self.topics[topic_id]
        cands: list[tuple[str, int, list[int]]] = [("theme", k, th.members) for k, th in self.themes.items()]
        cands += [("topic", o, [o]) for o in free if not self.topics[o].sessions & topic.sessions]
        if not cands:
            return None
        mat = np.stack([self.theme_centroid(k) if kind == "theme" else self.centroid[k] for kind, k, _ in cands])
        sims = mat @ self.centroid[topic_id]
        found: tuple[float, bool, str, int] | None = None  # (score, is a theme, kind, key)
        for (kind, key, members), sim in zip(cands, sims.tolist(), strict=True):
            if sim < SIMILAR - KEYWORD_BONUS:
                continue
            if sim < SIMILAR and any(self.keywords(topic_id) & self.keywords(m) for m in members):
                sim += KEYWORD_BONUS  # same words: what the vectors half-say, the keywords confirm
            if sim >= SIMILAR and (found is None or (sim, kind == "theme") > found[:2]):
                found = (sim, kind == "theme", kind, key)
        return None if found is None else (found[2], found[3])

    def place(self, stats: ThemeStats) -> list[int]:
        """Decide every changed topic's theme; returns the topics looked at."""
        for key, theme in list(self.themes.items()):
            spanned = set().union(*(self.topics[m].sessions for m in theme.members))
            if len(spanned) < 2:  # forget took sessions away: no longer recurring
                for m in theme.members:
                    self.topics[m].theme, self.topics[m].themed = None, False
                del self.themes[key]
                self.dissolved.append(key)
                stats.themes_dissolved += 1
        pending = sorted(t.id for t in self.topics.values() if not t.themed)
        free = [t.id for t in self.topics.values() if t.themed and t.theme is None and t.id in self.centroid]
        fresh = 0
        for tid in pending:
            topic = self.topics[tid]
            stats.topics_placed += 1
            if topic.theme is not None:
                self.themes[topic.theme].changed = True
                self._theme_centroids.pop(topic.theme, None)
                continue
            if tid not in self.centroid:
                continue  # no turns left: nothing to compare
            best = self.best(tid, free)
            if best is None:
                free.append(tid)
                continue
            kind, key = best
            if kind == "topic":
                fresh -= 1  # new themes get negative keys until written
                self.themes[fresh] = _Theme(None, [key], True)
                self.topics[key].theme = fresh
                free.remove(key)
                key = fresh
            else:
                stats.topics_joined += 1
            self.themes[key].members.append(tid)
            self.themes[key].changed = True
            self._theme_centroids.pop(key, None)
            topic.theme = key
        return pending

    def label(self, theme: _Theme, gen: Generator | None, stats: ThemeStats) -> Label:
        """(label, summary, the model that wrote them or None for keywords)."""
        members = sorted((self.topics[m] for m in theme.members), key=lambda t: (t.first, t.id))
        if gen is not None:
            stats.model_calls += 1
            got = _label_model(gen, members, self.records)
            if got is not None:
                return (*got, gen.model_id)
            stats.label_failures += 1
        turns = [x for t in members for x in t.turns]
        top = [w for w, _ in topics.keywords(self.store, turns).most_common(3)]
        label = ", ".join(top) or "recurring conversation"
        dates = sorted(t.first[:10] for t in members if t.first)
        when = f" from {dates[0]} to {dates[-1]}" if dates else ""
        names = "; ".join(dict.fromkeys(t.label for t in members))
        sessions = len(set().union(*(t.sessions for t in members)))
        return label, f"Came up in {sessions} sessions{when}: {names}."[:300], None


def _label_model(gen: Generator, members: list[_Topic], records: list[CallRecord]) -> tuple[str, str] | None:
    shown = members if len(members) <= PROMPT_TOPICS else members[: PROMPT_TOPICS // 2] + members[-PROMPT_TOPICS // 2 :]
    lines = [f"m{i}. {t.first[:10] or 'undated'}: {t.label} - {t.summary[:200]}" for i, t in enumerate(shown, 1)]
    return topics.ask_label(gen, PROMPT, lines, "theme-label", records)


def run_themes(store: Store, gen: Generator | None = None) -> ThemeStats:
    """One theme pass over what changed since the last (see the module docstring)."""
    stats = ThemeStats()
    if not stored.unplaced(store.conn):
        return stats
    snap = _read(store.conn)
    plan = _Pass(store, snap)
    placed = plan.place(stats)
    # The pass commits only if nothing changed meanwhile, so a bounded number of model
    # calls keeps it short; themes past the bound stay marked for the next pass.
    changed = [key for key, theme in plan.themes.items() if theme.changed]
    labels = {
        key: plan.label(plan.themes[key], gen if i < MODEL_LABELS else None, stats) for i, key in enumerate(changed)
    }
    later = set(changed[MODEL_LABELS:]) if gen is not None else set()
    writes = _writes(plan, labels, later)
    ids = stored.commit_themes(store.conn, plan.records, snap, plan.dissolved, writes, placed)
    if ids is None:
        stats.conflicts += 1
        return stats
    for write, _model in writes:
        stats.themes_created += write.id is None
        stats.themes_relabelled += write.id is not None
    return stats


def _writes(plan: _Pass, labels: dict[int, Label], later: set[int]) -> list[stored.Planned]:
    """The changed themes as topic writes: label, its session topics, the turns that
    join and leave it; marked placed unless its model label waits for a later pass."""
    now = now_iso()
    out: list[stored.Planned] = []
    for key, theme in plan.themes.items():
        if not theme.changed:
            continue
        label, summary, model = labels[key]
        want = {x for m in theme.members for x in plan.topics[m].turns}
        have = plan.theme_turns.get(key, set())
        write = TopicWrite(
            theme.id,
            "theme",
            label,
            summary,
            now,
            add_turns=tuple(sorted(want - have)),
            remove_turns=tuple(sorted(have - want)),
            add_topics=tuple(theme.members),
            themed=key not in later,
        )
        out.append((write, model))
    return out
