"""Property-based fuzzing of every parser: random bytes, mutated fixture files and
fixture JSON with random subtrees end in sessions or in ``InputError``, never in any
other exception; whatever a parser returns is written whole, and what it refuses leaves
the store as it was."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from localmem.config import Settings
from localmem.errors import InputError
from localmem.ingest import FORMATS, detect, runner, units
from localmem.storage.write.store import Store
from localmem.util import secrets
from tests.helpers.benchdata import lme_doc, locomo_doc
from tests.helpers.fakes import HashEmbedder, session

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
FIXTURES: dict[str, bytes] = {
    "chatgpt": (DATA / "chatgpt_conversations.json").read_bytes(),
    "claude": (DATA / "claude_conversations.json").read_bytes(),
    "messages": (DATA / "messages.jsonl").read_bytes(),
    "transcript": (DATA / "transcript.md").read_bytes(),
    "jsonl": (Path(__file__).resolve().parents[2] / "localmem" / "data" / "sample_conversation.jsonl").read_bytes()[
        :3000
    ],
    "locomo": json.dumps(locomo_doc()).encode(),
    "longmemeval": json.dumps(lme_doc()).encode(),
    "localmem": "".join(  # what `localmem export` writes
        json.dumps(
            {"localmem": 1, "source": "mcp", "session": "chat-1", "title": "", "started_at": "2024-05-20T10:00:00"}
            | {"id": f"m{i}", "speaker": who, "role": "user", "timestamp": f"2024-05-20T10:0{i}:00", "text": text}
        )
        + "\n"
        for i, (who, text) in enumerate([("Maya", "I signed up for the half marathon."), ("Bot", "When is it?")])
    ).encode(),
}
AGENTS = Path(__file__).resolve().parent / "fixtures"
FIXTURES["claude-code"] = next((AGENTS / "claude-code").glob("*/*.jsonl")).read_bytes()
FIXTURES["codex"] = next((AGENTS / "codex").glob("rollout-2025-10-*.jsonl")).read_bytes()
FIXTURES["gemini"] = next((AGENTS / "gemini" / "chats").glob("*.jsonl")).read_bytes()
VSCODE = AGENTS / "vscode" / "User" / "workspaceStorage"
FIXTURES["vscode"] = next(VSCODE.glob("*/chatSessions/*.jsonl")).read_bytes()  # the log; the .json below
VSCODE_JSON = next(VSCODE.glob("*/chatSessions/*.json")).read_bytes()
FIXTURES["copilot"] = next((AGENTS / "copilot" / "session-state").glob("*/events.jsonl")).read_bytes()
FIXTURES["cursor"] = next((AGENTS / "cursor").glob("*/agent-transcripts/*.jsonl")).read_bytes()
FIXTURES["aider"] = (AGENTS / "aider" / "shop" / ".aider.chat.history.md").read_bytes()
assert set(FIXTURES) == set(FORMATS)

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def consume(path: Path, fmt: str | None) -> None:
    """Read the whole file; only InputError may come out (as an exception or a bad unit)."""
    try:
        name = fmt or detect(path)
        for u in units(path, name):
            assert u.error is None or isinstance(u.error, InputError)
            for s in u.sessions:
                assert s.turns and all(t.text.strip() for t in s.turns)
                for t in s.turns:
                    t.text.encode("utf-8")  # no lone surrogates
    except InputError:
        pass


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)


@st.composite
def mutated(draw: st.DrawFn, original: bytes) -> bytes:
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["delete", "insert", "flip", "truncate", "duplicate"]))
        if op == "delete":
            del data[at : at + draw(st.integers(1, 40))]
        elif op == "insert":
            data[at:at] = draw(
                st.binary(min_size=1, max_size=12) | st.sampled_from([b'"', b",", b"{", b"]", b"\n", b"\\ud800"])
            )
        elif op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[at:]
        else:
            data[at:at] = data[at : at + draw(st.integers(1, 200))]
    return bytes(data)


def paths_of(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += paths_of(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += paths_of(v, (*prefix, i))
    return out


def replaced(doc: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    copy = json.loads(json.dumps(doc))
    target = copy
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return copy


@FUZZ
@given(fmt=st.sampled_from(sorted(FORMATS)) | st.none(), data=st.binary(max_size=300))
def test_random_bytes(tmp_path: Path, fmt: str | None, data: bytes) -> None:
    p = tmp_path / "f.json"
    p.write_bytes(data)
    consume(p, fmt)


@FUZZ
@given(fmt=st.sampled_from(sorted(FORMATS)), data=st.data())
def test_mutated_fixtures(tmp_path: Path, fmt: str, data: st.DataObject) -> None:
    p = tmp_path / "f.json"
    p.write_bytes(data.draw(mutated(FIXTURES[fmt])))
    consume(p, fmt)
    consume(p, None)


@FUZZ
@given(fmt=st.sampled_from(["chatgpt", "claude", "locomo", "longmemeval", "vscode"]), data=st.data())
def test_fixture_json_with_a_random_subtree(tmp_path: Path, fmt: str, data: st.DataObject) -> None:
    doc = json.loads(VSCODE_JSON if fmt == "vscode" else FIXTURES[fmt])
    path = data.draw(st.sampled_from(paths_of(doc)))
    p = tmp_path / "f.json"
    p.write_text(json.dumps(replaced(doc, path, data.draw(json_values))), "utf-8")
    consume(p, fmt)


@FUZZ
@given(fmt=st.sampled_from(["messages", "jsonl"]), lines=st.lists(json_values, max_size=4), data=st.data())
def test_json_lines_of_random_values(tmp_path: Path, fmt: str, lines: list[Any], data: st.DataObject) -> None:
    base = FIXTURES[fmt].decode().splitlines()[:2]
    doc = [json.dumps(v) for v in lines] + base
    p = tmp_path / "f.jsonl"
    p.write_text("\n".join(data.draw(st.permutations(doc))) + "\n", "utf-8")
    consume(p, fmt)


@FUZZ
@given(text=st.text(alphabet=st.sampled_from(list("AnBo:*#[]- 0123456789\n\tx.é")), max_size=200))
def test_transcript_text(tmp_path: Path, text: str) -> None:
    p = tmp_path / "t.md"
    p.write_text(text, "utf-8")
    consume(p, "transcript")


Row = tuple[str, str, str, str, str, str]  # source, session key, native id, speaker, role, text


def stored_turns(store: Store) -> set[Row]:
    rows = store.conn.execute(
        "SELECT s.source, s.key, coalesce(t.source_id, ''), t.speaker, t.role, t.text "
        "FROM turns t JOIN sessions s ON s.id = t.session_id"
    )
    return {tuple(map(str, r)) for r in rows}  # type: ignore[misc]


def parsed_turns(p: Path, fmt: str) -> tuple[set[Row], int] | None:
    """The turns of the file's good units and its count of bad units, or None when the
    whole file is refused (an error reading it, or no turn and no bad unit in it)."""
    try:
        read = list(units(p, fmt))
    except InputError:
        return None
    rows = {
        (s.source, s.key, t.source_id or "", t.speaker, t.role, secrets.redact(t.text))  # as the write path keeps it
        for u in read
        if u.error is None
        for s in u.sessions
        for t in s.turns
    }
    bad = sum(u.error is not None for u in read)
    return None if not rows and not bad else (rows, bad)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(FORMATS)), data=st.data())
def test_whatever_parses_can_be_written(tmp_path: Path, fmt: str, data: st.DataObject) -> None:
    """What parses is stored whole (every turn of every good unit), what is refused (a
    bad unit, or the whole file) leaves the store as it was, and a second ingest of the
    same file writes nothing."""
    p = tmp_path / "f.json"
    p.write_bytes(data.draw(st.just(FIXTURES[fmt]) | mutated(FIXTURES[fmt])))  # the fixture itself too
    expected = parsed_turns(p, fmt)
    with tempfile.TemporaryDirectory(dir=tmp_path) as work:  # a store of its own for each example
        db = Path(work) / "m.db"
        with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as store:
            store.write_sessions([session("before", "2024-01-01T09:00:00", ("Ana", "A turn stored before the file."))])
            before = stored_turns(store)
            if expected is None:
                with pytest.raises(InputError):
                    runner.ingest_file(store, p, fmt, skip_bad=True)
                assert stored_turns(store) == before
                return
            rows, bad = expected
            first = runner.ingest_file(store, p, fmt, skip_bad=True)
            after = stored_turns(store)
            assert after == before | rows
            assert len(first.errors) == bad
            again = runner.ingest_file(store, p, fmt, skip_bad=True)
            assert again.new == 0 and stored_turns(store) == after


@pytest.mark.parametrize("fmt", ["codex", "gemini"])
def test_a_lone_surrogate_in_a_session_header_is_stored_as_a_replacement(tmp_path: Path, fmt: str) -> None:
    """The first line of an agent's session is read on its own (the session's key, its
    folder): a lone surrogate spelled in its JSON (``"\\ud800"``) becomes U+FFFD there as
    in every other line, instead of failing where SQLite stores it (a case the fuzz above
    drew once)."""
    first, rest = FIXTURES[fmt].split(b"\n", 1)
    planted = re.sub(rb'("(?:id|cwd|sessionId|projectHash)"\s*:\s*")', rb"\1\\ud800", first)
    assert planted != first
    p = tmp_path / "f.jsonl"
    p.write_bytes(planted + b"\n" + rest)
    db = tmp_path / "m.db"
    with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as store:
        report = runner.ingest_file(store, p, fmt, skip_bad=True)
        assert report.new > 0 and not report.errors
        keys = [k for (k,) in store.conn.execute("SELECT key FROM sessions")]
    assert any("\ufffd" in k for k in keys), keys
