"""``localmem bench startup`` with real processes: each case starts what it says (the
in-process cases never reach the resident server, the server cases always do)."""

from __future__ import annotations

from pathlib import Path

from localmem.bench import startup


def test_cases_reach_what_they_name(tmp_path: Path) -> None:
    cases = ("help", "recall", "recall-server", "query-server-full", "ingest")
    result = startup.run(tmp_path / "w", runs=2, cases=cases)
    rows = {r["case"]: r for r in result["rows"]}
    assert set(rows) == set(cases)
    assert rows["recall"]["served"] == 0  # read in-process: no server in its runtime dir
    assert rows["recall-server"]["served"] == 2  # every run answered by the resident server
    assert all(r["runs"] == 2 and r["p50_ms"] > 0 and r["p95_ms"] >= r["p50_ms"] for r in rows.values())
    assert "recall-server" in startup.table(result)
    assert not list((tmp_path / "w").glob("cache-*"))  # scratch model caches removed
