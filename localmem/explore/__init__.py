"""Active reconstruction: the local model walks the memory graph with the toolkit.

MRAgent (sections 4.1-4.2, Appendix B.2) in two modes:

- **Navigate**: each round the model reads the question and what it has found so far
  and writes a JSON object (schema-constrained): a short thought, whether the evidence
  is sufficient (``done``) and up to ``max_calls`` tool calls, each a toolkit function
  name and its arguments. The calls are validated and run; their results, compact and
  cut to a fixed size, go back to the model as the next message. Unknown tools, bad
  arguments and toolkit errors (no such cue, bad date) become error lines the model
  reads, never exceptions.
- **Answer**: when the model says ``done`` or a bound is reached, one last call sees
  the collected evidence turns and writes the answer, the turn ids that support it
  and a confidence.

Bounds: at most ``max_rounds`` Navigate rounds (default 8) and ``max_calls`` calls per
round (default 10, the paper's D.4 settings); ``max_tokens`` caps prompt + generated
tokens over every model call of one question (a round that would not fit is not
started); the conversation sent to the model is kept under ``max_prompt_tokens`` by
replacing the oldest rounds' results with one-line summaries. The first round is
seeded without a model call by ``search_cues(question)``, the paper's initial active
set. Every round, call, error and the evidence each round added is kept in the trace.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import TYPE_CHECKING, Any

from localmem import toolkit
from localmem.errors import InputError, LocalmemError, ModelError
from localmem.text import count_tokens

if TYPE_CHECKING:
    from localmem.llm import Generator
    from localmem.store import Store

MAX_ROUNDS = 8
MAX_CALLS = 10
MAX_TOKENS = 40_000
MAX_PROMPT_TOKENS = 3_000
NAVIGATE_TOKENS = 400  # generated tokens of one Navigate reply
ANSWER_TOKENS = 250
EVIDENCE_TOKENS = 1_500  # evidence shown to the Answer call
RESULT_CHARS = 700  # one call's result as the model sees it
RESULT_ITEMS = 5  # items per call (the toolkit's limit, clamped)
SNIPPET_CHARS = 160  # a turn's text inside a result

# -- the tools the model may call ------------------------------------------------------


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
            "topics whose label or summary holds a text",
            {"text": Param(s)},
            lambda st, text=None: t.topics(st, text, limit=RESULT_ITEMS),
        ),
        Tool(
            "topic_turns",
            "the turns of a topic",
            {"topic_id": Param(i, True)},
            lambda st, topic_id: t.topic_turns(st, topic_id, limit=RESULT_ITEMS),
        ),
        Tool("turn", "one turn in full", {"turn_id": Param(i, True)}, lambda st, turn_id: t.turn(st, turn_id)),
    ]
    return {x.name: x for x in tools}


TOOLS = _tools()


def _arg_schema(p: Param) -> dict[str, Any]:
    return {"type": "integer"} if p.type == "int" else {"type": "string", "maxLength": 120}


def navigate_schema(max_calls: int) -> dict[str, Any]:
    """One Navigate reply: a thought, done, and calls typed per tool (so a constrained
    decoder can only write known tool names with their own argument names)."""
    variants = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": tool.name},
                "args": {
                    "type": "object",
                    "properties": {k: _arg_schema(p) for k, p in tool.params.items()},
                    "required": [k for k, p in tool.params.items() if p.required],
                },
            },
            "required": ["tool", "args"],
        }
        for tool in TOOLS.values()
    ]
    return {
        "type": "object",
        "properties": {
            "thought": {"type": "string", "maxLength": 300},
            "done": {"type": "boolean"},
            "calls": {"type": "array", "items": {"anyOf": variants}, "maxItems": max_calls},
        },
        "required": ["thought", "done", "calls"],
    }


ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "maxLength": 600},
        "support": {"type": "array", "items": {"type": "integer"}, "maxItems": 10},
        "confidence": {"type": "number"},
    },
    "required": ["answer", "support", "confidence"],
}

NAVIGATE_PROMPT = """You search a memory of past conversations to answer a question. You cannot see the memory
directly: you call tools, read their results, then decide what to look at next.
Memory is a graph: cues (phrases, keywords, facts about people) point to tags and to the turns
(messages) they come from; turns have ids, times, neighbours and linked turns.
Tools (name(arguments): what it returns):
{tools}
Each round reply with JSON: "thought" (one sentence: what you know, what is missing), "done"
(true when the results so far are enough to answer, or nothing more can be found) and "calls"
(at most {max_calls} tool calls, each {{"tool": name, "args": {{...}}}}). Follow promising turn ids
and cues from earlier results; do not repeat a call. Results are cut short; errors tell you what
to fix."""

ANSWER_PROMPT = """You answer a question about past conversations from the evidence turns given (each with
its id, session date and speaker). When turns disagree, trust the most recent one closest to the
question time. Resolve relative dates from the date of the turn. If the evidence does not hold the
answer, say you do not know. Reply with JSON: "answer" (one or two short sentences), "support" (the
ids of the turns the answer rests on) and "confidence" (0 to 1)."""


def tool_list() -> str:
    lines = []
    for tool in TOOLS.values():
        args = ", ".join(f"{k}{'' if p.required else '?'}: {p.type}" for k, p in tool.params.items())
        lines.append(f"- {tool.name}({args}): {tool.doc}")
    return "\n".join(lines)


# -- the trace -------------------------------------------------------------------------


@dataclass
class Call:
    tool: str
    args: dict[str, Any]
    ok: bool
    result: str  # what the model was shown (result or error), cut to RESULT_CHARS
    turn_ids: list[int] = field(default_factory=list)  # turns the result names
    new_turn_ids: list[int] = field(default_factory=list)  # of those, first seen here


@dataclass
class Round:
    index: int  # 0: the seed (no model call)
    thought: str
    done: bool
    calls: list[Call]
    evidence_added: list[int]
    prompt_tokens: int = 0
    generated_tokens: int = 0
    error: str = ""  # the reply could not be used (unparseable, model failure)


@dataclass
class Exploration:
    question: str
    answer: str
    support: list[int]
    confidence: float
    rounds: list[Round]
    evidence: list[int]  # every turn seen, in the order first seen
    stop_reason: str  # done / max_rounds / max_tokens / model_error / stalled
    prompt_tokens: int
    generated_tokens: int
    model: str

    @property
    def calls(self) -> int:
        return sum(len(r.calls) for r in self.rounds if r.index > 0)

    @property
    def model_rounds(self) -> int:
        return sum(1 for r in self.rounds if r.index > 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "support": self.support,
            "confidence": self.confidence,
            "stop_reason": self.stop_reason,
            "rounds": self.model_rounds,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "model": self.model,
            "evidence": self.evidence,
            "trace": [asdict(r) for r in self.rounds],
        }


# -- running calls ---------------------------------------------------------------------


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
        ids = [t for t in ids if t in toolkit._visible(store, ids, toolkit._time(as_of, "as_of"), scope)]
    return True, compact(result), ids


# -- the loop --------------------------------------------------------------------------


def _parse(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def _round_message(r: Round, full: bool) -> str:
    if not full:
        got = ", ".join(f"{c.tool}{'' if c.ok else ' (error)'}" for c in r.calls) or "no calls"
        return f"Round {r.index} (shortened): {got}; new turns {r.evidence_added or 'none'}."
    lines = [f"Round {r.index} results:"]
    for c in r.calls:
        lines.append(f"{c.tool}({json.dumps(c.args, ensure_ascii=False)}) -> {c.result}")
    if r.error:
        lines.append(f"error: {r.error}")
    if not r.calls and not r.error:
        lines.append("no calls were made")
    return "\n".join(lines)


def navigate_messages(
    question: str, rounds: list[Round], max_calls: int, max_prompt_tokens: int, now: str | None = None
) -> list[dict[str, str]]:
    """The Navigate prompt: the question, then each round's results, the oldest
    shortened to one line each until the whole fits ``max_prompt_tokens``."""
    system = NAVIGATE_PROMPT.format(tools=tool_list(), max_calls=max_calls)
    when = f"Question time: {now}\n" if now else ""
    head = f"{when}Question: {question}"
    full = [True] * len(rounds)

    def build() -> list[dict[str, str]]:
        body = [head] + [_round_message(r, f) for r, f in zip(rounds, full, strict=True)]
        body.append("Reply with your next thought, done, and calls.")
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n\n".join(body)}]

    msgs = build()
    for i in range(len(rounds) - 1):  # the newest round always stays whole
        if prompt_size(msgs) <= max_prompt_tokens:
            break
        full[i] = False
        msgs = build()
    return msgs


def prompt_size(messages: list[dict[str, str]]) -> int:
    return sum(count_tokens(m["content"]) + 4 for m in messages)


def evidence_text(store: Store, turn_ids: list[int], budget: int) -> tuple[str, list[int]]:
    """The evidence turns (first found first, until ``budget``), shown in time order."""
    refs = toolkit.turn_refs(store, turn_ids)
    shown: list[toolkit.TurnRef] = []
    used = 0
    for tid in turn_ids:
        ref = refs.get(tid)
        if ref is None:
            continue
        line = f"[{ref.turn_id}] {ref.timestamp or 'undated'} {ref.speaker}: {ref.text}"
        cost = count_tokens(line)
        if used + cost > budget:
            continue
        used += cost
        shown.append(ref)
    shown.sort(key=lambda r: (r.timestamp or "", r.turn_id))
    lines = [f"[{r.turn_id}] {r.timestamp or 'undated'} ({r.session}) {r.speaker}: {r.text}" for r in shown]
    return "\n".join(lines), [r.turn_id for r in shown]


def explore(
    store: Store,
    generator: Generator,
    query: str,
    *,
    max_rounds: int = MAX_ROUNDS,
    max_calls: int = MAX_CALLS,
    max_tokens: int = MAX_TOKENS,
    max_prompt_tokens: int = MAX_PROMPT_TOKENS,
    evidence_tokens: int = EVIDENCE_TOKENS,
    as_of: str | None = None,
    scope: str | None = None,
    seed: bool = True,
    temperature: float = 0.0,
) -> Exploration:
    """Answer ``query`` by letting ``generator`` explore the memory; see the module doc."""
    if not isinstance(query, str) or not query.strip():
        raise InputError("the question must be a non-empty string")
    for name, v in (("max_rounds", max_rounds), ("max_calls", max_calls), ("max_tokens", max_tokens)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "max_rounds" else 1):
            raise InputError(f"{name} must be a positive integer; got {v!r}")
    rounds: list[Round] = []
    evidence: list[int] = []
    seen_calls: set[str] = set()
    spent_prompt = spent_gen = 0
    stop = "max_rounds"

    def execute(index: int, raw_calls: list[Any]) -> list[Call]:
        calls: list[Call] = []
        for raw in raw_calls:
            name = raw.get("tool") if isinstance(raw, dict) else None
            args = raw.get("args") if isinstance(raw, dict) else None
            args = args if isinstance(args, dict) else ({} if args is None else {"?": args})
            if len(calls) >= max_calls:
                calls.append(Call(str(name), args, False, f"error: skipped, at most {max_calls} calls per round"))
                continue
            if not isinstance(raw, dict):
                calls.append(Call("?", {}, False, 'error: a call must be {"tool": name, "args": {...}}'))
                continue
            key = json.dumps([name, args], sort_keys=True, default=str)
            if key in seen_calls:
                calls.append(Call(str(name), args, False, "error: repeated call; its result is above"))
                continue
            seen_calls.add(key)
            ok, text, ids = run_call(store, name, args, as_of=as_of, scope=scope)
            new = [t for t in ids if t not in evidence]
            evidence.extend(new)
            calls.append(Call(str(name), args, ok, text, ids, new))
        return calls

    if seed:
        before = len(evidence)
        calls = execute(0, [{"tool": "search_cues", "args": {"text": query.strip()[:120]}}])
        rounds.append(Round(0, "seed: the question's cues", False, calls, evidence[before:]))

    schema = navigate_schema(max_calls)
    for index in range(1, max_rounds + 1):
        msgs = navigate_messages(query, rounds, max_calls, max_prompt_tokens, as_of)
        need = prompt_size(msgs) + NAVIGATE_TOKENS + _answer_cost(evidence_tokens)
        if spent_prompt + spent_gen + need > max_tokens:
            stop = "max_tokens"
            break
        try:
            out = generator.generate_json(msgs, schema, max_tokens=NAVIGATE_TOKENS, temperature=temperature)
        except ModelError as exc:
            rounds.append(Round(index, "", False, [], [], error=f"model failed: {exc}"))
            stop = "model_error"
            break
        spent_prompt += out.prompt_tokens
        spent_gen += out.generated_tokens
        data = _parse(out.text)
        if data is None:
            rounds.append(
                Round(index, "", False, [], [], out.prompt_tokens, out.generated_tokens, "reply was not a JSON object")
            )
            continue
        raw_calls = data.get("calls")
        if raw_calls is None:
            raw_calls = []
        err = ""
        if not isinstance(raw_calls, list):
            raw_calls, err = [], "calls must be a list"
        done = data.get("done") is True
        before = len(evidence)
        calls = [] if done else execute(index, raw_calls)
        thought = str(data.get("thought", ""))[:300]
        rounds.append(
            Round(index, thought, done, calls, evidence[before:], out.prompt_tokens, out.generated_tokens, err)
        )
        if done:
            stop = "done"
            break
        if not raw_calls and not err:
            stop = "stalled"  # neither done nor a call: nothing more will change
            break

    answer, support, confidence = "I don't know.", [], 0.0
    shown_text, shown = evidence_text(store, evidence, evidence_tokens)
    msgs = answer_messages(query, shown_text, as_of)
    if spent_prompt + spent_gen + prompt_size(msgs) + ANSWER_TOKENS <= max_tokens or not spent_prompt:
        try:
            out = generator.generate_json(msgs, ANSWER_SCHEMA, max_tokens=ANSWER_TOKENS, temperature=temperature)
            spent_prompt += out.prompt_tokens
            spent_gen += out.generated_tokens
            data = _parse(out.text) or {}
            answer = str(data.get("answer", "")).strip() or answer
            raw = data.get("support")
            ids = (
                [int(x) for x in raw if isinstance(x, int) and not isinstance(x, bool)] if isinstance(raw, list) else []
            )
            support = [t for t in dict.fromkeys(ids) if t in shown]  # only turns it was shown
            c = data.get("confidence")
            confidence = min(1.0, max(0.0, float(c))) if isinstance(c, int | float) and not isinstance(c, bool) else 0.0
        except ModelError as exc:
            answer, stop = f"I don't know (the model failed: {exc}).", "model_error"
    else:
        stop = "max_tokens"
    return Exploration(
        query, answer, support, confidence, rounds, evidence, stop, spent_prompt, spent_gen, generator.model_id
    )


def _answer_cost(evidence_tokens: int) -> int:
    return evidence_tokens + count_tokens(ANSWER_PROMPT) + ANSWER_TOKENS + 100


def answer_messages(question: str, evidence: str, now: str | None = None) -> list[dict[str, str]]:
    when = f"Question time: {now}\n" if now else ""
    return [
        {"role": "system", "content": ANSWER_PROMPT},
        {"role": "user", "content": f"Evidence turns:\n{evidence or '(none found)'}\n\n{when}Question: {question}"},
    ]
