"""What a hook gives the agent: at a session's start, the project's own memory (where its
last session left off, what was decided or left open in it) and what the person said about
themselves elsewhere that bears on it; at a prompt, the memory relevant to it, only when it
clears the relevance bar and only what this session was not given already. No model call.

- session start: the last turns of the project's most recent other session ("where you
  left off"), then ``reconstruct`` of ``DECIDED`` under the project scope without the
  current session, keeping only the project's own turns ("decided and open"), then the
  person's own statements from their work elsewhere that bear on what the folder says
  about itself (``retrieval.personal``, at most ``PERSONAL_SHARE`` of the budget); all
  within ``hooks.session_budget`` tokens. A new project (no sessions of its own) gets
  only the last part, often nothing: never another project's talk or personal chat;
- prompt: ``reconstruct`` of the prompt under the project scope, without the current
  session (the agent has it), within ``hooks.prompt_budget``; given only when the best
  visible turn or sentence has a cosine of at least ``hooks.prompt_bar`` to the prompt
  (``Context.stats["best_cosine"]``: the scorer's own probabilities are relative to the
  best hit, so they cannot say whether anything relevant exists at all); left unset, the
  bar is the reading embedder's own (``prompt_bar_of``: cosines differ per model). Turns
  this session was handed since its last session start (the recall log:
  ``recalls.handed_in_session``) are left out: the agent's context holds them.

The text is rendered as ``reconstruct`` renders it (note, session headers, ``[id]
speaker: text`` lines, quoted continuation lines; a header names the session by its title
where it has one) and wrapped in ``<localmem-context>`` (``util.injected``); its head lines
are what the store records as injected.

Invariant: :func:`answer` is the one function behind a hook's recall, in the hook's own
process and in a resident process answering it over the socket (op ``hook``), so both
give the same text under the same bar and write the same rows (the injected head lines,
the recall log's ``hook:<agent>`` call); those writes are best effort: a busy store costs
the record, never the reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from localmem.errors import LocalmemError, StoreLocked
from localmem.models.embedding import prompt_bar_of
from localmem.records import EvidenceTurn, ProjectScope
from localmem.resident.wire import PROJECT_PREFIX, HookAsk
from localmem.retrieval import personal
from localmem.retrieval.packing import NOTE, escape, quote
from localmem.retrieval.reconstruct import reconstruct
from localmem.retrieval.scope import project_scope
from localmem.storage.layers import recalls
from localmem.storage.layers.recalls import RecallTurn, RecallWrite
from localmem.storage.reads import queries, views
from localmem.storage.reads.queries import TurnRow
from localmem.storage.write import injections
from localmem.storage.write.store import Store
from localmem.util import injected, projectinfo, secrets
from localmem.util.text import count_words, display_time, tokens_for_words

DECIDED = "what we decided, agreed or chose, and what is still open, to do next, unresolved or blocked"
LEFT_OFF_TURNS = 6  # turns of the last session shown at most
LEFT_OFF_SHARE = 0.4  # of the session budget
PERSONAL_SHARE = 0.25  # of the session budget, at most, for the person's statements elsewhere
TITLE_CHARS = 80  # of a session's title, shown in its header


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
    turns: tuple[RecallTurn, ...]  # what was handed, in order, with why (the recall log's rows)
    best_cosine: float | None = None
    query: str = ""  # what was asked (the recall log's query)
    tokens: int = 0  # of the context handed

    @property
    def turn_ids(self) -> tuple[int, ...]:
        return tuple(t.turn_id for t in self.turns)


def render(lines: Sequence[Line], titles: dict[str, str] | None = None) -> str:
    """Chronological lines grouped by session, as ``reconstruct`` renders a context; a
    session's header names it by its title in ``titles`` (by session key) when it has one."""
    out = [NOTE]
    current: str | None = None
    for ln in lines:
        if ln.session != current:
            title = (titles or {}).get(ln.session, "")
            name = f'"{escape(title)}"' if title else escape(ln.session)
            out += ["", f"# {display_time(ln.when)} (session {name})"]
            current = ln.session
        who = f" {escape(ln.speaker)}:" if ln.speaker else ""
        out.append(f"[{ln.turn_id}]{who} {quote(ln.text)}")
    return "\n".join(out)


def titles_of(store: Store, session_ids: Sequence[int]) -> dict[str, str]:
    """Session key -> its title (clipped to ``TITLE_CHARS``), for those that have one."""
    out: dict[str, str] = {}
    for sid in dict.fromkeys(session_ids):
        head = views.session_head(store.conn, sid)
        if head is not None and head.title.strip():
            title = " ".join(head.title.split())
            out[head.key] = title if len(title) <= TITLE_CHARS else title[: TITLE_CHARS - 1] + "…"
    return out


def _line_of(t: EvidenceTurn | TurnRow) -> Line:
    if isinstance(t, TurnRow):
        return Line(t.id, t.session_key, t.ts or t.session_started, t.speaker, t.text)
    return Line(t.turn_id, t.session, t.timestamp, t.speaker, t.text)


def _fit(lines: list[Line], budget: int, titles: dict[str, str]) -> list[Line]:
    """The last lines that fit ``budget`` tokens (words x 1.3 of their rendered text)."""
    kept: list[Line] = []
    for ln in reversed(lines):
        if tokens_for_words(count_words(render([*kept, ln], titles))) > budget:
            break
        kept.insert(0, ln)
    return kept


def _tokens(parts: Sequence[str]) -> int:
    return tokens_for_words(count_words("\n\n".join(parts)))


