"""The active loop: Navigate rounds until the model is done or a bound is hit, then Answer.

See :mod:`localmem.answering.explore` for the method. This module owns the bounds and the order
of model calls; the tools live in :mod:`~localmem.answering.explore.tools`, the prompts and
schemas in :mod:`~localmem.answering.explore.prompts`, the trace in :mod:`~localmem.answering.explore.trace`.

Invariants:
- at most ``max_rounds`` Navigate rounds and ``max_calls`` calls per round; a repeated
  call is refused, not run again;
- ``max_tokens`` caps prompt + generated tokens over every model call of one question:
  a round is only started when it and the Answer call after it still fit;
- a model failure or an unusable reply ends up in the trace, never as an exception;
  the answer's support only names turns the Answer call was shown.
"""

from __future__ import annotations

import json
from typing import Any

from localmem.answering.explore.prompts import (
    ANSWER_PROMPT,
    ANSWER_SCHEMA,
    answer_messages,
    evidence_text,
    navigate_messages,
    navigate_schema,
    prompt_size,
)
from localmem.answering.explore.tools import run_call
from localmem.answering.explore.trace import Call, Exploration, Round
from localmem.errors import InputError, ModelError
from localmem.models.llm import Generation, Generator
from localmem.models.replies import CallRecord, ReplyError, parse_reply, record
from localmem.storage.layers import calls as call_log
from localmem.storage.write.store import Store
from localmem.util.text import count_tokens

MAX_ROUNDS = 8
MAX_CALLS = 10
MAX_TOKENS = 40_000
MAX_PROMPT_TOKENS = 3_000
NAVIGATE_TOKENS = 400  # generated tokens of one Navigate reply
ANSWER_TOKENS = 250
EVIDENCE_TOKENS = 1_500  # evidence shown to the Answer call


def _parse(
    text: str, msgs: list[dict[str, str]], out: Generation, model: str, records: list[CallRecord]
) -> dict[str, Any] | None:
    """The reply's object (its fields are checked by the loop, leniently), recorded."""
    try:
        data, status = parse_reply(text), "ok"
    except ReplyError as exc:
        data, status = None, exc.reason
    records.append(record("explore", model, msgs, text, status, (out.prompt_tokens, out.generated_tokens)))
    return data


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
    records: list[CallRecord] = []  # every model call, for the call log

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
        data = _parse(out.text, msgs, out, generator.model_id, records)
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
            data = _parse(out.text, msgs, out, generator.model_id, records) or {}
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
    call_log.log(store.conn, records, best_effort=True)
    return Exploration(
        query, answer, support, confidence, rounds, evidence, stop, spent_prompt, spent_gen, generator.model_id
    )


def _answer_cost(evidence_tokens: int) -> int:
    return evidence_tokens + count_tokens(ANSWER_PROMPT) + ANSWER_TOKENS + 100
