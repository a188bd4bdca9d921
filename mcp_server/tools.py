"""The MCP tools: thin, typed wrappers over ``localmem`` (Store, toolkit, answer).

Names, parameters and descriptions are written for the client's model deciding when
to use memory; each description says what comes back and how big it is. Argument
schemas come from the annotations (the SDK validates them before a tool runs); library
errors arrive as tool errors with the library's message (``AppState.call``).
``remember`` and ``reconstruct`` with their parameters are a public contract.
"""

# No ``from __future__ import annotations``: the SDK reads these annotations at
# registration to build schemas and to find the Context parameter.

from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field

from localmem import toolkit
from localmem.enrichment.layers import layer_stats
from localmem.records import TurnIn
from localmem.retrieval.reconstruct import reconstruct as reconstruct_context
from localmem.storage.store import Store
from localmem.util.text import parse_time
from mcp_server.state import AppState

Ctx = Context[AppState, Any]
MAX_TURNS_PER_CALL = 500
Limit = Annotated[int, Field(ge=1, le=toolkit.MAX_LIMIT, description=f"page size (at most {toolkit.MAX_LIMIT})")]
Offset = Annotated[int, Field(ge=0, le=toolkit.MAX_OFFSET, description="items to skip (the previous next_offset)")]
TurnId = Annotated[int, Field(ge=1, description="a turn id from an earlier result")]
Scope = Annotated[str | None, Field(description="only this session key or source (e.g. 'mcp')")]
When = Annotated[str | None, Field(description="ISO 8601 date or time, e.g. 2024-05-01 or 2024-05-01T14:30")]


def _state(ctx: Ctx) -> AppState:
    return ctx.request_context.lifespan_context


class TurnArg(BaseModel):
    """One message to remember."""

    model_config = ConfigDict(extra="forbid")
    text: str = Field(min_length=1, max_length=100_000, description="the message, verbatim")
    speaker: str = Field("", max_length=200, description="who said it (a name), if known")
    role: str = Field("user", max_length=40, description="user / assistant / system")
    timestamp: str | None = Field(None, description="when it was said (ISO 8601); default: the session start or now")


async def remember(
    turns: Annotated[list[TurnArg], Field(min_length=1, max_length=MAX_TURNS_PER_CALL)],
    ctx: Ctx,
    session: Annotated[
        str | None, Field(max_length=200, description="conversation id; default: one session per day")
    ] = None,
) -> dict[str, Any]:
    st = _state(ctx)
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")
    key = session or f"mcp-{now[:10]}"
    res = await st.call(_write_remembered, st.store, turns, key, now, write=True)
    return {
        "session": key,
        "turn_ids": list(res.turn_ids),
        "new_turns": res.new_turns,
        "existing_turns": res.existing_turns,
        "enrichment": (
            f"queued for the background worker ({st.generator.model_id})"
            if st.generator is not None and st.worker.running
            else "queued; no model running in this server, so only model-free cues (sentences) exist for now"
        ),
    }


REMEMBER = """Store messages in long-term memory. Use it for anything worth recalling in a later conversation:
facts about the user, decisions, plans, preferences, events. Pass the messages verbatim (each with speaker and,
if known, timestamp); `session` groups one conversation. Returns at once with the stored turn ids (a message
stored before is recognised and not duplicated); indexing by the local model continues in the background."""


async def reconstruct(
    query: Annotated[str, Field(min_length=1, max_length=2000, description="the question or topic to recall")],
    ctx: Ctx,
    budget_tokens: Annotated[int, Field(ge=1, description="size of the returned context in tokens (capped)")] = 2000,
    as_of: When = None,
    scope: Scope = None,
) -> dict[str, Any]:
    st = _state(ctx)
    budget = min(budget_tokens, st.store.settings.max_budget_tokens)
    c = await st.call(reconstruct_context, st.store, query, budget, as_of=as_of, scope=scope)
    return {
        "text": c.text,
        "tokens": c.tokens,
        "budget_tokens": c.budget_tokens,
        "turns": [
            {
                "turn_id": t.turn_id,
                "session": t.session,
                "timestamp": t.timestamp,
                "speaker": t.speaker,
                "reason": t.reason,
                "score": round(t.score, 4),
            }
            for t in c.turns
        ],
    }


