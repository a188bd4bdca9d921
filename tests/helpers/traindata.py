"""A tiny LongMemEval-shaped training file for the training tests: three questions over
four sessions, one of whose texts (``SHARED``) another file also holds."""

from __future__ import annotations

from typing import Any

DATE = "2023/05/20 (Sat) 10:00"


def item(qid: str, qtype: str, question: str, sessions: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": question,
        "question_date": "2023/05/30 (Tue) 10:00",
        "answer": "x",
        "answer_session_ids": [sid for sid, turns in sessions.items() if any(t.get("has_answer") for t in turns)],
        "haystack_session_ids": list(sessions),
        "haystack_dates": [DATE] * len(sessions),
        "haystack_sessions": list(sessions.values()),
    }


def u(text: str, answer: bool = False) -> dict[str, Any]:
    return {"role": "user", "content": text, **({"has_answer": True} if answer else {})}


def a(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


DOG = "I adopted a golden retriever last spring. His name is Max and he loves the beach."
SHARED = "Filler chat about the weather that both files hold, word for word."
ITEMS = [
    item(
        "q1",
        "single-session-user",
        "What breed is my dog?",
        {
            "s1": [
                u(DOG, answer=True),
                a("What's your favourite thing to do with Max?"),
                u("We walk along the river every morning before work."),
            ],
            "s2": [u("Can you suggest a recipe for a quick dinner with lentils?"), a("Sure. Try a lentil curry.")],
        },
    ),
    item(
        "q2",
        "multi-session",
        "Where did I move?",
        {"s3": [u("I moved to Lisbon in May with my partner.", answer=True)], "s2": []},
    ),
    item("q3", "single-session-user", "What did I buy?", {"s4": [u(SHARED, answer=True)]}),
]
