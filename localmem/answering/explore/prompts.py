"""The prompts and JSON schemas of the two model calls, and the messages built from them.

- **Navigate**: :data:`NAVIGATE_PROMPT` lists the tools; :func:`navigate_schema` types
  each call per tool; :func:`navigate_messages` holds the question and every round's
  results, the oldest shortened to one line until the whole fits a token budget.
- **Answer**: :data:`ANSWER_PROMPT` and :data:`ANSWER_SCHEMA`; :func:`evidence_text`
  shows the evidence turns within a token budget, in time order.

Invariants:
- each prompt sits next to its schema; both name only tools in ``TOOLS`` and their
  own argument names, so a constrained decoder cannot write an unknown tool;
- the newest round's results are always shown whole.
"""

from __future__ import annotations

import json
from typing import Any

from localmem import toolkit
from localmem.answering.explore.tools import TOOLS, Param
from localmem.answering.explore.trace import Round
from localmem.storage.write.store import Store
from localmem.util.text import count_tokens


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


def answer_messages(question: str, evidence: str, now: str | None = None) -> list[dict[str, str]]:
    when = f"Question time: {now}\n" if now else ""
    return [
        {"role": "system", "content": ANSWER_PROMPT},
        {"role": "user", "content": f"Evidence turns:\n{evidence or '(none found)'}\n\n{when}Question: {question}"},
    ]
