"""``localmem bench startup`` with real processes: each case starts what it says (the
in-process cases never reach the resident server nor leave a daemon, the server cases
always reach it, the query-daemon case's later query is answered by the daemon its first
query started, which is stopped at the end)."""

from __future__ import annotations

from pathlib import Path

import pytest

from localmem.bench import startup
from tests.helpers.resident import daemons


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


def test_the_daemon_case_times_the_first_query_and_the_served_later_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LOCALMEM_QUERY_DAEMON_IDLE")  # the bench sets it for each case itself
    result = startup.run(tmp_path / "w", runs=2, cases=("recall", "query-daemon"))
    rows = {r["case"]: r for r in result["rows"]}
    assert list(rows) == ["recall", "query-daemon-first", "query-daemon-later"]
    assert rows["recall"]["served"] == 0  # in-process, and no daemon left for the next round
    assert rows["query-daemon-later"]["served"] == 2 and rows["query-daemon-first"]["served"] is None
    assert result["daemon_ready_p50_ms"] > 0 and "the daemon served" in startup.table(result)
    assert result["daemon_warm_p50_ms"] >= result["daemon_ready_p50_ms"] and "was warm" in startup.table(result)
    assert not daemons(tmp_path / "w" / "startup.db")  # stopped at the end
