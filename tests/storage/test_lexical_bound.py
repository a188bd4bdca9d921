"""Bounded lexical work per query (``storage/reads/queries.lexical`` with ``max_rows``): real
FTS5 tables, the work counted in SQLite virtual-machine steps (a progress handler)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from localmem.config import RetrievalParams, Settings
from localmem.errors import ConfigError
from localmem.storage.engine import db
from localmem.storage.reads import queries
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

ROWS = 20_000
RARE = (7, 4_321, 19_999)  # "zebra" turns; 4_321 also says "alpha"


def _store(tmp_path: Path, alpha_every: int) -> db.Conn:
    """A store whose turns_fts holds ROWS documents: "alpha" in every ``alpha_every``-th,
    "zebra" in three, "beta" in 300, "gamma" in 100, filler everywhere."""
    path = tmp_path / f"fts-{alpha_every}.db"
    Store(path, embedder=HashEmbedder(), settings=Settings(db=path)).close()
    conn = db.connect(path)
    rows = []
    for i in range(1, ROWS + 1):
        words = [f"filler{i % 97}", f"word{i % 1009}"]
        if i % alpha_every == 0 or i == RARE[1]:
            words.append("alpha")
        if i in RARE:
            words.append("zebra")
        if i % 67 == 0:
            words.append("beta")
        if i % 200 == 0:
            words.append("gamma")
        rows.append((i, " ".join(words)))
    with db.transaction(conn):
        conn.executemany("INSERT INTO turns_fts(rowid, doc) VALUES (?, ?)", rows)
    return conn


def _steps(conn: db.Conn, fn: object) -> tuple[object, int]:
    """``fn()``'s result and the SQLite VM steps it took (in hundreds)."""
    count = [0]

    def tick() -> bool:
        count[0] += 1
        return False

    conn.set_progress_handler(tick, 100)
    try:
        out = fn()  # type: ignore[operator]
    finally:
        conn.set_progress_handler(None)
    return out, count[0]


def test_a_term_matching_more_rows_than_the_bound_is_left_out_and_work_stays_bounded(tmp_path: Path) -> None:
    few, many = _store(tmp_path, 40), _store(tmp_path, 4)  # alpha in 500 / 5,000 rows (2.5% / 25%)
    common = (1.0, ROWS)  # the share rule keeps every term: only the row bound acts
    work = {}
    for name, conn in (("few", few), ("many", many)):
        for bound in (0, 400):
            (ids, scores), steps = _steps(
                conn,
                lambda c=conn, b=bound: queries.lexical(c, "turns_fts", "alpha zebra?", -1, common=common, max_rows=b),
            )
            work[name, bound] = steps
            if bound:  # alpha (500 or 5,000 matches) is over 400: zebra alone is ranked
                assert sorted(ids.tolist()) == sorted(RARE) and (scores > 0).all()
            else:  # unbounded: every alpha match is scored too, the rare matches first
                assert len(ids) > 490 and sorted(ids[:3].tolist()) == sorted(RARE)
    # Unbounded, the work follows alpha's 10x more matches; bounded it does not grow
    # (the count of alpha's matches stops at 401 rows in both stores).
    assert work["many", 0] > 5 * work["few", 0]
    assert work["many", 400] <= 1.2 * work["few", 400] + 5
    assert work["many", 400] * 10 < work["many", 0]


def test_rarest_terms_are_kept_while_their_matches_fit_the_bound(tmp_path: Path) -> None:
    conn = _store(tmp_path, 40)
    match = '"alpha" OR "beta" OR "gamma" OR "zebra"'  # 500, 298, 100, 3 matches
    assert queries.choose_terms(conn, "turns_fts", match, None, 0) == match.split(" OR ")
    assert queries.choose_terms(conn, "turns_fts", match, None, 450) == ['"beta"', '"gamma"', '"zebra"']
    assert queries.choose_terms(conn, "turns_fts", match, None, 200) == ['"gamma"', '"zebra"']
    assert queries.choose_terms(conn, "turns_fts", match, None, 2) == []  # even the rarest is over: none
    ids, _ = queries.lexical(conn, "turns_fts", "alpha", max_rows=100)
    assert len(ids) == 0
    # The share rule still acts first: beta is in >1% of rows, so it goes whatever the bound.
    assert queries.choose_terms(conn, "turns_fts", match, (0.01, ROWS), 10_000) == ['"gamma"', '"zebra"']


def test_under_a_filter_every_match_is_ranked_but_never_more_than_the_bound(tmp_path: Path) -> None:
    conn = _store(tmp_path, 4)
    ids, _ = queries.lexical(conn, "turns_fts", "gamma beta alpha", -1, max_rows=1_000)
    assert 0 < len(ids) <= 1_000 and {int(i) % 200 for i in ids} >= {0}  # gamma's 100 and beta's ~300
    ids, _ = queries.lexical(conn, "turns_fts", "gamma beta alpha", -1)  # no bound: alpha's 5,000 too
    assert len(ids) > 5_000


def test_the_bound_is_a_checked_setting() -> None:
    assert RetrievalParams().lexical_max_rows > 0
    with pytest.raises(ConfigError):
        RetrievalParams(lexical_max_rows=-1)


def test_term_counts_are_reused_until_any_process_or_this_connection_changes_the_store(tmp_path: Path) -> None:
    conn = _store(tmp_path, alpha_every=10)  # "alpha" in 2,001 documents, "zebra" in 3
    statements: list[str] = []

    def trace(_cursor: object, sql: str, _bindings: object) -> bool:
        statements.append(sql)
        return True

    conn.exec_trace = trace

    def matched() -> set[int]:
        statements.clear()
        ids, _ = queries.lexical(conn, "turns_fts", "zebra alpha", -1, max_rows=2_004)
        return {int(i) for i in ids}

    def counted() -> int:
        return sum("count(*)" in s for s in statements)

    assert len(matched()) == 2_003 and counted() == 2  # 3 + 2,001 fit the bound: both terms (one shared)
    assert len(matched()) == 2_003 and counted() == 0  # nothing changed: the counts are reused

    # another process commits one more "alpha" document: 3 + 2,002 no longer fit
    code = (
        "import sys, apsw; c = apsw.Connection(sys.argv[1]); "
        "c.execute(\"INSERT INTO turns_fts(rowid, doc) VALUES (30001, 'alpha extra')\")"
    )
    subprocess.run([sys.executable, "-c", code, str(conn.filename)], check=True)
    assert matched() == set(RARE) and counted() == 2  # recounted: "alpha" is left out now

    # this connection takes it away again, inside a transaction it has not committed yet
    with pytest.raises(RuntimeError), db.transaction(conn):
        conn.execute("DELETE FROM turns_fts WHERE rowid = 30001")
        assert len(matched()) == 2_003 and counted() == 2
        raise RuntimeError("roll back")
    # rolled back: the counts seen inside it were not kept
    assert matched() == set(RARE) and counted() == 2
    assert matched() == set(RARE) and counted() == 0

    # this connection commits the delete: no other process moved data_version, yet it recounts
    with db.transaction(conn):
        conn.execute("DELETE FROM turns_fts WHERE rowid = 30001")
    assert len(matched()) == 2_003 and counted() == 2
