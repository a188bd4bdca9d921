"""``localmem export``: a round trip into an empty store reproduces every turn exactly,
re-ingesting into the original store writes nothing, memory stays bounded, and the CLI
writes the same bytes to stdout and to --out."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localmem.config import Settings
from localmem.errors import InputError
from localmem.ingest import detect, export, load
from localmem.ingest._json import first_line_id
from localmem.ingest.runner import ingest_file
from localmem.records import SessionIn, TurnIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

TRICKY = [
    "two lines\nand a third\r\nwith CRLF",
    "  leading and trailing spaces, a tab\t ",
    "unicode: Ångström, 東京, emoji 🧗‍♀️, combining e\u0301, RTL שלום",
    'quotes " and \\ backslashes \\n (not a newline), {"json": [1]}',
    "line\u2028separator, paragraph\u2029separator, next-line\x85, control \x07 bell \x0b \x1c",
    "\n\nstarts with blank lines\n\n",
]


def _sessions() -> list[SessionIn]:
    return [
        SessionIn(
            key="chat-1",
            source="mcp",
            title="Trip planning ✈",
            started_at="2024-05-20T10:00:00",
            turns=tuple(
                TurnIn(text, speaker="Maya" if i % 2 == 0 else "assistant", role="user" if i % 2 == 0 else "assistant")
                for i, text in enumerate(TRICKY)
            ),
        ),
        # same key, another source: a different session
        SessionIn(
            key="chat-1",
            source="jsonl:log.jsonl",
            turns=(
                TurnIn("I'll go with my friend Tomas.", "Maya", "user", "2024-06-01T09:00:00", "m-1"),
                TurnIn("Lisbon in June, then.", "Tomas", "user", "2024-06-01T09:05:00", "m-2"),
            ),
        ),
        SessionIn(
            key="D1",
            source="locomo:conv-26",
            title="",
            turns=(
                TurnIn("My knee hurts after the run.", "Caroline", "user", "2023-05-08T13:56:00", "D1:1"),
                TurnIn("Rest it for a week.", "Melanie", "user", "2023-05-08T13:57:00", "D1:2"),
                TurnIn("Same text, other id.", "Melanie", "user", "2023-05-08T13:57:00", ""),
            ),
        ),
    ]


def _untimed_then_timed(store: Store) -> None:
    """A session whose first turns were stored without any time, and which got a start
    time later: its untimed turns must not pick that time up on the way back."""
    store.write([TurnIn("no time at all", speaker="Ana")], session="late", source="api")
    store.write([TurnIn("now with a time", speaker="Ana", timestamp="2024-07-01T08:00:00")], session="late")


def _dump(store: Store) -> list[tuple[Any, ...]]:
    """Every turn as the store holds it, in session and turn order."""
    return store.conn.execute(
        "SELECT s.source, s.key, s.title, t.speaker, t.role, t.ts, t.source_id, t.text, t.hash "
        "FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.session_id, t.ord"
    ).fetchall()


def _export(store: Store, path: Path, **filters: Any) -> export.ExportReport:
    with path.open("wb") as fh:
        return export.export(store.conn, fh, **filters)


@pytest.fixture
def full(tmp_path: Path, embedder: HashEmbedder) -> Store:
    s = Store(tmp_path / "a.db", embedder=embedder, settings=Settings(db=tmp_path / "a.db"))
    s.write_sessions(_sessions())
    _untimed_then_timed(s)
    return s


def _empty(tmp_path: Path, name: str) -> Store:
    return Store(tmp_path / name, embedder=HashEmbedder(), settings=Settings(db=tmp_path / name))


def test_round_trip_into_an_empty_store_reproduces_every_turn(full: Store, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    report = _export(full, out)
    assert report.to_dict() == {"sessions": 4, "turns": 13}
    assert detect(out) == "localmem"
    fresh = _empty(tmp_path, "b.db")
    r = ingest_file(fresh, out)
    assert (r.format, r.new, r.already_present, r.sessions) == ("localmem", 13, 0, 4)
    # text byte for byte, speaker, role, time, native id, session source/key/title, order
    # and the content hash (which is all of them together)
    assert _dump(fresh) == _dump(full)
    texts = [row[7] for row in _dump(fresh)]
    assert all(t in texts for t in TRICKY)
    started = fresh.conn.execute("SELECT source, key, started_at FROM sessions ORDER BY id").fetchall()
    assert started == full.conn.execute("SELECT source, key, started_at FROM sessions ORDER BY id").fetchall()


def test_reingest_into_the_original_store_writes_nothing(full: Store, tmp_path: Path) -> None:
    out = tmp_path / "export.jsonl"
    _export(full, out)
    before = _dump(full)
    r = ingest_file(full, out)
    assert (r.new, r.already_present) == (0, 13)
    assert _dump(full) == before
    assert full.conn.execute("SELECT count(*) FROM sessions").fetchone()[0] == 4


def test_filters_by_session_key_and_time(full: Store, tmp_path: Path) -> None:
    out = tmp_path / "one.jsonl"
    assert _export(full, out, session="chat-1").to_dict() == {"sessions": 2, "turns": 8}
    assert {json.loads(x)["session"] for x in out.read_text("utf-8").splitlines()} == {"chat-1"}
    assert _export(full, out, since="2024-06-01 09:05").to_dict() == {"sessions": 2, "turns": 2}
    lines = [json.loads(x) for x in out.read_text("utf-8").splitlines()]
    assert [x["text"] for x in lines] == ["Lisbon in June, then.", "now with a time"]
    assert _export(full, out, session="nope").turns == 0
    assert out.read_bytes() == b""
    with pytest.raises(InputError, match="--since"):
        _export(full, out, since="not a time")


def test_export_streams_in_bounded_memory(tmp_path: Path) -> None:
    store = _empty(tmp_path, "big.db")
    body = "x" * 2000
    store.write_sessions(
        SessionIn(key=f"s{i}", source="t", turns=tuple(TurnIn(f"{i}.{j} {body}", "A") for j in range(50)))
        for i in range(20)
    )
    written = 0

    class Counting(io.RawIOBase):
        def write(self, b: Any) -> int:
            nonlocal written
            written += len(b)
            return len(b)

    tracemalloc.start()
    report = export.export(store.conn, Counting())  # type: ignore[arg-type]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert report.turns == 1000
    assert written > 2_000_000
    assert peak < 500_000, f"export held {peak} bytes at once for {written} bytes written"


def test_bad_lines_are_refused_with_file_line_and_field(tmp_path: Path) -> None:
    good = {"localmem": 1, "source": "api", "session": "s", "speaker": "A", "role": "user", "text": "hi"}
    cases = [
        ({**good, "text": "   "}, "line 1.text"),
        ({**good, "text": 3}, "line 1.text"),
        ({**good, "timestamp": "yesterday-ish"}, "line 1.timestamp"),
        ({**good, "source": ""}, "line 1"),
        ({**good, "localmem": 2}, "line 1"),
    ]
    for obj, where in cases:
        f = tmp_path / "bad.jsonl"
        f.write_text(json.dumps(obj) + "\n", "utf-8")
        with pytest.raises(InputError) as err:
            load(f, "localmem")
        assert err.value.path == str(f) and err.value.where == where


# Any text a turn can hold survives the trip through an export line.
_chars = st.characters(blacklist_categories=("Cs",))
_text = st.text(_chars, min_size=1).filter(lambda s: s.strip() != "")


@given(text=_text, speaker=st.text(_chars), native=st.none() | st.text(_chars))
@settings(max_examples=200, deadline=None)
def test_any_text_survives_an_export_line(
    tmp_path_factory: pytest.TempPathFactory, text: str, speaker: str, native: str | None
) -> None:
    store = Store(":memory:", embedder=HashEmbedder(), settings=Settings(db=Path(":memory:")))
    try:
        store.write([TurnIn(text, speaker=speaker, source_id=native, timestamp="2024-01-01T00:00:00")], session="k")
        out = tmp_path_factory.mktemp("prop") / "e.jsonl"
        _export(store, out)
    finally:
        store.close()
    [sess] = load(out)
    assert sess.turns[0] == TurnIn(text, speaker, "user", "2024-01-01T00:00:00", native)
    assert (sess.key, sess.source) == ("k", "api")


def _cli(*args: str, db: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        capture_output=True,
        timeout=300,
        env=os.environ.copy(),
    )


def test_cli_export_stdout_and_out_file_round_trip(tmp_path: Path) -> None:
    src = tmp_path / "chat.jsonl"
    src.write_text(
        "\n".join(
            json.dumps(x, ensure_ascii=False)
            for x in [
                {"session": "s1", "speaker": "Maya", "text": "I'll go to Lisbon 🇵🇹", "timestamp": "2024-05-01T10:00"},
                {"session": "s1", "speaker": "Tomas", "text": "With me!", "id": "t-2"},
            ]
        )
        + "\n",
        "utf-8",
    )
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    assert _cli("ingest", str(src), db=a).returncode == 0
    shown = _cli("export", db=a)
    assert shown.returncode == 0, shown.stderr
    assert shown.stderr.decode().strip() == "exported 2 turns of 1 sessions to stdout"
    out = tmp_path / "x" / "mem.jsonl"
    out.parent.mkdir()
    written = _cli("export", "--out", str(out), db=a)
    assert written.returncode == 0, written.stderr
    assert out.read_bytes() == shown.stdout
    assert [p.name for p in out.parent.iterdir()] == ["mem.jsonl"]  # no partial file left
    lines = [json.loads(x) for x in shown.stdout.decode("utf-8").splitlines()]
    assert lines[0]["text"] == "I'll go to Lisbon 🇵🇹" and lines[0]["source"] == f"jsonl:{first_line_id(src)}"
    # the second line had no time: it stays untimed, so the session's start is left out
    assert lines[1]["id"] == "t-2" and lines[1]["timestamp"] is None and lines[1]["started_at"] is None
    assert _cli("ingest", str(out), db=b).returncode == 0
    assert _cli("export", db=b).stdout == shown.stdout
    again = _cli("ingest", "--json", str(out), db=a)
    assert json.loads(again.stdout)["new"] == 0


def test_cli_export_refuses_a_missing_database(tmp_path: Path) -> None:
    r = _cli("export", db=tmp_path / "none.db")
    assert r.returncode == 3
    assert b"no database yet" in r.stderr and b"Traceback" not in r.stderr
    assert not (tmp_path / "none.db").exists()
