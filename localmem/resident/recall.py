"""What a hook gives the agent: at a session's start, where the project's last session left
off and what was decided or left open in it; at a prompt, the memory relevant to it, only
when it clears the relevance bar. No model call.

- session start: the last turns of the project's most recent other session ("where you
  left off"), then ``reconstruct`` of ``DECIDED`` under the project scope without the
  current session ("decided and open"), within ``hooks.session_budget`` tokens;
- prompt: ``reconstruct`` of the prompt under the project scope, without the current
  session (the agent has it), within ``hooks.prompt_budget``; given only when the best
  visible turn or sentence has a cosine of at least ``hooks.prompt_bar`` to the prompt
  (``Context.stats["best_cosine"]``: the scorer's own probabilities are relative to the
  best hit, so they cannot say whether anything relevant exists at all).

The text is rendered as ``reconstruct`` renders it (note, session headers, ``[id]
speaker: text`` lines, quoted continuation lines) and wrapped in ``<localmem-context>``
(``util.injected``); its head lines are what the store records as injected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from localmem.config import Settings
from localmem.records import EvidenceTurn, ProjectScope
from localmem.retrieval.packing import NOTE, escape, quote
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.reads import queries
from localmem.storage.reads.queries import TurnRow
from localmem.storage.write.store import Store
from localmem.util import injected
from localmem.util.text import count_words, display_time, tokens_for_words

DECIDED = "what we decided, agreed or chose, and what is still open, to do next, unresolved or blocked"
LEFT_OFF_TURNS = 6  # turns of the last session shown at most
LEFT_OFF_SHARE = 0.4  # of the session budget


@dataclass(frozen=True)
class Line:
    turn_id: int
    session: str
    when: str | None
    speaker: str
    text: str


@dataclass(frozen=True)
class Recalled:
    text: str  # wrapped, ready to inject ('' when there is nothing to say)
    turn_ids: tuple[int, ...]
    best_cosine: float | None = None


def render(lines: Sequence[Line]) -> str:
    """Chronological lines grouped by session, as ``reconstruct`` renders a context."""
    out = [NOTE]
    current: str | None = None
    for ln in lines:
        if ln.session != current:
            out += ["", f"# {display_time(ln.when)} (session {escape(ln.session)})"]
            current = ln.session
        who = f" {escape(ln.speaker)}:" if ln.speaker else ""
        out.append(f"[{ln.turn_id}]{who} {quote(ln.text)}")
    return "\n".join(out)


def _line_of(t: EvidenceTurn | TurnRow) -> Line:
    if isinstance(t, TurnRow):
        return Line(t.id, t.session_key, t.ts or t.session_started, t.speaker, t.text)
    return Line(t.turn_id, t.session, t.timestamp, t.speaker, t.text)


def _fit(lines: list[Line], budget: int) -> list[Line]:
    """The last lines that fit ``budget`` tokens (words x 1.3 of their rendered text)."""
    kept: list[Line] = []
    for ln in reversed(lines):
        if tokens_for_words(count_words(render([*kept, ln]))) > budget:
            break
        kept.insert(0, ln)
    return kept


def session_start(store: Store, settings: Settings, project: ProjectScope, session_id: str) -> Recalled:
    """Where the project's last session left off, and what was decided or left open."""
    budget = settings.hooks.session_budget
    recent = [_line_of(r) for r in queries.latest_project_turns(store.conn, project, session_id, LEFT_OFF_TURNS)]
    recent = _fit(recent, int(budget * LEFT_OFF_SHARE))
    parts: list[str] = []
    ids: list[int] = [ln.turn_id for ln in recent]
    if recent:
        parts.append("localmem: where the last session in this project left off\n" + render(recent))
    left = budget - tokens_for_words(count_words("\n\n".join(parts)))
    if left > 50:
        ctx = reconstruct(store, DECIDED, left - 20, scope=project, exclude_session=session_id or None)
        decided = [_line_of(t) for t in ctx.turns if t.turn_id not in ids]
        if decided:
            parts.append("localmem: decided and still open in this project (recalled by relevance)\n" + render(decided))
            ids += [ln.turn_id for ln in decided]
    if not parts:
        return Recalled("", ())
    return Recalled(injected.wrap("\n\n".join(parts), "localmem: memory of this project"), tuple(ids))


def prompt(store: Store, settings: Settings, project: ProjectScope, session_id: str, text: str) -> Recalled:
    """The memory relevant to ``text``, or nothing below the bar."""
    ctx = reconstruct(store, text, settings.hooks.prompt_budget, scope=project, exclude_session=session_id or None)
    best = float(ctx.stats.get("best_cosine", 0.0)) if ctx.turns else None
    if best is None or best < settings.hooks.prompt_bar:
        return Recalled("", (), best)
    lines = [_line_of(t) for t in ctx.turns]
    body = render(lines)
    return Recalled(
        injected.wrap(body, "localmem: memory that may bear on this prompt"), tuple(ln.turn_id for ln in lines), best
    )
