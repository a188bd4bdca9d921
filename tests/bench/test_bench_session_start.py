"""``localmem bench session-start`` runs end to end on a small store (a real CLI process,
the real embedder): a table and a JSON line, no unrelated turn at any session start, the
JavaScript project's pnpm statement found; and its judge counts a chat turn or another
project's decision as unrelated, the case's own statements and project talk as not."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from localmem.bench import projects, session_start
from localmem.config import Settings
from localmem.records import SessionIn, TurnIn
from localmem.storage.write.store import Store
from tests.helpers.benchdata import locomo_doc
from tests.helpers.fakes import HashEmbedder


def test_bench_session_start_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "locomo_dev.json").write_text(json.dumps(locomo_doc()), "utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "localmem",
            "bench",
            "session-start",
            "--data",
            str(data),
            "--turns",
            "50",
            "--workdir",
            str(tmp_path / "work"),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=os.environ.copy(),
    )
    assert run.returncode == 0, run.stderr
    assert "| invoice-ui |" in run.stdout
    got = json.loads(run.stdout.splitlines()[-1])
    assert got["turns"] == 3 + sum(len(s.turns) for s in projects.sessions())
    assert got["session_unrelated"] == 0
    by = {c["case"]: c for c in got["cases"]}
    assert set(by) == {c.name for c in session_start.CASES}
    assert by["invoice-ui"]["session_justified"] >= 1 and by["scratch"]["session_bytes"] == 0


def test_the_judge(tmp_path: Path) -> None:
    with Store(tmp_path / "m.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "m.db")) as store:
        store.write_sessions([*projects.sessions(), SessionIn("c", (TurnIn("I chose the blue dress.", "Ann"),))])
        ids = {str(r[1]): int(r[0]) for r in store.conn.execute("SELECT id, text FROM turns")}
        web = next(c for c in session_start.CASES if c.name == "invoice-ui")
        shop = next(c for c in session_start.CASES if c.own == "shop")
        chat, pnpm = ids["I chose the blue dress."], next(i for t, i in ids.items() if t.startswith(session_start.PNPM))
        postgres = next(i for t, i in ids.items() if t.startswith("For the shop we decided"))
        bad, found = session_start._judge(store, web, (chat, pnpm, postgres))
        assert bad == ["I chose the blue dress.", store.conn.one("SELECT text FROM turns WHERE id = ?", (postgres,))[0]]
        assert found == {session_start.PNPM}
        assert session_start._judge(store, shop, (pnpm, postgres)) == ([], {session_start.PNPM})
