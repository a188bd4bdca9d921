from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from localmem.errors import InputError
from localmem.ingest import detect, load
from localmem.storage.write.store import Store
from tests.helpers.benchdata import lme_doc, locomo_doc


def write(tmp_path: Path, name: str, obj: Any) -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(obj) if not isinstance(obj, str) else obj, "utf-8")
    return p


def test_locomo(tmp_path: Path) -> None:
    p = write(tmp_path, "lo.json", locomo_doc())
    assert detect(p) == "locomo"
    sessions = load(p)
    assert [s.key for s in sessions] == ["session_1", "session_2"]  # date key without session ignored
    s1 = sessions[0]
    assert s1.source == "locomo:conv-x" and s1.started_at == "2023-05-08T13:56:00"
    assert [t.source_id for t in s1.turns] == ["D1:1", "D1:2"]
    assert s1.turns[1].text == "Cute! Look at this. [image: a photo of a dog on a sofa]"


def test_longmemeval_one_haystack_per_question(tmp_path: Path) -> None:
    p = write(tmp_path, "lme.json", lme_doc())
    assert detect(p) == "longmemeval"
    sessions = load(p, question="q1")
    assert {s.source for s in sessions} == {"longmemeval:q1"}
    assert [t.source_id for t in sessions[0].turns] == ["sB:0", "sB:1"]
    assert sessions[0].started_at == "2023-06-02T09:00:00"
    assert len(load(p)) == 3
    with pytest.raises(InputError, match="no question"):
        load(p, question="nope")


def test_jsonl(tmp_path: Path) -> None:
    lines = [
        {"session": "a", "speaker": "Ann", "text": "hello", "timestamp": "2024-01-01T10:00:00"},
        {"session": "b", "role": "assistant", "content": "hi", "id": 7},
        {"session": "a", "role": "user", "text": "bye", "timestamp": 1704103200},
    ]
    p = write(tmp_path, "x.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    assert detect(p) == "jsonl"
    sessions = {s.key: s for s in load(p)}
    assert [t.text for t in sessions["a"].turns] == ["hello", "bye"]
    assert sessions["b"].turns[0].speaker == "assistant" and sessions["b"].turns[0].source_id == "7"


@pytest.mark.parametrize(
    ("name", "content", "fmt", "where"),
    [
        ("bad.json", '[{"sample_id": 1, ', "locomo", "line 1"),
        (
            "bad2.json",
            json.dumps(
                [
                    {
                        "sample_id": "c",
                        "conversation": {
                            "session_1": [{"speaker": "A"}],
                            "session_1_date_time": "1:56 pm on 8 May, 2023",
                        },
                    }
                ]
            ),
            "locomo",
            "$[0].conversation.session_1[0]",
        ),
        (
            "bad3.json",
            json.dumps([{"sample_id": "c", "conversation": {"session_1": [], "session_1_date_time": "someday"}}]),
            "locomo",
            "session_1_date_time",
        ),
        ("bad.jsonl", '{"text": "ok"}\n{"text": }\n', "jsonl", "line 2"),
        ("bad2.jsonl", '{"text": "ok"}\n{"speaker": "A"}\n', "jsonl", "line 2"),
        ("bad3.jsonl", '{"text": "ok", "timestamp": "whenever"}\n', "jsonl", "line 1.timestamp"),
        (
            "bad.lme.json",
            json.dumps(
                [{"question_id": "q", "haystack_session_ids": ["a"], "haystack_dates": [], "haystack_sessions": [[]]}]
            ),
            "longmemeval",
            "$[0]",
        ),
    ],
)
def test_malformed_files_name_the_location_and_store_nothing(
    tmp_path: Path, store: Store, name: str, content: str, fmt: str, where: str
) -> None:
    p = write(tmp_path, name, content)
    with pytest.raises(InputError) as err:
        store.write_sessions(load(p, fmt))
    assert str(p) in str(err.value) and where in str(err.value)
    assert store.stats()["turns"] == 0


def test_unknown_format_is_refused(tmp_path: Path) -> None:
    p = write(tmp_path, "x.txt", "just some words")
    with pytest.raises(InputError, match="--format"):
        detect(p)
    with pytest.raises(InputError, match="empty"):
        detect(write(tmp_path, "e.json", ""))
