"""The benchmarks' named reads (``storage/bench/reads``) and their bench-only edits of a
store (``storage/bench/synthetic``), on a store written by the real write path."""

from __future__ import annotations

import pytest

from localmem.errors import NotFound
from localmem.records import SessionIn
from localmem.storage.bench import reads
from localmem.storage.bench.synthetic import add_antecedent_edges, drop_jobs_outside_sessions, keep_jobs_of_first_turns
from localmem.storage.engine import db
from localmem.storage.write.store import Store


def test_counts_and_lookups_read_what_the_write_path_stored(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    conn = store.conn
    stats = store.stats()
    assert reads.count_turns(conn) == stats["turns"] == 8 == reads.count_jobs(conn)
    assert reads.count_cues(conn) == sum(stats["cues"].values())
    assert reads.count_edges(conn, "temporal") == stats["edges"]["temporal"] > 0
    assert reads.count_edges(conn, "antecedent") == 0
    assert reads.max_turn_id(conn) == 8
    assert reads.turn_identities(conn) == (8, 8)
    counts = reads.index_counts(conn)
    assert counts.turns_fts_rows == counts.turn_vectors == 8
    assert counts.statement_cues == counts.cues_fts_rows == counts.cue_vectors == stats["cues"]["statement"]

    texts = reads.turn_texts(conn)
    assert [t.turn_id for t in texts] == list(range(1, 9))
    assert (texts[0].speaker, texts[0].text) == ("Ana", garden_sessions[0].turns[0].text)
    assert reads.turn_text_counts(conn)[texts[3].text] == 1
    assert reads.turn_from(conn, 4) == texts[3]
    with pytest.raises(NotFound):
        reads.turn_from(conn, 9)
    assert reads.turn_id_of_source(conn, "s2:1") == 5 and reads.source_ids(conn)[5] == "s2:1"
    with pytest.raises(NotFound):
        reads.turn_id_of_source(conn, "nowhere:0")
    # the latest session first, its last turn first; as_of hides later turns
    assert reads.turns_newest_first(conn) == [8, 7, 6, 5, 4, 3, 2, 1]
    assert reads.turns_newest_first(conn, "2024-02-28T00:00:00") == [6, 5, 4, 3, 2, 1]
    spans = reads.statement_spans(conn)
    first = garden_sessions[0].turns[0].text
    assert [first[a:b] for a, b in spans[1]] == ["I planted tomatoes in the garden today.", "They need sun."]
    assert reads.quick_check(conn) == reads.integrity_check(conn) == "ok" and reads.foreign_key_violations(conn) == 0
    assert reads.resume_unit(conn, "/never/ingested.jsonl") == 0 and reads.jobs_held_by_pid(conn, 1) == 0


def test_bench_edits_narrow_the_queue_and_add_synthetic_links_once(
    store: Store, garden_sessions: list[SessionIn]
) -> None:
    store.write_sessions(garden_sessions)
    conn = store.conn
    drop_jobs_outside_sessions(conn, ["s1", "s3"])
    assert [int(r[0]) for r in conn.execute("SELECT turn_id FROM jobs ORDER BY turn_id")] == [1, 2, 3, 7, 8]
    keep_jobs_of_first_turns(conn, 2)
    assert reads.count_jobs(conn) == 2
    with db.transaction(conn):
        conn.execute("UPDATE jobs SET state = 'running', locked_by = 'host:4242' WHERE turn_id = 1")
    assert reads.jobs_held_by_pid(conn, 4242) == 1 and reads.jobs_held_by_pid(conn, 424) == 0

    add_antecedent_edges(conn, 2)
    n = reads.count_edges(conn, "antecedent")
    edges = conn.execute("SELECT src, dst, reason FROM edges WHERE kind = 'antecedent'").fetchall()
    assert 0 < n <= 2 * 7 and all(src < dst and reason == "synthetic" for src, dst, reason in edges)
    assert reads.antecedent_reason(conn, int(edges[0][0]), int(edges[0][1])) == "synthetic"
    assert reads.antecedent_reason(conn, 8, 1) is None
    add_antecedent_edges(conn, 2)  # a store that has links is not densified twice
    assert reads.count_edges(conn, "antecedent") == n
