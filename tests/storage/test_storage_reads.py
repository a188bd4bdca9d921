"""The named reads storage gives the toolkit, the web view, export and ingest
(``storage/reads/traversal``, ``topic_reads``, ``views``, ``export_rows``, ``ingest_files``), on
real stores; their callers' behaviour is tested in test_toolkit, test_ui, test_export and
test_ingest*. Here: the records' contents and orders, and the ingest_files writes."""

from __future__ import annotations

import pytest

from localmem.records import TurnIn
from localmem.storage.reads import browse, export_rows, ingest_files, topic_reads, traversal, views
from localmem.storage.write.store import Store


def _fill(store: Store) -> None:
    store.write(
        [
            TurnIn("I planted tomatoes today.", "Maya", timestamp="2024-05-01T10:00:00"),
            TurnIn("Tomatoes need sun.", "Leo", timestamp="2024-05-01T10:01:00"),
            TurnIn("And water.", "Maya", timestamp="2024-05-01T10:02:00"),
        ],
        "garden",
        source="test",
    )
    store.write([TurnIn("Untimed thought.", "Maya")], "notes", source="test")


def test_turn_reads_give_records_in_their_stated_orders(store: Store) -> None:
    _fill(store)
    ids = traversal.turns_of_sessions(store.conn, traversal.sessions_with_key(store.conn, "garden"), 10, 0)
    assert ids.total == 3 and len(ids.items) == 3
    first, middle, last = ids.items
    assert traversal.neighbours(store.conn, middle, 5) == ([first], [last])
    pos = traversal.turn_position(store.conn, last)
    assert pos == traversal.TurnPosition("2024-05-01T10:02:00", "garden", pos.session_started, 3, 3)
    assert traversal.turn_position(store.conn, 10**9) is None
    ranged = traversal.turns_in_range(store.conn, "2024-05-01T10:01:00", None, None, 10, 0)
    assert (ranged.total, ranged.items) == (2, [middle, last])
    paged = traversal.turns_in_range(store.conn, None, "2024-05-01T23:59:59", "garden", 1, 1)
    assert (paged.total, paged.items) == (3, [middle])
    summaries = traversal.session_summaries(store.conn, 10, 0)
    assert summaries.total == 2 and {s.key: s.turns for s in summaries.items} == {"garden": 3, "notes": 1}
    assert traversal.session_started(store.conn, "test", "garden") == "2024-05-01T10:00:00"
    assert traversal.session_started(store.conn, "mcp", "garden") is None


def test_cue_reads_find_statement_cues_by_text_and_words(store: Store) -> None:
    _fill(store)
    cues = traversal.cues_of_turn(store.conn, traversal.turns_of_sessions(store.conn, [1], 1, 0).items[0], 10, 0)
    assert cues.total == len(cues.items) >= 1
    cue = cues.items[0]
    assert isinstance(cue, traversal.CueRow) and cue.kind == "statement"
    assert traversal.cue_text(store.conn, cue.id) == cue.text
    assert cue.id in traversal.cue_ids_with_text(store.conn, cue.text.upper())
    hits = traversal.cue_hits(store.conn, [cue.id, 10**9])
    assert list(hits) == [cue.id] and hits[cue.id].speaker == "Maya"
    ranked = traversal.fts_match(store.conn, "cues_fts", '"tomatoes"', 10)
    assert ranked and all(score > 0 for _, score in ranked)
    turns = traversal.turns_of_cues(store.conn, [c for c, _ in ranked])
    assert cue.turn_id in turns and len(turns) == len(set(turns)) == 2  # both tomato turns, once each
    with pytest.raises(ValueError, match="not an FTS table"):
        traversal.fts_match(store.conn, "turns", '"x"', 1)
    assert traversal.tag_counts(store.conn, [cue.id]) == []  # statement cues carry no tags


