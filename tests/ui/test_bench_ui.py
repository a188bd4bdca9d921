"""``localmem bench ui`` through the real CLI on a small store: it serves the store, times the
first page and searches, and pages the Timeline to its end (every session reached). The
figures themselves are the bench's output (docs/ui.md), not asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from localmem.config import Settings
from localmem.memory import open_store
from localmem.records import SessionIn, TurnIn


def test_bench_ui_reaches_every_session_and_prints_a_table(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with open_store(Settings(db=db)) as store:  # the default embedder, as the CLI opens it
        store.write_sessions(
            [
                SessionIn(
                    key=f"s{i}",
                    source="jsonl:chat",
                    started_at=f"2024-{1 + i % 5:02d}-{1 + i % 28:02d}T09:00:00",
                    turns=(TurnIn(f"Day {i}: the garden needs water and basil {i}.", "Ana"), TurnIn("Noted.", "Ben")),
                )
                for i in range(57)
            ]
        )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "localmem",
            "--db",
            str(db),
            "bench",
            "ui",
            "--queries",
            "4",
            "--repeats",
            "2",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    table, last = done.stdout.rsplit("\n", 2)[0], done.stdout.strip().splitlines()[-1]
    assert "| every session reachable (Timeline paged to its end) | yes: 57 of 57 in 2 pages" in table
    r = json.loads(last)
    assert r["reachable"]["all_reached"] and r["reachable"]["month_offsets_ok"] and r["reachable"]["months"] == 5
    assert r["sessions"] == 57 and r["turns"] == 114
    assert r["search"]["plain"]["n"] == r["search"]["filtered"]["n"] == 4
    assert r["first_page"]["warm"]["p50_ms"] > 0 and r["search"]["plain"]["p95_ms"] > 0
