"""Identity of content, not of file names: the same conversation ingested again from a
copied or renamed file (``chat (1).jsonl``) writes nothing new, in every format whose
identity used to carry the file name; a log that grew still writes only what is new."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import apsw
import pytest

from tests.helpers.cli import driver

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"


def ingest(db: Path, path: Path) -> dict[str, int]:
    proc = subprocess.run(driver("--db", str(db), "ingest", str(path), "--json"), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def counts(db: Path) -> tuple[int, int]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return tuple(conn.execute("SELECT (SELECT count(*) FROM turns), (SELECT count(*) FROM sessions)").fetchone())  # type: ignore[return-value]
    finally:
        conn.close()


def chat_log() -> str:
    return "".join(
        json.dumps({"speaker": who, "text": text, "timestamp": f"2024-05-0{i + 1}T10:00:00"}) + "\n"
        for i, (who, text) in enumerate(
            [("Maya", "I signed up for the half marathon."), ("Bot", "Great! When is it?"), ("Maya", "In October.")]
        )
    )


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("chat.jsonl", None),  # the jsonl format (chat_log)
        ("messages.jsonl", DATA / "messages.jsonl"),
        ("messages_bare.json", DATA / "messages_bare.json"),
        ("transcript.md", DATA / "transcript.md"),
    ],
)
def test_a_copied_or_renamed_file_writes_nothing_new(tmp_path: Path, name: str, content: Path | None) -> None:
    original = tmp_path / name
    if content is None:
        original.write_text(chat_log(), "utf-8")
    else:
        shutil.copy(content, original)
    db = tmp_path / "m.db"
    first = ingest(db, original)
    assert first["new"] > 0
    before = counts(db)
    copy = tmp_path / f"{original.stem} (1){original.suffix}"
    shutil.copy(original, copy)
    again = ingest(db, copy)
    assert again["new"] == 0 and again["already_present"] == first["new"]
    moved = tmp_path / "elsewhere" / f"renamed{original.suffix}"
    moved.parent.mkdir()
    original.rename(moved)
    assert ingest(db, moved)["new"] == 0
    assert counts(db) == before


def test_a_grown_copy_writes_only_the_new_turns(tmp_path: Path) -> None:
    log = tmp_path / "chat.jsonl"
    log.write_text(chat_log(), "utf-8")
    db = tmp_path / "m.db"
    assert ingest(db, log)["new"] == 3
    grown = tmp_path / "chat (1).jsonl"
    grown.write_text(chat_log() + json.dumps({"speaker": "Bot", "text": "Good luck!"}) + "\n", "utf-8")
    out = ingest(db, grown)
    assert (out["new"], out["already_present"]) == (1, 3)
    with log.open("a", encoding="utf-8") as fh:  # the original grows too: resumes, the new line is known
        fh.write(json.dumps({"speaker": "Bot", "text": "Good luck!"}) + "\n")
    out = ingest(db, log)
    assert out["new"] == 0 and out["resumed_at_unit"] == 3
    assert counts(db) == (4, 1)


def test_different_logs_stay_apart(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(json.dumps({"speaker": "Ann", "text": "ok"}) + "\n", "utf-8")
    b.write_text(
        json.dumps({"speaker": "Bob", "text": "hello"}) + "\n" + json.dumps({"speaker": "Ann", "text": "ok"}) + "\n",
        "utf-8",
    )
    db = tmp_path / "m.db"
    assert ingest(db, a)["new"] == 1
    assert ingest(db, b)["new"] == 2  # Ann's "ok" of another log is another turn
    assert counts(db) == (3, 2)
