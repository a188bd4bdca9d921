"""LongMemEval questions and haystack turns, read for training and held-out checks.

A turn is kept as the text the write path embeds (``turn_doc``: "[date] role: text")
with its statement-cue spans shifted into that text, so training sees exactly what a
store holds. Files may be gzipped (``.gz``).

Invariants:
- a session whose id is in ``exclude`` (the sessions of the files we measure on) is
  dropped, and so is any turn whose text one of those files holds: nothing of dev60
  reaches training, not even as a filler turn or a hard negative;
- a question whose evidence turns are all dropped is dropped; turn keys are
  ``<session id>:<index>`` (the benches' source ids), one turn per key.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.storage.write.prepare import statement_spans
from localmem.storage.write.vectorize import turn_doc
from localmem.util.text import parse_time


@dataclass(frozen=True)
class Turn:
    key: str
    session: str
    role: str
    doc: str  # what the store embeds for the turn
    spans: tuple[tuple[int, int], ...]  # its statement cues, as spans of ``doc``
    text_start: int  # where the turn's own text begins in ``doc``
    ts: str | None

    @property
    def text(self) -> str:
        return self.doc[self.text_start :]


@dataclass(frozen=True)
class Question:
    qid: str
    qtype: str
    text: str
    evidence: tuple[str, ...]  # turn keys
    answer_sessions: frozenset[str]
    haystack: tuple[str, ...]  # turn keys, in session order


@dataclass
class Corpus:
    turns: dict[str, Turn]
    questions: list[Question]
    sessions: dict[str, tuple[str, ...]]  # session id -> its turn keys in order


def read_items(path: Path) -> list[dict[str, Any]]:
    """A LongMemEval file's list of questions (plain or gzipped JSON)."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as fh:
                items = json.load(fh)
        else:
            items = json.loads(path.read_text("utf-8"))
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read LongMemEval data: {exc}", path=str(path)) from exc
    if not isinstance(items, list):
        raise InputError("expected a JSON list of LongMemEval questions", path=str(path))
    return items


def excluded(paths: Iterable[Path]) -> tuple[set[str], set[str]]:
    """Session ids and turn texts of the LongMemEval files in ``paths``."""
    ids: set[str] = set()
    texts: set[str] = set()
    for path in paths:
        for item in read_items(path):
            ids.update(str(s) for s in item.get("haystack_session_ids", []))
            for sess in item.get("haystack_sessions", []):
                texts.update(str(t.get("content", "")).strip() for t in sess)
    texts.discard("")
    return ids, texts


def make_turn(key: str, session: str, role: str, text: str, ts: str | None) -> Turn:
    doc = turn_doc(role, text, ts)
    start = len(doc) - len(text)
    spans = tuple((a + start, b + start) for a, b in statement_spans(text))
    return Turn(key, session, role, doc, spans, start, ts)


def load(
    path: Path, exclude: Sequence[Path] = (), hold_out: frozenset[str] = frozenset(), only: frozenset[str] | None = None
) -> Corpus:
    """Every question of ``path`` (or those whose id is in ``only``) with its haystack,
    minus what ``exclude`` holds; the questions whose id is in ``hold_out`` are left out
    with every session and turn text of their haystacks (a cross-validation fold trains
    on nothing its test sees)."""
    bad_ids, bad_texts = excluded(exclude)
    items = read_items(path)
    for item in items:
        if str(item.get("question_id")) in hold_out:
            bad_ids.update(str(s) for s in item.get("haystack_session_ids", []))
            bad_texts.update(
                str(t.get("content", "")).strip() for sess in item.get("haystack_sessions", []) for t in sess
            )
    if only is not None:
        items = [item for item in items if str(item.get("question_id")) in only]
    turns: dict[str, Turn] = {}
    sessions: dict[str, tuple[str, ...]] = {}
    questions: list[Question] = []
    for n, item in enumerate(items):
        try:
            ids, dates, hay = item["haystack_session_ids"], item["haystack_dates"], item["haystack_sessions"]
            qid, question = str(item["question_id"]), str(item["question"])
        except (KeyError, TypeError) as exc:
            raise InputError(f"question {n} lacks field {exc}", path=str(path)) from exc
        keys: list[str] = []
        evidence: list[str] = []
        for sid, date, sess in zip(ids, dates, hay, strict=True):
            sid = str(sid)
            if sid in bad_ids:
                continue
            ts = parse_time(str(date))
            own: list[str] = []
            for i, t in enumerate(sess):
                text = str(t.get("content", "")).strip()
                if not text or text in bad_texts:
                    continue
                key = f"{sid}:{i}"
                turns.setdefault(key, make_turn(key, sid, str(t["role"]), text, ts))
                own.append(key)
                if t.get("has_answer"):
                    evidence.append(key)
            sessions.setdefault(sid, tuple(own))
            keys += own
        if evidence:
            answer = frozenset(str(s) for s in item.get("answer_session_ids", []))
            questions.append(Question(qid, str(item["question_type"]), question, tuple(evidence), answer, tuple(keys)))
    return Corpus(turns, questions, sessions)


def fold_ids(items: Sequence[dict[str, Any]], k: int, fold: int) -> frozenset[str]:
    """The question ids of fold ``fold`` of ``k``: by position within its type, so every
    fold holds every type in proportion."""
    seen: dict[str, int] = {}
    out = set()
    for item in items:
        qtype = str(item.get("question_type"))
        if seen.get(qtype, 0) % k == fold:
            out.add(str(item.get("question_id")))
        seen[qtype] = seen.get(qtype, 0) + 1
    return frozenset(out)
