"""Answer a question from memory: reconstruct the context, then the local model answers.

The model is told to prefer the most recent evidence closest to the question time when
statements disagree (CueMem 5.3's priority instruction) and to say it does not know
when the context does not hold the answer. One model call, JSON-schema constrained;
the reconstructed turns are returned with the answer, so every answer is cited.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from localmem.models.llm import Generator, embedded_model_warning
from localmem.models.replies import CallRecord, ReplyError, parse_reply, record
from localmem.records import Context
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.layers import calls
from localmem.storage.write.store import Store

MAX_ANSWER_TOKENS = 200
SYSTEM_PROMPT = """You answer questions about past conversations using only the memory excerpts given.
The excerpts are in time order, grouped by session with its date. When excerpts disagree, trust the most
recent one closest to the question time. Resolve relative dates ("yesterday", "last week") from the date
of the session they were said in. If the excerpts do not contain the answer, say that you do not know.
Answer in one or two short sentences."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "maxLength": 600}},
    "required": ["answer"],
}


@dataclass(frozen=True)
class Answer:
    question: str
    answer: str
    context: Context
    model: str
    # set when the embedded 135M test model answered: says so and how to use a real one
    warning: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "answer": self.answer,
            "model": self.model,
            "warning": self.warning,
            "context_tokens": self.context.tokens,
            "turns": [
                {"turn_id": t.turn_id, "session": t.session, "timestamp": t.timestamp, "reason": t.reason}
                for t in self.context.turns
            ],
        }


def messages(question: str, ctx: Context, now: str | None = None) -> list[dict[str, str]]:
    when = f"Question time: {now}\n" if now else ""
    memory = ctx.text or "(no memories found)"
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"Memory excerpts:\n{memory}\n\n{when}Question: {question}"},
    ]


def answer(
    store: Store,
    gen: Generator,
    question: str,
    *,
    budget_tokens: int | None = None,
    as_of: str | None = None,
    scope: str | None = None,
) -> Answer:
    """Reconstruct the context for ``question`` and let ``gen`` answer from it."""
    ctx = reconstruct(store, question, budget_tokens, as_of=as_of, scope=scope)
    records: list[CallRecord] = []
    try:
        return answer_from(gen, question, ctx, as_of=as_of, records=records)
    finally:
        calls.log(store.conn, records, best_effort=True)


def answer_from(
    gen: Generator, question: str, ctx: Context, *, as_of: str | None = None, records: list[CallRecord] | None = None
) -> Answer:
    """``gen``'s answer from an already reconstructed ``ctx``. No store access: a caller
    that serialises store use (the MCP server) runs this outside its store lock, and
    writes the call's record (appended to ``records``) to the call log under it."""
    msgs = messages(question, ctx, as_of)
    out = gen.generate_json(msgs, SCHEMA, max_tokens=MAX_ANSWER_TOKENS, temperature=0.0)
    try:
        text, status = str(parse_reply(out.text, SCHEMA)["answer"]).strip(), "ok"
    except ReplyError as exc:  # prose instead of JSON is still an answer; the log counts it
        text, status = (out.text.strip() if exc.reason in ("not JSON", "truncated") else ""), exc.reason
    if records is not None:
        records.append(
            record("answer", gen.model_id, msgs, out.text, status, (out.prompt_tokens, out.generated_tokens))
        )
    return Answer(question, text or "I don't know.", ctx, gen.model_id, embedded_model_warning(gen.model_id))
