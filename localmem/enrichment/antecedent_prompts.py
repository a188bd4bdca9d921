"""CABLE's prompts and output schemas: antecedent queries per memory type, link verdicts.

The query prompts ask for searches that would find what came BEFORE a memory and
explains it (what led up to an event, what formed an opinion, what motivates a plan,
what a state changed from), not for searches about the memory's own topic: the direct
search already covers the topic. The generic prompt (``--generic-queries``) asks for
plain topical searches, for the ablation. The verifier judges several earlier turns
against one new turn per call; each verdict is keyed by the candidate's label, so a
schema-constrained model cannot skip or reorder one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from localmem.util.text import display_time

FOCUS = {
    "event": (
        "Something happened. Search for what came before it: events or circumstances that led up to it, "
        "plans or wishes it fulfilled, earlier experiences of the same kind."
    ),
    "opinion": (
        "Someone stated a view or preference. Search for what formed it: experiences behind it, what they "
        "said before on the subject, their personal history with it."
    ),
    "plan": (
        "Someone stated an intention. Search for why: the motive or need behind it, earlier experiences "
        "that prompted it, goals or interests they mentioned before."
    ),
    "state_change": (
        "Something changed (status, health, job, home, relationship). Search for the state before the "
        "change, what triggered it, and earlier steps toward it."
    ),
}
FALLBACK = (
    "Search for earlier memories that explain this one: causes, motivations, background, or an earlier "
    "state of the same thing."
)
GENERIC = "Break this memory into short search queries about its topics."

QUERY_SYSTEM = """You write search queries over a person's past conversations.
Reply with JSON: {"queries": [...]}, each query 2 to 8 words.
Use only what the memory says or clearly implies; never invent names, places or facts."""

VERIFY_SYSTEM = """You decide whether EARLIER conversation turns help to understand a CURRENT turn.
An earlier turn is a valid link when it is: a cause (even a distant one), background that explains why
the current turn happened, an earlier state of something that changed, a goal or value that motivates it,
or evidence needed together with it to answer a question about it. Similar wording is NOT required.
Not valid: same topic only, same name or thing mentioned only, different people who never interact,
coincidence, or either turn being a greeting, thanks, filler or a question with no information.
For each earlier turn reply with "valid" (true/false), "confidence" (0 to 1) and "reason" (one short sentence)."""


def query_messages(
    text: str, speaker: str, persons: Sequence[str], memory_type: str | None, nq: int, generic: bool
) -> list[dict[str, str]]:
    task = GENERIC if generic else FOCUS.get(memory_type or "", FALLBACK)
    who = ", ".join(persons) or "unknown"
    memory = f"{speaker}: {text}" if speaker else text
    user = f"{task}\nPeople in the conversation: {who}\nMemory: {memory}\nWrite at most {nq} queries."
    return [{"role": "system", "content": QUERY_SYSTEM}, {"role": "user", "content": user}]


def query_schema(nq: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "queries": {
                "type": "array",
                "items": {"type": "string", "maxLength": 80},
                "minItems": 1,
                "maxItems": nq,
            }
        },
        "required": ["queries"],
    }


def line(speaker: str, text: str, ts: str | None) -> str:
    who = f"{speaker}: " if speaker else ""
    return f"({display_time(ts)}) {who}{text}"


def verify_messages(current: str, earlier: Sequence[str]) -> list[dict[str, str]]:
    """``current`` and ``earlier`` are rendered with ``line``; labels are h1, h2, ..."""
    listing = "\n".join(f"h{i}. {t}" for i, t in enumerate(earlier, start=1))
    user = f"CURRENT turn:\n{current}\n\nEARLIER turns:\n{listing}\n\nGive a verdict for each of h1..h{len(earlier)}."
    return [{"role": "system", "content": VERIFY_SYSTEM}, {"role": "user", "content": user}]


def verify_schema(n: int) -> dict[str, Any]:
    verdict = {
        "type": "object",
        "properties": {
            "valid": {"type": "boolean"},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "reason": {"type": "string", "maxLength": 160},
        },
        "required": ["valid", "confidence", "reason"],
    }
    keys = [f"h{i}" for i in range(1, n + 1)]
    return {"type": "object", "properties": {k: verdict for k in keys}, "required": keys}
