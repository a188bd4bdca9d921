"""Writing files: idempotent re-ingest, grown logs, bad units, resume after an
interruption (in-process and by killing a real subprocess), and the CLI summary."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

import apsw
import numpy as np
import pytest

from localmem.config import Settings
from localmem.errors import InputError
from localmem.ingest import runner, state
from localmem.storage.write.store import Store
from tests.helpers.cli import driver, jsonl_lines, stored_units
from tests.helpers.fakes import HashEmbedder

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"


def turn_count(store: Store) -> int:
    return int(store.conn.execute("SELECT count(*) FROM turns").fetchone()[0])


@pytest.mark.parametrize(
    "name",
    [
        "chatgpt_conversations.json",
        "claude_conversations.json",
        "messages.jsonl",
        "messages_bare.json",
        "transcript.md",
        "transcript.txt",
    ],
)
def test_reingest_writes_nothing(store: Store, name: str) -> None:
    first = runner.ingest_file(store, DATA / name)
    assert first.new == first.turns > 0 and first.already_present == 0
    again = runner.ingest_file(store, DATA / name)
    assert again.new == 0 and again.already_present == first.turns
    assert turn_count(store) == first.turns


def test_a_grown_log_writes_only_what_is_new(store: Store, tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text(jsonl_lines(0, 10), "utf-8")
    assert runner.ingest_file(store, p).new == 10
    with p.open("a", encoding="utf-8") as fh:
        fh.write(jsonl_lines(10, 15))
    grown = runner.ingest_file(store, p)
    assert (grown.new, grown.already_present, grown.resumed_at_unit) == (5, 0, 10)
    assert turn_count(store) == 15


def test_a_grown_export_writes_only_new_messages_and_conversations(store: Store, tmp_path: Path) -> None:
    convs = json.loads((DATA / "claude_conversations.json").read_text("utf-8"))
    p = tmp_path / "conversations.json"
    p.write_text(json.dumps(convs[:1]), "utf-8")
    assert runner.ingest_file(store, p).new == 2
    convs[0]["chat_messages"].append(
        {"uuid": "m4", "sender": "human", "text": "Fed it, smells fine now.", "created_at": "2024-07-03T08:00:00Z"}
    )
    p.write_text(json.dumps(convs), "utf-8")  # re-exported: an older conversation grew, a new one came
    again = runner.ingest_file(store, p)
    assert (again.new, again.already_present, again.resumed_at_unit) == (3, 2, None)
    assert turn_count(store) == 5


def test_a_transcript_that_grows_at_its_end_stays_one_session(store: Store, tmp_path: Path) -> None:
    p = tmp_path / "chat.md"
    p.write_text("## 2024-05-01\nAnn: first\nBo: second\n", "utf-8")
    assert runner.ingest_file(store, p).new == 2
    with p.open("a", encoding="utf-8") as fh:
        fh.write("Ann: third\n")
    again = runner.ingest_file(store, p)
    assert again.new == 1 and again.sessions == 1
    assert store.stats()["sessions"] == 1


def test_an_edited_file_is_read_from_its_start(store: Store, tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text(jsonl_lines(0, 10), "utf-8")
    runner.ingest_file(store, p)
    p.write_text(jsonl_lines(0, 10).replace("Line number 3 ", "Line number three "), "utf-8")
    again = runner.ingest_file(store, p)
    assert (again.new, again.already_present, again.resumed_at_unit) == (1, 9, None)


def test_a_bad_conversation_refuses_the_file_or_is_skipped(store: Store, tmp_path: Path) -> None:
    convs = json.loads((DATA / "claude_conversations.json").read_text("utf-8"))
    convs.insert(1, {"uuid": "broken", "chat_messages": [{"sender": "human", "text": "x", "created_at": "whenever"}]})
    p = tmp_path / "conversations.json"
    p.write_text(json.dumps(convs), "utf-8")
    with pytest.raises(InputError) as err:
        runner.ingest_file(store, p)
    assert str(p) in str(err.value) and "$[1].chat_messages[0].created_at" in str(err.value)
    assert turn_count(store) == 0
    report = runner.ingest_file(store, p, skip_bad=True)
    assert report.new == 4 and len(report.errors) == 1 and report.errors[0]["where"] == "$[1]"
    assert report.skipped == {"empty message": 1}


class InterruptingEmbedder(HashEmbedder):
    """Raises KeyboardInterrupt on its n-th call, as Ctrl-C would mid-ingest."""

    def __init__(self, at_call: int) -> None:
        super().__init__()
        self.at_call = at_call

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if self.calls + 1 == self.at_call:
            self.calls += 1
            raise KeyboardInterrupt
        return super().embed(texts)


def test_an_interrupted_ingest_resumes_where_it_stopped(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text(jsonl_lines(0, 100), "utf-8")
    db = tmp_path / "m.db"
    with Store(db, embedder=InterruptingEmbedder(at_call=3), settings=Settings(db=db)) as s1:
        with pytest.raises(KeyboardInterrupt):
            runner.ingest_file(s1, p, batch_turns=20)
        stored = turn_count(s1)
        assert stored == 40  # two batches committed, the third rolled back
        row = state.get(s1.conn, p, "jsonl", "")
        assert row is not None and row.cursor.index == 40 and not row.complete
    with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as s2:
        report = runner.ingest_file(s2, p, batch_turns=20)
        assert (report.resumed_at_unit, report.new, report.already_present) == (40, 60, 0)
        assert turn_count(s2) == 100


def test_a_stop_request_ends_after_a_batch_and_leaves_a_resume_point(store: Store, tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text(jsonl_lines(0, 50), "utf-8")
    first = runner.ingest_file(store, p, batch_turns=10, should_stop=lambda: True)
    assert first.stopped and first.new == 10
    rest = runner.ingest_file(store, p, batch_turns=10)
    assert not rest.stopped and rest.new == 40 and rest.resumed_at_unit == 10


# -- real subprocesses ----------------------------------------------------------------


def test_killed_ingest_subprocess_resumes(tmp_path: Path) -> None:
    p = tmp_path / "big.jsonl"
    p.write_text(jsonl_lines(0, 1536), "utf-8")  # six batches of 256 turns
    db = tmp_path / "m.db"
    proc = subprocess.Popen(driver("--db", str(db), "ingest", str(p), "--json", delay=0.6), stdout=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while stored_units(db) < 512 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the ingest finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done_before = stored_units(db)
    assert 512 <= done_before < 1536
    out = subprocess.run(
        driver("--db", str(db), "ingest", str(p), "--json"), capture_output=True, text=True, check=True
    )
    summary = json.loads(out.stdout)
    assert summary["resumed_at_unit"] == done_before
    assert summary["new"] + summary["already_present"] == 1536 - done_before
    conn = apsw.Connection(str(db))
    assert conn.execute("SELECT count(*), count(DISTINCT text) FROM turns").fetchone() == (1536, 1536)


def test_cli_summary_skip_bad_and_clear_errors(tmp_path: Path) -> None:
    p = tmp_path / "conversations.json"
    shutil.copy(DATA / "chatgpt_conversations.json", p)
    db = tmp_path / "m.db"
    out = subprocess.run(
        driver("--db", str(db), "ingest", str(p), "--json"), capture_output=True, text=True, check=True
    )
    summary = json.loads(out.stdout)
    assert summary["format"] == "chatgpt" and summary["sessions"] == 2 and summary["new"] == 6
    assert summary["skipped"]["tool call"] == 1 and summary["errors"] == [] and out.stderr == ""

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": 5}\n{"text": "also fine"}\n', "utf-8")
    proc = subprocess.run(driver("--db", str(db), "ingest", str(bad)), capture_output=True, text=True)
    assert proc.returncode == 3 and "bad.jsonl at line 2" in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run(driver("--db", str(db), "ingest", str(bad), "--skip-bad"), capture_output=True, text=True)
    assert proc.returncode == 0 and "2 new" in proc.stdout and "1 bad units skipped" in proc.stdout
    assert "line 2" in proc.stderr
    env = {**os.environ, "LOCALMEM_DB": str(db)}
    proc = subprocess.run(driver("ingest", str(tmp_path / "nope.json")), capture_output=True, text=True, env=env)
    assert proc.returncode == 3 and "no such file" in proc.stderr
