"""A turn made ready for the write path: checked, timed, identified, split into cues.

Invariants:
- a turn's text has no secret and no ``<private>`` span (``localmem.util.secrets``,
  unless the ``ingest.redact`` setting is off): what follows (its hash, cues, FTS rows,
  vectors, the journal, sync segments, exports) never sees them;
- a turn's identity is the hash of its session's source and key, its native id,
  speaker, role, time and (redacted) text: the same content written again (from any file name,
  by any client) finds its stored row and writes nothing;
- a turn's text holds at most ``MAX_TURN_CHARS`` characters (refused, never cut);
- its statement cues are its distinct sentences, at most ``MAX_STATEMENT_CUES``, so the
  work a turn adds to a write transaction is bounded whatever its text repeats.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from localmem.errors import InputError
from localmem.records import MAX_TURN_CHARS, SessionIn, TurnIn
from localmem.util import secrets
from localmem.util.text import parse_time, sentence_spans

# Statement cues of one turn: its distinct sentences, at most this many (a turn of the
# same sentence pasted 2,000 times makes one cue, not 2,000 inserts under the lock).
MAX_STATEMENT_CUES = 128


def content_hash(*parts: str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:32]


def statement_spans(text: str) -> list[tuple[int, int]]:
    """The spans of a turn's statement cues: its sentences, each text once (first
    occurrence), at most ``MAX_STATEMENT_CUES``."""
    seen: set[str] = set()
    spans: list[tuple[int, int]] = []
    for a, b in sentence_spans(text):
        if text[a:b] not in seen:
            seen.add(text[a:b])
            spans.append((a, b))
            if len(spans) == MAX_STATEMENT_CUES:
                break
    return spans


@dataclass
class Prepared:
    turn: TurnIn
    ts: str | None
    hash: str
    spans: list[tuple[int, int]]


@dataclass
class Staged:
    """Sessions checked and hashed, ready to embed (``fresh``: not stored when looked
    up) and to commit."""

    sessions: list[tuple[SessionIn, list[Prepared]]]
    fresh: list[Prepared]
    turns: int


def prepare(sess: SessionIn, turn: TurnIn, index: int, *, redact: bool = True) -> Prepared:
    """Turn ``index`` of ``sess`` checked (text, size, time), its secrets and private spans
    taken out (``redact``; before the hash, so its identity is that of what is stored), and identified."""
    if not isinstance(turn.text, str) or not turn.text.strip():
        raise InputError(f"turn {index} of session {sess.key!r} has no text")
    if redact and (clean := secrets.redact(turn.text)) != turn.text:
        if not clean.strip():
            raise InputError(f"turn {index} of session {sess.key!r} has no text outside its <private> spans")
        turn = replace(turn, text=clean)
    if len(turn.text) > MAX_TURN_CHARS:
        raise InputError(
            f"turn {index} of session {sess.key!r} has {len(turn.text):,} characters; "
            f"the most a turn may have is {MAX_TURN_CHARS:,}"
        )
    ts_raw = turn.timestamp or sess.started_at
    try:
        ts = parse_time(ts_raw) if ts_raw else None
    except ValueError as exc:
        raise InputError(f"turn {index} of session {sess.key!r}: {exc}") from exc
    h = content_hash(sess.source, sess.key, turn.source_id or "", turn.speaker, turn.role, ts or "", turn.text)
    return Prepared(turn, ts, h, statement_spans(turn.text))


def prepare_all(sess: SessionIn, redact: bool) -> list[Prepared]:
    """Every turn of ``sess``, prepared."""
    return [prepare(sess, t, i, redact=redact) for i, t in enumerate(sess.turns)]


def title(sess: SessionIn, redact: bool) -> str:
    """The session's title as stored: redacted like its turns."""
    return secrets.redact(sess.title) if redact else sess.title
