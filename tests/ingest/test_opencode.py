"""OpenCode's database (``localmem.ingest.opencode``, ``opencode_runner``), on fixture
databases in the schema the real CLI creates (tests/helpers/opencode_db.py): every text a
person or the agent said stored once, in order, and nothing of reasoning, tool results,
synthetic or ignored parts, compaction summaries or localmem's injected context; a second
read stores nothing and does not open an unchanged database; a session that grows gets
only its new turns; a step still being written waits; a locked database is waited for; a
malformed row is reported by database, session and message, the rest stored; the database
is left as it was (read-only, journal mode unchanged)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time
from pathlib import Path

from localmem.ingest import capture, opencode_runner
from localmem.storage.write.store import Store
from localmem.util.injected import wrap
from tests.helpers.opencode_db import OLD, OpenCodeDb, now_ms, text

NEVER = ("PRIVATE-REASONING", "TOOL-OUTPUT", "SYNTHETIC-FILE", "IGNORED-PART", "SUMMARY-OF-SO-FAR", "INJECTED-MEMORY")


def stored(store: Store) -> list[tuple[str, str, str, str]]:
    rows = store.conn.execute(
        "SELECT s.key, t.speaker, t.text, s.client FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.id"
    ).fetchall()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]


def full_session(db: OpenCodeDb) -> None:
    db.session("ses_main", "/home/dev/shop", title="Coupon rounding")
    db.message(
        "ses_main",
        "user",
        [
            text("Why do two coupons round the total twice?"),
            text("SYNTHETIC-FILE contents of cart.py", synthetic=True),
            text("IGNORED-PART", ignored=True),
            {"type": "file", "mime": "text/x-python", "url": "file:///home/dev/shop/cart.py", "filename": "cart.py"},
        ],
        OLD,
    )
    db.message(
        "ses_main",
        "assistant",
        [
            {"type": "step-start"},
            {"type": "reasoning", "text": "PRIVATE-REASONING about coupons", "time": {"start": OLD}},
            text("I'll look at apply_discount first."),
            {
                "type": "tool",
                "tool": "read",
                "callID": "c1",
                "state": {
                    "status": "completed",
                    "input": {"filePath": "/home/dev/shop/cart.py"},
                    "output": "TOOL-OUTPUT",
                },
            },
            {
                "type": "tool",
                "tool": "bash",
                "callID": "c2",
                "state": {"status": "completed", "input": {"command": "pytest -q"}, "output": "TOOL-OUTPUT 3 passed"},
            },
            {"type": "step-finish", "reason": "tool-calls"},
        ],
        OLD + 100,
        finish="tool-calls",
    )
    db.message("ses_main", "assistant", [text("Each coupon rounded on its own; now the total rounds once.")], OLD + 200)
    db.message(
        "ses_main",
        "user",
        [text(wrap("INJECTED-MEMORY: an older turn", "localmem: memory") + "\nAlso add a test for three coupons.")],
        OLD + 300,
    )
    db.message("ses_main", "user", [{"type": "compaction", "auto": True}], OLD + 400)
    db.message("ses_main", "assistant", [text("SUMMARY-OF-SO-FAR: coupons")], OLD + 410, summary=True)
    db.message("ses_main", "assistant", [text("Added test_three_coupons.")], OLD + 500)
    db.session("ses_child", "/home/dev/shop", title="Explore", parent="ses_main", t=OLD + 120)
    db.message("ses_child", "user", [text("Find where coupons are parsed.")], OLD + 130)
    db.message("ses_child", "assistant", [text("In coupons/parse.py.")], OLD + 140)


EXPECTED = [
    ("ses_main", "user", "Why do two coupons round the total twice?"),
    ("ses_main", "assistant", "I'll look at apply_discount first.\nread: /home/dev/shop/cart.py\nran: pytest -q"),
    ("ses_main/ses_child", "agent", "Find where coupons are parsed."),
    ("ses_main/ses_child", "subagent", "In coupons/parse.py."),
    ("ses_main", "assistant", "Each coupon rounded on its own; now the total rounds once."),
    ("ses_main", "user", "Also add a test for three coupons."),
    ("ses_main", "assistant", "Added test_three_coupons."),
]


def test_every_text_once_and_nothing_else(tmp_path: Path, store: Store) -> None:
    db = OpenCodeDb(tmp_path / "opencode.db")
    full_session(db)
    db.close()
    got = opencode_runner.ingest(store, tmp_path / "opencode.db")
    rows = stored(store)
    assert sorted(r[:3] for r in rows) == sorted(EXPECTED)
    for key in ("ses_main", "ses_main/ses_child"):
        assert [r[:3] for r in rows if r[0] == key] == [e for e in EXPECTED if e[0] == key]
    assert {r[3] for r in rows} == {"opencode"}
    for r in rows:
        assert not [w for w in NEVER if w in r[2]], r
    assert got.report.new == len(EXPECTED) and not got.report.errors and not got.held
    skipped = got.report.skipped
    assert skipped["thinking"] == 1 and skipped["synthetic text"] == 1 and skipped["ignored text"] == 1
    assert skipped["compaction summary"] == 1 and skipped["file"] == 1
    project, title = store.conn.execute("SELECT cwd, title FROM sessions WHERE key = 'ses_main'").fetchone()
    assert (project, title) == ("/home/dev/shop", "Coupon rounding")


def test_second_read_stores_nothing_and_opens_nothing(tmp_path: Path, store: Store) -> None:
    db = OpenCodeDb(tmp_path / "opencode.db")
    full_session(db)
    db.close()
    loc = capture.Location("opencode", tmp_path, "opencode")
    first = capture.backfill(store, [loc])
    assert first.new == len(EXPECTED) and first.read == 1
    again = capture.backfill(store, [loc])
    assert (again.new, again.already_present, again.read, again.unchanged) == (0, 0, 0, 1)
    assert opencode_runner.unchanged(store, tmp_path / "opencode.db")


def test_grown_session_adds_only_its_new_turns(tmp_path: Path, store: Store) -> None:
    db = OpenCodeDb(tmp_path / "opencode.db")
    full_session(db)
    opencode_runner.ingest(store, tmp_path / "opencode.db")
    db.message("ses_main", "user", [text("And four coupons?")], OLD + 600)
    db.message("ses_main", "assistant", [text("Four round once too.")], OLD + 700)
    assert not opencode_runner.unchanged(store, tmp_path / "opencode.db")
    got = opencode_runner.ingest(store, tmp_path / "opencode.db").report
    db.close()
    assert (got.new, got.already_present, got.sessions) == (2, 0, 1)
    assert [r[2] for r in stored(store)][-2:] == ["And four coupons?", "Four round once too."]


def test_a_step_still_being_written_waits(tmp_path: Path, store: Store) -> None:
    db = OpenCodeDb(tmp_path / "opencode.db")
    t = now_ms()
    db.session("ses_live", "/home/dev/shop", t=t)
    db.message("ses_live", "user", [text("Rename the coupon table.")], t)
    writing = db.message("ses_live", "assistant", [{"type": "step-start"}], t + 50, time={"created": t + 50})
    report = capture.backfill(store, [capture.Location("opencode", tmp_path, "opencode")])
    assert report.new == 1 and [h["session"] for h in report.held] == ["ses_live"], report.to_dict()
    db.complete(writing, t + 80, "Renamed it to coupons_v2.")
    db.close()
    again = capture.backfill(store, [capture.Location("opencode", tmp_path, "opencode")])
    assert (again.new, again.already_present, again.held) == (1, 0, [])
    assert [r[2] for r in stored(store)] == ["Rename the coupon table.", "Renamed it to coupons_v2."]


HOLD_LOCK = """
import sys, time, apsw
c = apsw.Connection(sys.argv[1])
c.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
c.execute("COMMIT")
"""


def test_a_locked_database_is_waited_for(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "opencode.db"
    db = OpenCodeDb(path, journal="delete")  # a rollback journal: an exclusive lock shuts readers out
    full_session(db)
    db.close()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path), "1.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        t0 = time.monotonic()
        got = opencode_runner.ingest(store, path).report
        waited = time.monotonic() - t0
    finally:
        holder.wait(timeout=30)
    assert holder.returncode == 0
    assert waited > 0.5 and got.new == len(EXPECTED) and not got.errors


def test_a_malformed_row_is_named_and_the_rest_stored(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "opencode.db"
    db = OpenCodeDb(path)
    full_session(db)
    db.session("ses_bad", "/home/dev/other")
    db.message("ses_bad", "user", [text("The first question stays.")], OLD + 10)
    bad = db.raw_message("ses_bad", "{not json", OLD + 20)
    odd = db.message("ses_bad", "assistant", [text("fine")], OLD + 30)
    db.part("ses_bad", odd, "[1, 2]", OLD + 31)
    db.message("ses_bad", "user", [text("The last question stays too.")], OLD + 40)
    db.close()
    report = capture.backfill(store, [capture.Location("opencode", tmp_path, "opencode")])
    errors = [e["error"] for e in report.errors]
    assert len(errors) == 2, report.errors
    assert all(str(path) in e and "session ses_bad" in e for e in errors)
    assert f"message {bad}" in errors[0] and "not JSON" in errors[0]
    assert f"message {odd}" in errors[1] and "is not a JSON object with a type" in errors[1]
    texts = [r[2] for r in stored(store)]
    assert "The first question stays." in texts and "The last question stays too." in texts
    assert len(texts) == len(EXPECTED) + 2


def test_the_database_is_left_as_it_was(tmp_path: Path, store: Store) -> None:
    path = tmp_path / "opencode.db"
    db = OpenCodeDb(path, journal="delete")
    full_session(db)
    db.close()
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    opencode_runner.ingest(store, path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before
    assert not (tmp_path / "opencode.db-wal").exists() and not (tmp_path / "opencode.db-journal").exists()
