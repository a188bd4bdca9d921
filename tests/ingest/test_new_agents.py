"""Copilot CLI, Cursor and Aider logs (tests/ingest/fixtures/{copilot,cursor,aider}, written
from each format's source: see the parsers' docstrings): detected by content, every
sentence a person or an agent said stored once and in order, no thinking, tool output or
injected text; a second read stores nothing; a log read while it grows stores each line
once; `localmem capture --only …` finds them where the agents keep them and `localmem
watch` follows a log that appears later (real processes, a private HOME)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.config import IngestParams, Settings
from localmem.ingest import detect, load, runner
from localmem.storage.bench import reads
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

FIX = Path(__file__).resolve().parent / "fixtures"
CP_SID = "4c1d2e3f-5a6b-4c7d-8e9f-0a1b2c3d4e5f"
COPILOT = FIX / "copilot" / "session-state" / CP_SID / "events.jsonl"
CURSOR_DIR = FIX / "cursor" / "home-dev-api" / "agent-transcripts"
CURSOR = CURSOR_DIR / "3a2b1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d.jsonl"
CU_SID = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
CURSOR_IDE = CURSOR_DIR / CU_SID / f"{CU_SID}.jsonl"
CURSOR_SUB = CURSOR_DIR / CU_SID / "subagents" / "b1c2d3e4.jsonl"
AIDER = FIX / "aider" / "shop" / ".aider.chat.history.md"
FORMAT = {COPILOT: "copilot", CURSOR: "cursor", CURSOR_IDE: "cursor", CURSOR_SUB: "cursor", AIDER: "aider"}

# (session key, speaker, text) of every turn, in order.
EXPECTED: dict[Path, list[tuple[str, str, str]]] = {
    COPILOT: [
        (CP_SID, "user", "Invoices round each line item before summing, so totals drift by a cent. Can you fix it?"),
        (
            CP_SID,
            "assistant",
            "I'll look at how the invoice total is computed.\nsearched: def invoice_total\n"
            "read: /home/dev/billing/billing/invoice.py\nedited: /home/dev/billing/billing/invoice.py\n"
            "ran: pytest -q tests/test_invoice.py",
        ),
        (
            CP_SID,
            "assistant",
            "Fixed: the total now sums exact amounts and rounds once at the end; the invoice tests pass.",
        ),
        (CP_SID, "user", "Also add a test where three lines of 0.333 sum to 0.99."),
        (
            CP_SID,
            "assistant",
            "I'll ask a sub-agent to write that test.\ndelegated: Write the three-lines rounding test",
        ),
        (f"{CP_SID}/agent-7f3a", "agent", "Add a test to tests/test_invoice.py: three lines of 0.333 must total 0.99."),
        (
            f"{CP_SID}/agent-7f3a",
            "subagent",
            "Added test_three_thirds; it fails before the fix and passes after.\n"
            "edited: /home/dev/billing/tests/test_three.py",
        ),
        (CP_SID, "assistant", "The sub-agent added the test; all 13 invoice tests pass."),
    ],
    CURSOR: [
        ("3a2b1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d", "user", x)
        if i in (0, 4)
        else ("3a2b1c0d-9e8f-4a7b-8c6d-5e4f3a2b1c0d", "assistant", x)
        for i, x in enumerate(
            [
                "The /orders endpoint times out when a customer has more than 500 orders. Why?",
                "I'll check how orders are loaded for the endpoint.\nsearched: def list_orders\n"
                "read: /home/dev/api/orders/views.py",
                "Each order loads its items in a separate query: 500 orders make 501 queries.\n"
                "edited: /home/dev/api/orders/views.py\nran: pytest -q tests/test_orders.py",
                "Fixed with prefetch_related; the endpoint now makes two queries and the tests pass.",
                "Add pagination too, 100 orders a page.",
                "searched: **/pagination.py",
                "Added pagination with a default page size of 100.",
            ]
        )
    ],
    CURSOR_IDE: [
        (CU_SID, "user", "Write a migration that adds an index on orders.customer_id."),
        (CU_SID, "assistant", "I'll hand the migration to a subagent.\ndelegated: Write the index migration"),
        (CU_SID, "assistant", "The migration 0042_orders_customer_index is in place."),
    ],
    CURSOR_SUB: [
        (f"{CU_SID}/b1c2d3e4", "agent", "Create a Django migration adding an index on orders.customer_id."),
        (
            f"{CU_SID}/b1c2d3e4",
            "subagent",
            "Created migrations/0042_orders_customer_index.py with AddIndex on customer_id.\n"
            "edited: /home/dev/api/orders/migrations/0042_orders_customer_index.py",
        ),
    ],
    AIDER: [
        (
            "2025-06-03 14:02:11",
            "user",
            "The cart applies the coupon after the gift card.\nIt should apply the coupon first.",
        ),
        (
            "2025-06-03 14:02:11",
            "assistant",
            "I'll swap the order so the coupon percentage applies to the full amount.\n\n#### Why the order matters\n\n"
            "A gift card is a fixed amount; a coupon is a percentage.\n\nedited: shop/cart.py\n\n"
            "The coupon now applies before the gift card.",
        ),
        ("2025-06-03 14:02:11", "user", "Should expired coupons raise or be ignored?"),  # /ask runs it as input
        (
            "2025-06-03 14:02:11",
            "assistant",
            "Ignoring them silently hides mistakes; raising a clear error at checkout is safer.\n\n"
            "> A quoted line from the docs stays part of the answer.",
        ),
        ("2025-06-04 09:30:00", "user", "Please add a test for two coupons at once."),
        ("2025-06-04 09:30:00", "assistant", "Added a test for stacking two coupons.\n\nedited: tests/test_cart.py"),
    ],
}
# Words of what each fixture holds besides what was said: thinking, tool output, injected context.
NEVER = (
    "rounding happens in invoice_total",  # copilot: assistant.reasoning
    "Grep for the function",  # copilot: reasoningText
    "12 passed",  # tool results
    "You are the GitHub Copilot CLI",  # system prompt
    "current_datetime",
    "Use the skill",  # a skill's injected prompt
    "Recalled memory",  # localmem's own context
    "summed, it was fixed",
    "N+1 query",  # cursor thinking
    "user_query",
    "<timestamp>",
    "OS: linux",
    "attached_files",
    "apply_discounts",  # aider thinking
    "thinking-content",
    "Applied edit",
    "Aider v0.86",
    "(Y)es/(N)o",
    "SEARCH",
    "total -= gift_card",
    "<blank>",
    "git log --oneline",
    "/add shop",
    "/ask",
)


def key_of(path: Path, key: str) -> str:
    return f"{key} {path.resolve().parent}" if FORMAT[path] == "aider" else key


def new_store(tmp_path: Path, name: str, **ingest: object) -> Store:
    db = tmp_path / f"{name}.db"
    return Store(db, embedder=HashEmbedder(), settings=Settings(db=db, ingest=IngestParams(**ingest)))  # type: ignore[arg-type]


def stored(store: Store) -> list[tuple[str, str, str, str]]:
    rows = store.conn.execute(
        "SELECT s.source, s.key, t.speaker, t.text FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.id"
    ).fetchall()
    return [(str(a), str(b), str(c), str(d)) for a, b, c, d in rows]


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.parent.name[:12] + "/" + p.name[:12])
def test_detected_and_every_sentence_once_nothing_else(path: Path) -> None:
    assert detect(path) == FORMAT[path]
    got = [(s.key, t.speaker, t.text) for s in load(path) for t in s.turns]
    want = [(key_of(path, k), sp, x) for k, sp, x in EXPECTED[path]]
    assert sorted(got) == sorted(want)  # sessions are merged by key; within each, the order:
    for key in {k for k, _, _ in want}:
        assert [g for g in got if g[0] == key] == [w for w in want if w[0] == key]
    for _, _, text in got:
        assert not [w for w in NEVER if w in text], text


def test_sessions_client_project_and_times() -> None:
    cp = {s.key: s for s in load(COPILOT)}[CP_SID]
    assert (cp.source, cp.client, cp.started_at) == ("copilot-cli", "copilot-cli", "2026-03-02T09:15:00")
    assert cp.project is not None and (cp.project.cwd, cp.project.branch) == (
        "/home/dev/billing",
        "fix-invoice-rounding",
    )
    assert cp.project.repository == "acme/billing" and cp.project.commit.startswith("9f8e7d6c")
    cu = load(CURSOR)[0]
    assert (cu.source, cu.client, cu.project) == ("cursor", "cursor", None)
    ai = load(AIDER)
    assert [s.source for s in ai] == ["aider", "aider"] and all(s.client == "aider" for s in ai)
    assert ai[0].project is not None and ai[0].project.cwd == str(AIDER.resolve().parent)
    assert ai[0].started_at is not None and ai[0].started_at[:10] in ("2025-06-03", "2025-06-02", "2025-06-04")


def test_tool_lines_none_and_thinking_counted(tmp_path: Path) -> None:
    with new_store(tmp_path, "none", tool_lines="none") as store:
        reports = [runner.ingest_file(store, p) for p in (COPILOT, CURSOR, AIDER)]
        texts = [t for *_, t in stored(store)]
    assert not [line for t in texts for line in t.splitlines() if line.startswith(("ran:", "edited:", "read:"))]
    assert all(r.skipped["thinking"] >= 1 for r in reports)
    assert reports[0].skipped["injected context"] == 1 and reports[0].skipped["localmem context"] == 1


@pytest.mark.parametrize("path", list(EXPECTED), ids=lambda p: p.parent.name[:12] + "/" + p.name[:12])
def test_reingest_writes_nothing(path: Path, tmp_path: Path) -> None:
    copy = tmp_path / "log" / path.name
    copy.parent.mkdir()
    copy.write_bytes(path.read_bytes())
    with new_store(tmp_path, "m") as store:
        first = runner.ingest_file(store, copy)
        assert first.new == len(EXPECTED[path]) and first.format == FORMAT[path]
        assert runner.ingest_file(store, copy).new == 0
        assert [t for *_, t in stored(store)] == [t for *_, t in EXPECTED[path]] or FORMAT[path] == "copilot"
        assert sorted(t for *_, t in stored(store)) == sorted(t for *_, t in EXPECTED[path])


def nonblank_lines(texts: list[str]) -> Counter[str]:
    return Counter(line for text in texts for line in text.splitlines() if line.strip())


@pytest.mark.parametrize("path", [COPILOT, CURSOR, AIDER], ids=lambda p: FORMAT[p])
def test_growing_log_every_line_once(path: Path, tmp_path: Path) -> None:
    """Cut the log at every line end (and inside a line, as a writer mid-line leaves it),
    read it as capture and watch read a log being written (``hold``), let it grow to the
    whole and read it to its end: every line said is stored once; a third read adds nothing."""
    data = path.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    whole = nonblank_lines([t for *_, t in EXPECTED[path]])
    cuts = [*ends[:-1], ends[len(ends) // 2] - 7, ends[3] + 5]
    for n, cut in enumerate(cuts):
        log = tmp_path / f"cut{n}" / path.name
        log.parent.mkdir()
        log.write_bytes(data[:cut])
        with new_store(tmp_path, f"cut{n}") as store:
            try:
                runner.ingest_file(store, log, FORMAT[path], hold=True)
            except Exception as exc:  # a head with no turn yet (only a header line) is refused, nothing stored
                assert not stored(store), exc
            with log.open("ab") as fh:
                fh.write(data[cut:])
            runner.ingest_file(store, log, FORMAT[path], hold=True)
            runner.ingest_file(store, log, FORMAT[path])  # quiet now: read to its end
            texts = [t for *_, t in stored(store)]
            assert nonblank_lines(texts) == whole, f"cut at byte {cut}"
            assert runner.ingest_file(store, log, FORMAT[path]).new == 0


# -- the real CLI ---------------------------------------------------------------------------


def agent_home(tmp_path: Path) -> Path:
    """A home where Copilot CLI, Cursor and aider keep these logs, all two days old."""
    home = tmp_path / "home"
    shutil.copytree(FIX / "copilot" / "session-state", home / ".copilot" / "session-state")
    shutil.copytree(FIX / "cursor", home / ".cursor" / "projects")
    shutil.copytree(FIX / "aider" / "shop", home / "code" / "shop")
    (home / "code" / "deep" / "a" / "b" / "c").mkdir(parents=True)  # four folders down: not searched
    shutil.copy(AIDER, home / "code" / "deep" / "a" / "b" / "c")
    (home / "code" / ".hidden").mkdir()
    shutil.copy(AIDER, home / "code" / ".hidden")
    old = time.time() - 2 * 86400
    for f in home.rglob("*"):
        os.utime(f, (old, old))
    return home


def cli(home: Path, db: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPILOT_", "CODEX_", "CLAUDE_", "XDG_CONFIG"))}
    env["HOME"] = str(home)
    argv = [sys.executable, "-m", "localmem", "--db", str(db), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, cwd=cwd)


def texts_in(db: Path) -> list[str]:
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    except apsw.Error:
        return []
    try:
        return [t.text for t in reads.turn_texts(conn)]
    except apsw.Error:  # not made yet
        return []
    finally:
        conn.close()


def test_capture_finds_each_agent_where_it_keeps_its_logs(tmp_path: Path) -> None:
    home = agent_home(tmp_path)
    db = tmp_path / "m.db"
    run = cli(home, db, "capture", "--json", "--only", "copilot", "--only", "cursor")
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert [loc["folder"] for loc in got["locations"]] == [
        str(home / ".copilot" / "session-state"),
        str(home / ".cursor" / "projects"),
    ]
    assert got["by_client"] == {"copilot": {"files": 1, "new": 8, "already_present": 0}} | {
        "cursor": {"files": 3, "new": 12, "already_present": 0}
    }
    assert not got["errors"]
    # aider: only when asked; its folder of repositories searched three folders deep, hidden ones not
    plain = json.loads(cli(home, db, "capture", "--json").stdout)
    assert "aider" not in [loc["client"] for loc in plain["locations"]] and plain["new"] == 0
    code = cli(home, db, "capture", "--json", "--dir", f"aider={home / 'code'}")
    aider = json.loads(code.stdout)
    assert aider["by_client"]["aider"] == {"files": 1, "new": 6, "already_present": 0}, aider
    texts = texts_in(db)
    want = [t for p in (COPILOT, CURSOR, CURSOR_IDE, CURSOR_SUB, AIDER) for *_, t in EXPECTED[p]]
    assert sorted(texts) == sorted(want)
    again = json.loads(cli(home, db, "capture", "--json", "--only", "aider", cwd=tmp_path).stdout)
    assert again["locations"] == [{"client": "aider", "folder": str(home)}]
    assert again["files"] == 1 and again["new"] == 0 and again["unchanged"] == 1  # ~/code/shop: two folders down


def test_watch_follows_logs_that_appear_later(tmp_path: Path) -> None:
    """A real `localmem watch --only copilot --dir aider=…` in a home with no ~/.copilot: a
    Copilot session folder and its log appear and grow line by line, then an aider history
    appears in a repository; every turn is stored once, in order."""
    home = tmp_path / "home"
    code = home / "code"
    code.mkdir(parents=True)
    db = tmp_path / "m.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COPILOT_", "XDG_CONFIG"))}
    env["HOME"] = str(home)
    cmd = [sys.executable, "-m", "localmem", "--db", str(db), "watch", "--json", "--final-after", "1"]
    cmd += ["--only", "copilot", "--only", "aider", "--dir", f"aider={code}"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    events: list[dict[str, Any]] = []

    def read_events() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            events.append(json.loads(line))

    threading.Thread(target=read_events, daemon=True).start()

    def wait(pred: Callable[[], bool], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not pred():
            assert proc.poll() is None, (events, proc.stderr.read() if proc.stderr else "")
            assert time.monotonic() < deadline, events
            time.sleep(0.1)

    copilot = [t for *_, t in EXPECTED[COPILOT]]
    try:
        wait(lambda: any(e["event"] == "started" for e in events))
        log = home / ".copilot" / "session-state" / CP_SID / "events.jsonl"
        log.parent.mkdir(parents=True)
        with log.open("a", encoding="utf-8") as fh:
            for line in COPILOT.read_text("utf-8").splitlines(keepends=True):
                fh.write(line)
                fh.flush()
                time.sleep(0.05)
        wait(lambda: len(texts_in(db)) >= len(copilot))
        repo = code / "shop"
        repo.mkdir()
        shutil.copy(AIDER, repo)
        wait(lambda: len(texts_in(db)) >= len(copilot) + len(EXPECTED[AIDER]))
        time.sleep(1.5)  # past --final-after: nothing more comes
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    assert proc.returncode == 0
    texts = texts_in(db)
    assert sorted(texts[: len(copilot)]) == sorted(copilot)
    assert texts[len(copilot) :] == [t for *_, t in EXPECTED[AIDER]]
    assert not [e for e in events if e["event"] == "error"]
