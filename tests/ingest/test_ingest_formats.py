"""Every chat-log format from small fixture exports (tests/data/ingest, built by hand
from the public descriptions of each format), detection, and the streaming reader."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from localmem.errors import InputError
from localmem.ingest import FORMAT_NAMES, FORMATS, Cursor, _json, detect, load, units
from localmem.records import SessionIn

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"


def turns_of(sessions: list[SessionIn]) -> list[tuple[str | None, str, str]]:
    return [(t.source_id, t.role, t.text) for s in sessions for t in s.turns]


def test_format_names_match_the_registry() -> None:
    assert tuple(FORMATS) == FORMAT_NAMES


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("chatgpt_conversations.json", "chatgpt"),
        ("claude_conversations.json", "claude"),
        ("messages.jsonl", "messages"),
        ("messages_bare.json", "messages"),
        ("transcript.md", "transcript"),
        ("transcript.txt", "transcript"),
    ],
)
def test_detection(name: str, fmt: str) -> None:
    assert detect(DATA / name) == fmt


def test_chatgpt_follows_the_current_branch_and_skips_hidden_messages() -> None:
    sessions = load(DATA / "chatgpt_conversations.json")
    assert [(s.source, s.key, s.title) for s in sessions] == [
        ("chatgpt", "c-porto-1", "Porto trip"),
        ("chatgpt", "c-knee-2", "Knee pain"),
    ]
    trip = sessions[0]
    assert trip.started_at == "2024-05-01T08:00:00"  # epoch 1714550400.123
    assert [t.source_id for t in trip.turns] == ["u1", "a1b", "u2", "a3"]  # a1 is a regenerated-away branch
    assert trip.turns[2].text == "Here is the map of my hotel area.\n[image]"
    assert trip.turns[0].timestamp == "2024-05-01T08:01:00"
    assert all("Lisbon" not in t.text for t in trip.turns)
    knee = sessions[1]
    assert turns_of([knee]) == [
        ("k1", "user", "My left knee hurts after long runs.\n[attachment: training-plan.pdf]"),
        ("k2", "assistant", "Try reducing your weekly mileage and see a physiotherapist."),
    ]
    skipped: Counter[str] = Counter()
    for u in units(DATA / "chatgpt_conversations.json", "chatgpt"):
        skipped.update(u.skipped)
    assert skipped == {
        "not on the current branch": 1,
        "system message": 1,
        "thoughts content": 1,
        "tool call": 1,
        "tool message": 1,
        "hidden message": 1,
        "empty message": 1,
    }


def test_claude_text_blocks_attachments_and_old_style_text() -> None:
    sessions = load(DATA / "claude_conversations.json")
    assert [(s.source, s.key, s.title, s.started_at) for s in sessions] == [
        ("claude", "cl-1", "Sourdough starter", "2024-07-01T08:00:00"),
        ("claude", "cl-2", "Old export style", "2024-08-02T10:00:00"),
    ]
    assert turns_of(sessions) == [
        ("m1", "user", "My sourdough starter smells like nail polish. Is it dead?\n\n[attachment: starter.txt]"),
        ("m2", "assistant", "Not dead: an acetone smell means it is hungry.\n\nFeed it twice a day for a few days."),
        ("n1", "user", "Remind me: my sister's birthday is on 12 September.\n\n[file: party-photo.jpg]"),
        ("n2", "assistant", "Noted: your sister's birthday is on 12 September."),
    ]
    assert sessions[0].turns[0].timestamp == "2024-07-01T08:00:05"


def test_openai_messages_jsonl_and_bare_json() -> None:
    sessions = load(DATA / "messages.jsonl")
    # a conversation without an id is keyed by its content (first message and time)
    unnamed = sessions[1].key
    assert [s.key for s in sessions] == ["ft-1", unnamed] and unnamed.startswith("conv-")
    assert turns_of(sessions) == [
        ("ft-1:1", "user", "What is the capital of Australia?"),
        ("ft-1:2", "assistant", "Canberra."),
        (f"{unnamed}:1", "user", "What breed is this dog?\n[image_url]"),
        (f"{unnamed}:4", "assistant", "It looks like a beagle."),
    ]
    assert sessions[1].turns[1].timestamp == "2024-09-01T12:00:05"
    bare = load(DATA / "messages_bare.json")
    assert len(bare) == 1 and bare[0].source == "messages" and bare[0].key.startswith("conv-")
    assert [t.role for t in bare[0].turns] == ["user", "assistant"]


def test_markdown_and_plain_text_transcripts() -> None:
    md = load(DATA / "transcript.md")
    assert [(s.key, s.started_at) for s in md] == [
        ("2024-05-01", "2024-05-01T00:00:00"),
        ("Session 2 — 8 May, 2024", "2024-05-08T00:00:00"),
    ]
    first = md[0].turns
    assert [(t.speaker, t.role) for t in first] == [("Maya", "user"), ("Assistant", "assistant")]
    assert first[0].text == "I signed up for the Lisbon half marathon.\nIt is on October 6."
    assert [t.timestamp for t in md[1].turns] == ["2024-05-08T09:15:00", "2024-05-08T09:16:00"]  # System: skipped
    txt = load(DATA / "transcript.txt")
    assert [s.key for s in txt] == ["2024-06-01", "2024-06-02"]
    assert [t.role for t in txt[0].turns] == ["user", "assistant"]


@pytest.mark.parametrize(
    ("content", "fmt", "where"),
    [
        ('[{"conversation_id": "c", "mapping": {}, "current_node": "x"}]', "chatgpt", "$[0].current_node"),
        (
            '[{"id": "c", "current_node": "a", "mapping": {"a": {"parent": "b", "message": null},'
            ' "b": {"parent": "a", "message": null}}}]',
            "chatgpt",
            "$[0].mapping",
        ),
        ('[{"uuid": "c", "chat_messages": [{"text": "hi"}]}]', "claude", "$[0].chat_messages[0]"),
        (
            '[{"uuid": "c", "chat_messages": [{"sender": "human", "text": "hi", "created_at": "soon"}]}]',
            "claude",
            "$[0].chat_messages[0].created_at",
        ),
        ('{"messages": [{"role": "user", "content": "a"}]}\n{"messages": 3}\n', "messages", "line 2"),
        ('{"messages": [{"content": "a"}]}\n', "messages", "line 1.messages[0]"),
        ('[{"uuid": "c", "chat_messages": []}, {"uuid": "d", "chat_messages": [}]', "claude", "line 1 column"),
        ("## 2024-05-01\n[99:99] Ann: hi\n", "transcript", "line 2"),
        ("Ann: hi\n\xff\xfe\n", "transcript", "line 2"),
    ],
)
def test_bad_input_names_the_file_and_the_location(tmp_path: Path, content: str, fmt: str, where: str) -> None:
    p = tmp_path / "bad.txt"
    p.write_bytes(content.encode("latin-1") if "\xff" in content else content.encode("utf-8"))
    with pytest.raises(InputError) as err:
        load(p, fmt)
    assert str(p) in str(err.value) and where in str(err.value), str(err.value)


def test_detection_refuses_what_it_cannot_tell(tmp_path: Path) -> None:
    for name, content in [
        ("x.json", "[]"),
        ("y.json", '[{"foo": 1}]'),
        ("z.bin", "\x00\x01binary"),
        ("w.md", "notes only"),
    ]:
        p = tmp_path / name
        p.write_text(content, "utf-8")
        with pytest.raises(InputError):
            detect(p)


def test_options_are_checked(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no option sample"):
        load(DATA / "claude_conversations.json", "claude", sample="x")


# -- the streaming reader -------------------------------------------------------------


def array_file(tmp_path: Path, items: list[Any], indent: int | None = None) -> Path:
    p = tmp_path / "a.json"
    p.write_text(json.dumps(items, indent=indent, ensure_ascii=False), "utf-8")
    return p


@pytest.mark.parametrize("indent", [None, 2])
def test_array_reader_matches_json_loads_with_tiny_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indent: int | None
) -> None:
    monkeypatch.setattr(_json, "CHUNK", 7)  # every element spans several reads
    items: list[Any] = [
        {"a": "héllo wörld ✓ 🎉", "n": [1, 2.5, -3e2], "t": True},
        12345678901234567890,
        'a string with \\"escapes\\" and \\u00e9',
        None,
        {"nested": {"deep": [[], {}, [{"x": "y" * 50}]]}},
    ]
    p = array_file(tmp_path, items, indent)
    recs = list(_json.records(p))
    assert [r.value for r in recs] == items
    assert [r.where for r in recs] == [f"$[{i}]" for i in range(len(items))]
    raw = p.read_bytes()
    for i, r in enumerate(recs):  # resuming after any element yields exactly the rest
        rest = list(_json.records(p, r.after))
        assert [x.value for x in rest] == items[i + 1 :]
        assert raw[r.after.offset :].lstrip().startswith(b"," if i + 1 < len(items) else b"]")


def test_array_reader_locates_syntax_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_json, "CHUNK", 5)
    p = tmp_path / "bad.json"
    p.write_text('[\n {"a": 1},\n {"b": 2,, "c": 3}\n]', "utf-8")
    with pytest.raises(InputError, match=r"line 3 column 10.*\$\[1\]"):
        list(_json.records(p))
    p.write_text('[{"a": 1}] trailing', "utf-8")
    with pytest.raises(InputError, match="extra data"):
        list(_json.records(p))
    p.write_text('[{"a": 1}, {"b": "unterminated', "utf-8")
    with pytest.raises(InputError, match="Unterminated string"):
        list(_json.records(p))


def test_json_lines_resume_after_a_line_and_before_an_unfinished_one(tmp_path: Path) -> None:
    p = tmp_path / "x.jsonl"
    p.write_text('{"text": "one"}\n\n{"text": "two"}\n{"text": "thr', "utf-8")
    recs = list(_json.records(p))
    assert [r.where for r in recs] == ["line 1", "line 3", "line 4"]
    assert recs[2].error is not None  # the unfinished last line
    assert recs[1].after == Cursor(offset=33, index=3, line=4)
    assert recs[2].after == recs[1].after  # resume before the unfinished line
    with p.open("a", encoding="utf-8") as fh:
        fh.write('ee"}\n')
    assert [r.value for r in _json.records(p, recs[1].after)] == [{"text": "three"}]