def test_empty_layers_read_as_empty(store: Store) -> None:
    _fill(store)
    assert topic_reads.person_aspects(store.conn, "maya") == []
    assert topic_reads.person_facts(store.conn, "Maya", None, 10, 0) == traversal.Counted(0, [])
    assert topic_reads.topics(store.conn, None, "50%_off", 10, 0) == traversal.Counted(0, [])
    assert topic_reads.topic_kind(store.conn, 1) is None and not topic_reads.topic_exists(store.conn, 1)


def test_view_reads(store: Store) -> None:
    _fill(store)
    timeline = browse.sessions(store.conn, {}, 10, 0)
    assert [s.key for s in timeline.items] == ["garden", "notes"]  # the undated session last
    garden = timeline.items[0].id
    assert views.opening_turns(store.conn, [garden]) == {garden: ("Maya", "I planted tomatoes today.")}
    turns = browse.session_window(store.conn, garden, 0, 10).items
    assert [t.ord for t in turns] == sorted(t.ord for t in turns) and len(turns) == 3
    meta = views.turn_meta(store.conn, turns[1].id)
    assert (meta.session_key, meta.source, meta.speaker) == ("garden", "test", "Leo")
    edges = views.turn_edges(store.conn, turns[1].id)
    assert {e.direction for e in edges} == {"in", "out"}  # temporal edges both ways
    assert views.turn_previews(store.conn, [turns[0].id])[turns[0].id].text == "I planted tomatoes today."
    assert views.session_head(store.conn, garden) is not None
    assert views.turn_enrichment(store.conn, turns[0].id) is None
    assert {(j.kind, j.state) for j in views.job_counts(store.conn)} == {("extract", "pending")}
    assert views.running_jobs(store.conn) == []
    assert views.engine().sqlite_vec.startswith("v")


def test_export_rows_stream_in_session_order_and_flag_untimed_sessions(store: Store) -> None:
    _fill(store)
    rows = list(export_rows.export_rows(store.conn))
    assert [r.session_key for r in rows] == ["garden"] * 3 + ["notes"]
    assert [r.text for r in export_rows.export_rows(store.conn, since="2024-05-01T10:01:00")] == [
        "Tomatoes need sun.",
        "And water.",
    ]
    assert not export_rows.has_untimed_turn(store.conn, rows[0].session_id)
    untimed = store.write([TurnIn("no time", "Maya", timestamp=None)], "bare", source="test", started_at=None)
    assert untimed.turn_ids
    bare = next(r for r in export_rows.export_rows(store.conn, session="bare"))
    assert export_rows.has_untimed_turn(store.conn, bare.session_id) == (bare.ts is None)


def _row(path: str, *, offset: int = 10, complete: bool = False, fp: str = "f1") -> ingest_files.IngestFile:
    return ingest_files.IngestFile(path, "jsonl", "", 100, 5, fp, offset, 2, 3, "h", complete)


def test_ingest_files_save_updates_in_place_and_move_replaces_the_destination(store: Store) -> None:
    ingest_files.save(store.conn, _row("/a"))
    ingest_files.save(store.conn, _row("/a", offset=20, complete=True))
    assert ingest_files.for_path(store.conn, "/a") == [_row("/a", offset=20, complete=True)]
    assert ingest_files.get(store.conn, "/a", "jsonl", "") == _row("/a", offset=20, complete=True)
    assert ingest_files.get(store.conn, "/a", "chatgpt", "") is None
    ingest_files.save(store.conn, _row("/b", fp="f2"))
    assert ingest_files.complete_with_fingerprint(store.conn, "f1", 100) == [_row("/a", offset=20, complete=True)]
    assert ingest_files.complete_with_fingerprint(store.conn, "f2", 100) == []  # /b is not complete
    assert ingest_files.move(store.conn, "/nowhere", "/b") == 0
    assert ingest_files.for_path(store.conn, "/b") == [_row("/b", fp="f2")]  # untouched
    assert ingest_files.move(store.conn, "/a", "/b") == 1
    assert ingest_files.for_path(store.conn, "/a") == []
    assert ingest_files.for_path(store.conn, "/b") == [_row("/b", offset=20, complete=True)]
