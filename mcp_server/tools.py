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
from datetime import UTC, datetime
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, ConfigDict, Field

from localmem.enrichment.layers import layer_stats
from localmem.records import TurnIn
from localmem.retrieval.reconstruct import reconstruct as reconstruct_context
from localmem.storage.store import Store
from localmem.util.text import parse_time
from mcp_server.args import Ctx, Scope, When, _state
from mcp_server.traversal import (
    CUE_TAGS,
    CUE_TURNS,
    GET_TURN,
    PERSON_ASPECTS,
    PERSON_FACTS,
    SEARCH_CUES,
    THEME_TOPICS,
    TOPIC_TURNS,
    TOPICS,
    TURN_CONTEXT,
    TURN_CUES,
    TURN_TIME,
    TURNS_BETWEEN,
    cue_tags,
    cue_turns,
    get_turn,
    person_aspects,
    person_facts,
    search_cues,
    theme_topics,
    topic_turns,
    topics,
    turn_context,
    turn_cues,
    turn_time,
    turns_between,
)

MAX_TURNS_PER_CALL = 500


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
