"""The tools the exploring model may call, and running one call safely.

Each tool is a toolkit function (``localmem.toolkit``) with the arguments a model may
give it, small per-call limits and a one-line doc for the prompt. :func:`run_call`
validates a call the model wrote, runs it and shows the model a compact, cut result.

Invariants:
- a call never raises: unknown tools, bad arguments and toolkit errors (no such cue,
  bad date) come back as ``(False, "error: ...", [])`` for the model to read;
- what the model sees of one result is at most :data:`RESULT_CHARS` characters, with
  at most :data:`RESULT_ITEMS` items and turn texts cut to :data:`SNIPPET_CHARS`;
- with ``as_of`` / ``scope``, the turn ids a result names are filtered the way the
  toolkit filters its own results, so later turns never become evidence.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from localmem import toolkit
from localmem.errors import InputError, LocalmemError
from localmem.storage.store import Store
from localmem.toolkit.common import _time, _visible

RESULT_CHARS = 700  # one call's result as the model sees it
RESULT_ITEMS = 5  # items per call (the toolkit's limit, clamped)
SNIPPET_CHARS = 160  # a turn's text inside a result


@dataclass(frozen=True)
class Param:
    type: str  # "str" / "int"
    required: bool = False
    doc: str = ""


@dataclass(frozen=True)
class Tool:
    name: str
    doc: str
    params: dict[str, Param]
    run: Callable[..., Any]
    scoped: bool = False  # takes as_of / scope


def _tools() -> dict[str, Tool]:
    t = toolkit
    s, i = "str", "int"
    tools = [
        Tool(
            "search_cues",
            "find cues (phrases, keywords, facts) matching a text; start here",
            {"text": Param(s, True, "words to look for")},
            lambda st, text, **kw: t.search_cues(st, text, limit=RESULT_ITEMS, **kw),
            scoped=True,
        ),
        Tool(
            "cue_tags",
            "the tags (relation labels) of a cue",
            {"cue": Param(s, True, "cue text")},
            lambda st, cue: t.cue_tags(st, cue, limit=RESULT_ITEMS),
        ),
        Tool(
            "cue_turns",
            "turns where a cue occurs, optionally with one tag",
            {"cue": Param(s, True, "cue text"), "tag": Param(s, doc="tag name")},
            lambda st, cue, tag=None: t.cue_turns(st, cue, tag, limit=RESULT_ITEMS),
        ),
        Tool(
            "turn_cues",
            "the cues and tags of a turn",
            {"turn_id": Param(i, True)},
            lambda st, turn_id: t.turn_cues(st, turn_id, limit=RESULT_ITEMS),
        ),
        Tool(
            "turn_context",
            "the turns around a turn and the turns linked to it",
            {"turn_id": Param(i, True)},
            lambda st, turn_id: t.turn_context(st, turn_id, window=1, links=3),
        ),
        Tool(
            "turn_time",
            "when a turn was said",
            {"turn_id": Param(i, True)},
            lambda st, turn_id: t.turn_time(st, turn_id),
        ),
        Tool(
            "turns_between",
            "turns said in a time range (ISO dates)",
            {"start": Param(s, doc="from, e.g. 2023-05-01"), "end": Param(s, doc="to, e.g. 2023-05-31")},
            lambda st, start=None, end=None: t.turns_between(st, start, end, limit=RESULT_ITEMS),
        ),
        Tool(
            "person_aspects",
            "what the memory knows about a person (aspects)",
            {"person": Param(s, True)},
            lambda st, person: t.person_aspects(st, person, limit=RESULT_ITEMS),
        ),
        Tool(
            "person_facts",
            "facts about a person, optionally of one aspect",
            {"person": Param(s, True), "aspect": Param(s)},
            lambda st, person, aspect=None: t.person_facts(st, person, aspect, limit=RESULT_ITEMS),
        ),
        Tool(
            "topics",
            "topics whose label or summary holds a text; kind: session, or theme (recurs across sessions)",
            {"text": Param(s), "kind": Param(s, doc="session or theme")},
            lambda st, text=None, kind=None: t.topics(st, text, kind=kind, limit=RESULT_ITEMS),
        ),
        Tool(
            "topic_turns",
            "the turns of a topic or theme",
            {"topic_id": Param(i, True)},
            lambda st, topic_id: t.topic_turns(st, topic_id, limit=RESULT_ITEMS),
        ),
        Tool(
            "theme_topics",
            "the session topics of a theme, in time order",
            {"theme_id": Param(i, True)},
            lambda st, theme_id: t.theme_topics(st, theme_id, limit=RESULT_ITEMS),
        ),
        Tool("turn", "one turn in full", {"turn_id": Param(i, True)}, lambda st, turn_id: t.turn(st, turn_id)),
    ]
    return {x.name: x for x in tools}


TOOLS = _tools()


def validate(tool_name: Any, args: Any) -> tuple[Tool, dict[str, Any]]:
    """The tool and its checked arguments; ``InputError`` says what is wrong."""
    if not isinstance(tool_name, str) or tool_name not in TOOLS:
        raise InputError(f"unknown tool {tool_name!r}; tools are {', '.join(TOOLS)}")
    tool = TOOLS[tool_name]
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InputError(f"{tool.name}: args must be an object")
    unknown = [k for k in args if k not in tool.params]
    if unknown:
        raise InputError(f"{tool.name}: unknown argument(s) {unknown}; it takes {list(tool.params)}")
    out: dict[str, Any] = {}
    for name, p in tool.params.items():
        v = args.get(name)
        if v is None or v == "":
            if p.required:
                raise InputError(f"{tool.name}: missing argument {name!r}")
            continue
        if p.type == "int":
            if isinstance(v, str) and v.strip().lstrip("-").isdigit():
                v = int(v.strip())
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(f"{tool.name}: {name} must be an integer; got {v!r}")
        elif not isinstance(v, str):
            if isinstance(v, int | float) and not isinstance(v, bool):
                v = str(v)
            else:
                raise InputError(f"{tool.name}: {name} must be a string; got {v!r}")
        out[name] = v
    return tool, out


def _plain(obj: Any) -> Any:
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return obj.to_dict()
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    return obj


def _turn_ids(obj: Any) -> list[int]:
    """Every turn id a result names, in order (keys ``turn_id``)."""
    found: list[int] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            tid = x.get("turn_id")
            if isinstance(tid, int) and not isinstance(tid, bool) and tid not in found:
                found.append(tid)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(obj)
    return found


_DROP = {"clipped", "source_id", "cue_ids", "offset", "limit", "next_offset"}


def compact(obj: Any) -> str:
    """A result as short JSON: no null/empty fields, bookkeeping keys dropped, turn
    texts cut to SNIPPET_CHARS, the whole cut to RESULT_CHARS."""

    def slim(x: Any) -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k in _DROP or v is None or v == [] or v == "":
                    continue
                if k == "text" and isinstance(v, str) and len(v) > SNIPPET_CHARS:
                    v = v[:SNIPPET_CHARS].rstrip() + "…"
                out[k] = slim(v)
            return out
        if isinstance(x, list):
            return [slim(v) for v in x]
        return x

    text = json.dumps(slim(obj), ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 12] + " …(cut)"


def run_call(
    store: Store, tool_name: Any, args: Any, *, as_of: str | None = None, scope: str | None = None
) -> tuple[bool, str, list[int]]:
    """Validate and run one call: (ok, compact result or error, turn ids named)."""
    try:
        tool, checked = validate(tool_name, args)
        if tool.scoped:
            checked = {**checked, "as_of": as_of, "scope": scope}
        result = _plain(tool.run(store, **checked))
    except LocalmemError as exc:
        return False, f"error: {exc}"[:RESULT_CHARS], []
    except (TypeError, ValueError) as exc:  # a toolkit function refusing odd input
        return False, f"error: {exc}"[:RESULT_CHARS], []
    ids = _turn_ids(result)
    if as_of is not None:
        ids = [t for t in ids if t in _visible(store, ids, _time(as_of, "as_of"), scope)]
    return True, compact(result), ids