RECONSTRUCT = """Recall past conversations: returns the stored messages most likely to answer `query`, as one
chronological text grouped by session with dates (at most `budget_tokens`, default 2000, capped at 32000), plus
the cited turns (ids, sessions, times, and why each is there: anchor / temporal / semantic / antecedent). No
model call; fast. Use it first whenever the user refers to something from before. `as_of` ignores later
messages; `scope` limits to one session key or source. For step-by-step digging use search_cues and the
turn_* tools with the returned turn ids."""


async def search_cues(
    text: Annotated[str, Field(min_length=1, max_length=500, description="words, a name or a phrase")],
    ctx: Ctx,
    kinds: Annotated[
        list[str] | None, Field(description="only these cue kinds: statement, keyword, triple, fact")
    ] = None,
    limit: Limit = 10,
    offset: Offset = 0,
    as_of: When = None,
    scope: Scope = None,
) -> dict[str, Any]:
    st = _state(ctx)
    page = await st.call(
        toolkit.search_cues, st.store, text, kinds=kinds, limit=limit, offset=offset, as_of=as_of, scope=scope
    )
    return page.to_dict()


SEARCH_CUES = """Find memory cues (sentences, keywords, triples, facts extracted from stored messages) matching
`text`: exact matches first, then cues holding all its words, then similar meaning, then partial word matches.
Each item: the cue (id, kind, text, tags) with its turn id, speaker, time, match type and score. Paged: `limit`
items (default 10, at most 50), `next_offset` for more. Next: cue_tags, cue_turns, turn_context."""


def _cue(cue: str | None, cue_id: int | None) -> int | str:
    if (cue is None) == (cue_id is None):
        raise ToolError("give exactly one of cue (its text) or cue_id")
    return cue_id if cue_id is not None else str(cue)


CueText = Annotated[str | None, Field(max_length=500, description="the cue's text, e.g. 'tomatoes'")]
CueId = Annotated[int | None, Field(ge=1, description="a cue id from search_cues")]


async def cue_tags(
    ctx: Ctx, cue: CueText = None, cue_id: CueId = None, limit: Limit = 10, offset: Offset = 0
) -> dict[str, Any]:
    st = _state(ctx)
    page = await st.call(toolkit.cue_tags, st.store, _cue(cue, cue_id), limit=limit, offset=offset)
    return page.to_dict()


CUE_TAGS = """The tags (what a cue is or how it relates: food, work, place, family, ...) attached to a cue in
every message where it occurs, most frequent first, each with its number of turns. Give `cue` (text) or
`cue_id`. Small: a few short items. Next: cue_turns with a tag."""


