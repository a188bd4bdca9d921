"""Redact a span of a stored turn in place (the web view's *Redact selection*): the span
becomes ``[secret: manual]`` (the secrets guard's placeholder) and the turn keeps its
session and place, but not its identity: ``rewrite.rewrite_turns`` does it, the one rewrite
``localmem redact --scan`` uses too (the redacted turn written and the original forgotten,
through the door, in one transaction; sync carries both with no new rule).

Invariants: the span is checked against the turn as the caller saw it (its hash, and the
selected text when given) before anything is written; the turn id changes (a new row): the
caller is told the new one.
"""

from __future__ import annotations

from dataclasses import dataclass

from localmem.errors import InputError, NotFound
from localmem.storage.write.rewrite import Rewrite, rewrite_turns
from localmem.storage.write.store import Store
from localmem.util import secrets

MANUAL = secrets.PLACEHOLDER.format(kind="manual")


class Conflict(InputError):
    """The turn changed (or went) between reading it and redacting it."""


@dataclass(frozen=True)
class Redacted:
    old_id: int
    new_id: int | None  # None: the redacted text was another turn's already (stored, or forgotten)
    old_hash: str
    new_hash: str | None
    session_id: int
    text: str


def redact_span(
    store: Store,
    turn_id: int,
    start: int,
    end: int,
    *,
    expect_hash: str | None = None,
    expect_text: str | None = None,
    placeholder: str = MANUAL,
) -> Redacted:
    """Replace characters ``start`` .. ``end`` of turn ``turn_id``'s text with
    ``placeholder`` (see the module docstring); ``expect_hash``: refuse (``Conflict``) if
    the turn is no longer that content; ``expect_text``: refuse (``InputError``) unless the
    span is that text."""
    row = store.conn.execute(
        "SELECT t.session_id, s.source, s.key, t.ord, t.speaker, t.role, t.ts, t.source_id, t.text, t.hash "
        "FROM turns t JOIN sessions s ON s.id = t.session_id WHERE t.id = ?",
        (turn_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no turn with id {turn_id}")
    sid, _source, _key, _ord, _speaker, _role, _ts, _source_id, text, old_hash = row
    if expect_hash is not None and expect_hash != old_hash:
        raise Conflict(f"turn {turn_id} changed since it was shown; reload it and select again")
    if not (0 <= start < end <= len(text)) or not text[start:end].strip():
        raise InputError(f"characters {start}..{end} are not a span of turn {turn_id}'s text ({len(text)} characters)")
    if expect_text is not None and text[start:end] != expect_text:
        raise InputError(f"characters {start}..{end} of turn {turn_id} are not the text selected")
    new_text = text[:start] + placeholder + text[end:]
    if new_text == text:
        raise InputError(f"turn {turn_id} already reads that way")
    done = rewrite_turns(store, [Rewrite(turn_id, old_hash, new_text)], redact=store.settings.ingest.redact)
    if turn_id in done.skipped:
        raise Conflict(f"turn {turn_id} changed or was forgotten meanwhile; nothing was redacted")
    nid = done.new_ids.get(turn_id)  # None: forgotten, its redacted text being another turn's already
    new_hash = None if nid is None else str(store.conn.one("SELECT hash FROM turns WHERE id = ?", (nid,))[0])
    return Redacted(turn_id, nid, old_hash, new_hash, int(sid), done.texts.get(turn_id, ""))
