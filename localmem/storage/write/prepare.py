"""A turn made ready for the write path: checked, timed, identified, split into cues.

Invariants:
- a turn's text has no secret and no ``<private>`` span (``localmem.util.secrets``,
  unless the ``ingest.redact`` setting is off): what follows (its hash, cues, FTS rows,
  vectors, the journal, sync segments, exports) never sees them;
- nor memory a hook injected (``localmem.util.injected``: ``<localmem-context>`` spans, and
  the head lines of a context the store recorded as injected), whatever the settings; a
  turn that held nothing else is left out (``prepare`` returns None);
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
from localmem.util import injected, secrets
from localmem.util.gitinfo import clean_remote
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


def prepare(
    sess: SessionIn, turn: TurnIn, index: int, *, redact: bool = True, known: frozenset[str] = frozenset()
) -> Prepared | None:
    """Turn ``index`` of ``sess`` checked (text, size, time), without injected memory (its
    wrapped spans, and the head lines whose hash is in ``known``: None when nothing else is
    left), its secrets and private spans taken out (``redact``; before the hash, so its
    identity is that of what is stored), and identified."""
    if not isinstance(turn.text, str) or not turn.text.strip():
        raise InputError(f"turn {index} of session {sess.key!r} has no text")
    if (clean := injected.drop_lines(injected.drop_wrapped(turn.text, set(known)), set(known))) != turn.text:
        if not clean.strip():
            return None
        turn = replace(turn, text=clean)
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


def prepare_all(sess: SessionIn, redact: bool, known: frozenset[str] = frozenset()) -> list[Prepared]:
    """Every turn of ``sess``, prepared; turns that held only injected memory left out."""
    out = (prepare(sess, t, i, redact=redact, known=known) for i, t in enumerate(sess.turns))
    return [p for p in out if p is not None]


def injected_candidates(sessions: list[SessionIn]) -> list[str]:
    """Hashes of the lines of these sessions' turns that could be injected head lines
    (looked up in the store's ``injected`` table before ``prepare``)."""
    return [h for s in sessions for t in s.turns if isinstance(t.text, str) for h in injected.candidate_hashes(t.text)]


def session_fields(sess: SessionIn, redact: bool) -> tuple[str, str, str, str, str]:
    """(client, cwd, repository, branch, commit) as stored: the repository without
    credentials, each field redacted like the turns."""
    p = sess.project
    fields = [sess.client, *((p.cwd, clean_remote(p.repository), p.branch, p.commit) if p else ("", "", "", ""))]
    clean = [secrets.redact(f) if redact else f for f in fields]
    return clean[0], clean[1], clean[2], clean[3], clean[4]


def title(sess: SessionIn, redact: bool) -> str:
    """The session's title as stored: redacted like its turns."""
    return secrets.redact(sess.title) if redact else sess.title