def session_start(
    store: Store, project: ProjectScope, session_id: str, budget: int, about: projectinfo.About | None = None
) -> Recalled:
    """The project's own memory and the person's statements that bear on it (module
    docstring). ``about``: what the folder says about itself (default: read from its root)."""
    rows = queries.latest_project_turns(store.conn, project, session_id, LEFT_OFF_TURNS)
    titles = titles_of(store, [r.session_id for r in rows])
    recent = _fit([_line_of(r) for r in rows], int(budget * LEFT_OFF_SHARE), titles)
    parts: list[str] = []
    handed = [RecallTurn(ln.turn_id, "recent", 0.0, "the last session in this project") for ln in recent]
    if recent:
        parts.append("localmem: where the last session in this project left off\n" + render(recent, titles))
    own = set(queries.project_sessions(store.conn, project))
    left = budget - _tokens(parts) - int(budget * PERSONAL_SHARE)
    if own and left > 50:
        ctx = reconstruct(store, DECIDED, left - 20, scope=project, exclude_session=session_id or None)
        shown = {t.turn_id for t in handed}
        # only the project's own turns: a decision elsewhere, or a person's talk about
        # themselves, is not what was decided in this project
        kept = [t for t in ctx.turns if t.turn_id not in shown and t.session_id in own]
        if kept:
            titles = titles_of(store, [t.session_id for t in kept])
            decided = render([_line_of(t) for t in kept], titles)
            parts.append("localmem: decided and still open in this project (recalled by relevance)\n" + decided)
            handed += [RecallTurn(t.turn_id, t.reason, float(t.score), t.why) for t in kept]
    left = budget - _tokens(parts)
    if left > 50:
        about = projectinfo.about(project.root, project.repository) if about is None else about
        shown = {t.turn_id for t in handed}
        said = [
            (t, c)
            for t, c in personal.bearing(
                store, project, about, min(left, int(budget * PERSONAL_SHARE)) - 20, session_id
            )
            if t.turn_id not in shown
        ]
        if said:
            titles = titles_of(store, [t.session_id for t, _ in said])
            lines = render([_line_of(t) for t, _ in said], titles)
            parts.append("localmem: what you said about yourself elsewhere that may bear on this project\n" + lines)
            why = "a statement of the person's, cosine {:.2f} to what the project says about itself"
            handed += [RecallTurn(t.turn_id, "personal", c, why.format(c)) for t, c in said]
    if not parts:
        return Recalled("", (), query=DECIDED)
    text = injected.wrap("\n\n".join(parts), "localmem: memory of this project")
    return Recalled(text, tuple(handed), query=DECIDED, tokens=tokens_for_words(count_words(text)))


def prompt(
    store: Store,
    project: ProjectScope,
    session_id: str,
    text: str,
    budget: int,
    bar: float | None,
    given: frozenset[int] = frozenset(),
) -> Recalled:
    """The memory relevant to ``text``, or nothing below ``bar`` (``None``: the bar of the
    embedder that reads the store, ``prompt_bar_of``); turns in ``given`` (what this session
    was handed already) left out."""
    ctx = reconstruct(store, text, budget, scope=project, exclude_session=session_id or None)
    best = float(ctx.stats.get("best_cosine", 0.0)) if ctx.turns else None
    # the store's embedder after the read: a store that follows its record may have switched
    bar = prompt_bar_of(store.embedder) if bar is None else bar
    if best is None or best < bar:
        return Recalled("", (), best, query=text)
    turns = [t for t in ctx.turns if t.turn_id not in given]
    if not turns:
        return Recalled("", (), best, query=text)
    body = render([_line_of(t) for t in turns], titles_of(store, [t.session_id for t in turns]))
    handed = tuple(RecallTurn(t.turn_id, t.reason, float(t.score), t.why) for t in turns)
    wrapped = injected.wrap(body, "localmem: memory that may bear on this prompt")
    return Recalled(wrapped, handed, best, query=text, tokens=tokens_for_words(count_words(wrapped)))


def answer(store: Store, ask: HookAsk) -> dict[str, Any]:
    """A hook's recall (module docstring), as a JSON-ready dict: ``text`` ('' for none),
    ``turns`` (how many handed), ``best_cosine`` (a prompt's), and ``not_recorded`` (what
    kept the injected lines or the recall log from being written, when something did).
    Raises what the read raises (a locked store, a bad project path)."""
    project = project_scope(ask.project)
    client = f"hook:{ask.agent}"
    if ask.event == "session-start":
        got = session_start(store, project, ask.session, ask.budget)
    else:
        given = recalls.handed_in_session(store.conn, client, ask.session, "session-start") if ask.session else None
        got = prompt(store, project, ask.session, ask.prompt, ask.budget, ask.bar, given or frozenset())
    out: dict[str, Any] = {"text": got.text, "turns": len(got.turns)}
    if got.best_cosine is not None:
        out["best_cosine"] = round(got.best_cosine, 3)
    if not got.text:
        return out
    try:  # best effort: the reply matters more than the record of it
        injections.record(store.conn, injected.head_lines(got.text))
    except (LocalmemError, apsw.Error) as exc:
        out["not_recorded"] = _kind(exc)
    query = secrets.redact(got.query[: recalls.QUERY_CHARS])  # as ``recalls.from_context`` keeps a query
    rec = RecallWrite(
        client,
        ask.event,
        query,
        ask.budget,
        got.tokens,
        got.turns,
        scope=PROJECT_PREFIX + ask.project,
        session=ask.session or None,
        project=project.root,
    )
    recalls.log(store.conn, rec, store.settings.recall_log)  # best effort: never raises for a busy store
    return out


def _kind(exc: BaseException) -> str:
    if isinstance(exc, StoreLocked | apsw.BusyError | apsw.LockedError):
        return "store locked"
    return "error"
