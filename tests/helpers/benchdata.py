"""Small benchmark documents in the LoCoMo and LongMemEval formats: one conversation
(``locomo_doc``), one question's haystack (``lme_doc``) and three haystacks that share a
session (``merged_items``)."""

from __future__ import annotations

from typing import Any


def locomo_doc() -> list[dict[str, Any]]:
    return [
        {
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Rex."},
                    {
                        "speaker": "Bo",
                        "dia_id": "D1:2",
                        "text": "Cute! Look at this.",
                        "blip_caption": "a photo of a dog on a sofa",
                    },
                ],
                "session_2_date_time": "10:00 am on 1 June, 2023",
                "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Rex learned to sit."}],
                "session_3_date_time": "9:00 am on 2 June, 2023",
            },
            "qa": [],
        }
    ]


def lme_doc() -> list[dict[str, Any]]:
    return [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "What is my dog's name?",
            "answer": "Rex",
            "question_date": "2023/06/10 (Sat) 10:00",
            "haystack_session_ids": ["sB", "sA"],
            "haystack_dates": ["2023/06/02 (Fri) 09:00", "2023/05/30 (Tue) 23:40"],
            "haystack_sessions": [
                [
                    {"role": "user", "content": "My dog Rex is two.", "has_answer": True},
                    {"role": "assistant", "content": "Nice."},
                ],
                [{"role": "user", "content": "Hello there."}],
            ],
            "answer_session_ids": ["sB"],
        },
        {
            "question_id": "q2",
            "question_type": "multi-session",
            "question": "?",
            "answer": "x",
            "question_date": "2023/06/10 (Sat) 10:00",
            "haystack_session_ids": ["sC"],
            "haystack_dates": ["2023/06/01 (Thu) 09:00"],
            "haystack_sessions": [[{"role": "user", "content": "Other haystack."}]],
            "answer_session_ids": [],
        },
    ]


def merged_items() -> list[dict[str, object]]:
    """Two haystacks that share session "shared" (B's copy dated later and listed first),
    and a third whose evidence is dated after its question."""

    def turn(text: str, answer: bool = False) -> dict[str, object]:
        return {"role": "user", "content": text, **({"has_answer": True} if answer else {})}

    shared_b = [turn("I keep bees on the roof of my flat."), turn("They make honey in June.")]
    shared_a = [turn("I keep bees on the roof of my flat.", True), turn("They make honey in June.")]
    return [
        {
            "question_id": "qb",
            "question_type": "temporal-reasoning",
            "question": "What colour did I paint the fence?",
            "question_date": "2023/06/10 (Sat) 12:00",
            "haystack_session_ids": ["shared", "b-ev"],
            "haystack_dates": ["2023/06/05 (Mon) 09:00", "2023/06/01 (Thu) 09:00"],
            "haystack_sessions": [shared_b, [turn("I painted the fence green last weekend.", True)]],
        },
        {
            "question_id": "qa",
            "question_type": "single-session-user",
            "question": "Where do I keep bees?",
            "question_date": "2023/05/15 (Mon) 12:00",
            # "a-only" twice (same content, two dates), as three dev60 haystacks repeat one.
            "haystack_session_ids": ["shared", "a-only", "a-only"],
            "haystack_dates": ["2023/05/01 (Mon) 09:00", "2023/05/10 (Wed) 09:00", "2023/05/12 (Fri) 09:00"],
            "haystack_sessions": [
                shared_a,
                [turn("The weather was grey all week.")],
                [turn("The weather was grey all week.")],
            ],
        },
        {
            "question_id": "qc",
            "question_type": "knowledge-update",
            "question": "Which violin teacher did I pick?",
            "question_date": "2023/07/01 (Sat) 12:00",
            "haystack_session_ids": ["c-late"],
            "haystack_dates": ["2023/07/02 (Sun) 09:00"],
            "haystack_sessions": [[turn("I picked the violin teacher called Mira.", True)]],
        },
    ]