async def cue_turns(
    ctx: Ctx,
    cue: CueText = None,
    cue_id: CueId = None,
    tag: Annotated[str | None, Field(max_length=100, description="only turns where the cue has this tag")] = None,
    query: Annotated[str | None, Field(max_length=1000, description="rank the turns by similarity to this")] = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    st = _state(ctx)
    page = await st.call(toolkit.cue_turns, st.store, _cue(cue, cue_id), tag, query=query, limit=limit, offset=offset)
    return page.to_dict()


CUE_TURNS = """The messages (turns) where a cue occurs, optionally only with one tag; when there are many, the
most similar to `query` (default: the cue) come first. Each item: turn id, session, time, speaker, text (long
texts clipped to 800 characters; get_turn has the whole). Paged (default 10, at most 50)."""


async def turn_cues(ctx: Ctx, turn_id: TurnId, limit: Limit = 20, offset: Offset = 0) -> dict[str, Any]:
    st = _state(ctx)
    return (await st.call(toolkit.turn_cues, st.store, turn_id, limit=limit, offset=offset)).to_dict()


TURN_CUES = """A message and the cues indexed from it (facts, triples, keywords first, then its sentences), each
with its tags: what the memory knows the message is about. One item; its cues are paged (default 20)."""


async def turn_context(
    ctx: Ctx,
    turn_id: TurnId,
    window: Annotated[int, Field(ge=0, le=toolkit.MAX_WINDOW, description="neighbours each side")] = 2,
    links: Annotated[int, Field(ge=1, le=toolkit.MAX_LIMIT, description="most linked turns to return")] = 10,
) -> dict[str, Any]:
    st = _state(ctx)
    res = await st.call(toolkit.turn_context, st.store, turn_id, window=window, links=links)
    return asdict(res)


TURN_CONTEXT = """What surrounds a message: the turns just before and after it in its conversation (`window`
each side, default 2, at most 5) and turns linked to it by meaning or as its antecedent (earlier messages it
builds on), each with the link kind, direction and reason; at most `links` (default 10). Use it to read a
found message in context."""


async def turn_time(ctx: Ctx, turn_id: TurnId) -> dict[str, Any]:
    st = _state(ctx)
    return asdict(await st.call(toolkit.turn_time, st.store, turn_id))


TURN_TIME = """When a message was said: its timestamp, its session and the session's start, and its place in
the session. Tiny. Use it to resolve 'yesterday' / 'last week' in a message."""


async def turns_between(
    ctx: Ctx,
    start: When = None,
    end: When = None,
    scope: Scope = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    st = _state(ctx)
    page = await st.call(toolkit.turns_between, st.store, start, end, scope=scope, limit=limit, offset=offset)
    return page.to_dict()


TURNS_BETWEEN = """Messages said between `start` and `end` (inclusive; a date alone as the end covers that whole
day), in time order. Give at least one bound. Paged (default 10, at most 50) with the total count."""


async def person_aspects(
    ctx: Ctx,
    person: Annotated[str, Field(min_length=1, max_length=200, description="a person's name")],
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    st = _state(ctx)
    return (await st.call(toolkit.person_aspects, st.store, person, limit=limit, offset=offset)).to_dict()


PERSON_ASPECTS = """The aspects of a person the memory holds facts about (work, family, hobby, home, health, ...),
each with its number of facts and the latest date. Small. Next: person_facts with one aspect. Empty until
the local model has indexed messages about the person."""


async def person_facts(
    ctx: Ctx,
    person: Annotated[str, Field(min_length=1, max_length=200, description="a person's name")],
    aspect: Annotated[str | None, Field(max_length=100, description="one aspect from person_aspects")] = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    st = _state(ctx)
    page = await st.call(toolkit.person_facts, st.store, person, aspect, limit=limit, offset=offset)
    return page.to_dict()


PERSON_FACTS = """Facts about a person (of one aspect, if given), newest first, since the latest is the one most
likely still true. Each: person, aspect, value, and the turn id, session and time it comes from. Paged
(default 10, at most 50)."""


async def topics(
    ctx: Ctx,
    text: Annotated[
        str | None, Field(max_length=200, description="only topics whose label or summary has this")
    ] = None,
    kind: Annotated[
        Literal["session", "theme"] | None,
        Field(description="only session topics (one conversation) or themes (recurring across conversations)"),
    ] = None,
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    st = _state(ctx)
    return (await st.call(toolkit.topics, st.store, text, kind=kind, limit=limit, offset=offset)).to_dict()


TOPICS = """Topics: labelled groups of related messages, with a short summary and their number of turns, most
recently updated first. A topic's `kind` is `session` (a stretch of one conversation) or `theme` (session
topics that recur across conversations, e.g. a hobby discussed over months; `session_topics` counts them); a
session topic in a theme names it in `theme_id`. Empty until the topic layer has run. Paged (default 10).
Next: topic_turns (works for themes too), theme_topics."""


async def topic_turns(
    ctx: Ctx,
    topic_id: Annotated[int, Field(ge=1, description="a topic id from topics")],
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    st = _state(ctx)
    return (await st.call(toolkit.topic_turns, st.store, topic_id, limit=limit, offset=offset)).to_dict()


TOPIC_TURNS = """The messages of one topic or theme in time order (texts clipped to 800 characters). Paged
(default 10)."""


async def theme_topics(
    ctx: Ctx,
    theme_id: Annotated[int, Field(ge=1, description="a theme's topic_id, or a session topic's theme_id")],
    limit: Limit = 10,
    offset: Offset = 0,
) -> dict[str, Any]:
    st = _state(ctx)
    return (await st.call(toolkit.theme_topics, st.store, theme_id, limit=limit, offset=offset)).to_dict()


THEME_TOPICS = """The session topics a theme groups, in time order: how a recurring subject came up conversation
by conversation, each with its label, summary and number of turns. Paged (default 10). Next: topic_turns on
one of them."""


async def get_turn(ctx: Ctx, turn_id: TurnId) -> dict[str, Any]:
    st = _state(ctx)
    return await st.call(toolkit.turn, st.store, turn_id)


GET_TURN = """One message in full (whole text, unclipped), with its session, time, speaker and role."""


async def forget(
    ctx: Ctx,
    turn_ids: Annotated[list[int] | None, Field(max_length=10_000, description="turn ids to delete")] = None,
    session: Annotated[str | None, Field(max_length=200, description="delete every turn of this session")] = None,
    before: When = None,
) -> dict[str, Any]:
    st = _state(ctx)
    if not turn_ids and session is None and before is None:
        raise ToolError("give turn_ids, a session, or a time to forget everything before")
    if before is not None:
        try:
            parse_time(before)
        except ValueError as exc:
            raise ToolError(f"before: {exc}") from exc
    n = await st.call(st.store.forget, turn_ids or (), session=session, before=before, write=True)
    return {"deleted_turns": n}


FORGET = """Delete memories for good: the given turns, every turn of a session, and/or every turn said before a
time, with everything derived from them (cues, links, vectors, index rows). Only when the user asks to
forget something. Returns the number of turns deleted."""


def _stats(store: Store) -> dict[str, Any]:
    out = store.stats()
    out["enrichment"] = layer_stats(store)
    return out


def _write_remembered(store: Store, turns: list[Any], key: str, now: str) -> Any:
    """A turn without a timestamp gets its session's start (now, for a new session): a
    client re-sending the same turns later then matches them instead of storing copies,
    since a turn's identity includes its time."""
    row = store.conn.execute("SELECT started_at FROM sessions WHERE source = 'mcp' AND key = ?", (key,)).fetchone()
    default = str(row[0]) if row and row[0] else now
    items = [TurnIn(text=t.text, speaker=t.speaker, role=t.role, timestamp=t.timestamp or default) for t in turns]
    return store.write(items, key, source="mcp", started_at=now)


async def memory_stats(ctx: Ctx) -> dict[str, Any]:
    st = _state(ctx)
    out = await st.call(_stats, st.store)
    out["worker"] = {
        "running": st.worker.running,
        "model": st.worker.model,
        "turns_enriched_here": st.worker.turns,
        "error": st.worker.error,
    }
    out["answer_tool"] = st.generator is not None
    out["sampling_backend"] = {"enabled": False, "note": "enrichment via MCP sampling is not implemented"}
    return out


MEMORY_STATS = """What the memory holds: sessions, turns, cues by kind, links by kind, tags, topics, themes,
time span, file size, how much the local model has indexed (and the job queue), and whether the background
worker runs. A few dozen numbers."""


async def answer(
    question: Annotated[str, Field(min_length=1, max_length=2000)],
    ctx: Ctx,
    budget_tokens: Annotated[int, Field(ge=1, description="context size given to the local model")] = 2000,
    as_of: When = None,
    scope: Scope = None,
) -> dict[str, Any]:
    from localmem.answering.answer import answer as run_answer

    st = _state(ctx)
    assert st.generator is not None
    budget = min(budget_tokens, st.store.settings.max_budget_tokens)
    res = await st.call(run_answer, st.store, st.generator, question, budget_tokens=budget, as_of=as_of, scope=scope)
    return res.to_dict()


ANSWER = """Answer a question from memory with the local model: reconstructs the context, then the model answers,
preferring the most recent evidence. Returns a short answer and the cited turns. Slower than reconstruct (a
local model call); prefer reconstruct when you can read the context yourself."""


TOOLS: list[tuple[Callable[..., Any], str]] = [
    (remember, REMEMBER),
    (reconstruct, RECONSTRUCT),
    (search_cues, SEARCH_CUES),
    (cue_tags, CUE_TAGS),
    (cue_turns, CUE_TURNS),
    (turn_cues, TURN_CUES),
    (turn_context, TURN_CONTEXT),
    (turn_time, TURN_TIME),
    (turns_between, TURNS_BETWEEN),
    (person_aspects, PERSON_ASPECTS),
    (person_facts, PERSON_FACTS),
    (topics, TOPICS),
    (topic_turns, TOPIC_TURNS),
    (theme_topics, THEME_TOPICS),
    (get_turn, GET_TURN),
    (forget, FORGET),
    (memory_stats, MEMORY_STATS),
]
