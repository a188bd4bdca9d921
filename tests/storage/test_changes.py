"""The one door for changes (localmem/storage/write/changes.py): every change to the facts made
through the public paths leaves exactly one journal row, keyed by content identity, whose
data replays it without local rowids; derived rows leave none; a rolled-back transaction
leaves none. Real SQLite throughout; only the models are faked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.config import CableParams
from localmem.enrichment.enrich import enrich_jobs
from localmem.enrichment.themes import run_themes
from localmem.enrichment.worker import run_topics, run_worker
from localmem.memory import Memory
from localmem.records import SessionIn, TurnIn
from localmem.storage.engine import db
from localmem.storage.layers.queue import claim
from localmem.storage.write.changes import cue_key, session_key
from localmem.storage.write.store import Store
from tests.helpers.cable import CableFake, Enriching, make_store
from tests.helpers.fakes import ScriptedGenerator, session
from tests.helpers.themes import ConceptEmbedder, six_sessions

Row = dict[str, Any]


def journal(store: Store, *kinds: str) -> list[Row]:
    marks = ",".join("?" * len(kinds))
    where = f"WHERE kind IN ({marks})" if kinds else ""
    rows = store.conn.execute(
        f"SELECT seq, kind, key, model, origin, data, at FROM changes {where} ORDER BY seq", kinds
    )
    return [
        {
            "seq": s,
            "kind": k,
            "key": key,
            "model": m,
            "origin": o,
            "data": None if d is None else json.loads(d),
            "at": a,
        }
        for s, k, key, m, o, d, a in rows
    ]


def hashes(store: Store, where: str = "1", args: tuple[Any, ...] = ()) -> dict[int, str]:
    rows = store.conn.execute(
        f"SELECT t.id, t.hash FROM turns t JOIN sessions s ON s.id = t.session_id WHERE {where}", args
    )
    return {int(i): str(h) for i, h in rows}


# -- sessions, turns, forget -------------------------------------------------------------


def test_write_journals_each_new_session_and_turn_once(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    sessions = journal(store, "session")
    assert [r["key"] for r in sessions] == [session_key("test", s.key) for s in garden_sessions]
    assert sessions[0]["data"] == {"source": "test", "key": "s1", "title": "", "started_at": "2024-01-05T10:00:00"}
    turns = journal(store, "turn")
    assert sorted(r["key"] for r in turns) == sorted(hashes(store).values())  # the content hash, not a rowid
    assert all(r["model"] is None and r["origin"] is None for r in sessions + turns)
    assert all(r["data"] is None for r in turns)  # a turn's own row holds everything
    assert {r["kind"] for r in journal(store)} == {"session", "turn"}  # statement cues, vectors, edges: derived
    assert store.conn.execute("SELECT count(*) FROM cues WHERE kind = 'statement'").fetchone()[0] > 0

    before = len(journal(store))
    store.write_sessions(garden_sessions)  # re-ingest: nothing new, no row
    assert len(journal(store)) == before
    grown = session("s3", "2024-03-15T18:30:00", ("Ana", "Ripe tomatoes at last."))
    store.write_sessions([grown])  # a grown session: one turn row, no session row
    new = journal(store)[before:]
    assert [r["kind"] for r in new] == ["turn"] and new[0]["key"] in hashes(store, "s.key = 's3'").values()


def test_a_session_start_filled_in_later_is_journaled_again(store: Store) -> None:
    store.write([TurnIn(text="no date here", speaker="Ana")], session="undated")
    store.write([TurnIn(text="now with a date", speaker="Ana")], session="undated", started_at="2024-05-01T08:00:00")
    rows = journal(store, "session")
    assert [r["data"]["started_at"] for r in rows] == [None, "2024-05-01T08:00:00"]
    assert rows[0]["key"] == rows[1]["key"] == session_key("api", "undated")


def test_forget_journals_the_hash_of_each_turn_forgotten(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    gone = hashes(store, "s.key = 's1'")
    assert store.forget(session="s1") == 3
    rows = journal(store, "forget")
    assert sorted(r["key"] for r in rows) == sorted(gone.values())
    assert all(r["data"] is None and r["origin"] is None and r["model"] is None for r in rows)
    assert store.forget(session="s1") == 0 and len(journal(store, "forget")) == 3  # nothing left, no row


def test_origin_reaches_the_journal_through_the_facade(tmp_path: Path, embedder: Any) -> None:
    mem = Memory(Store(tmp_path / "m.db", embedder=embedder))
    with mem:
        mem.write([TurnIn(text="folded from the laptop", speaker="Ana")], session="far", origin="laptop-1")
        mem.write([TurnIn(text="made here", speaker="Ana")], session="near")
        assert {(r["kind"], r["origin"]) for r in journal(mem.store)} == {
            ("session", "laptop-1"),
            ("turn", "laptop-1"),
            ("session", None),
            ("turn", None),
        }
        mem.forget(session="far", origin="laptop-1")
        assert [(r["kind"], r["origin"]) for r in journal(mem.store, "forget")] == [("forget", "laptop-1")]


def test_a_rolled_back_write_leaves_no_journal_row(store: Store, garden_sessions: list[SessionIn]) -> None:
    # A fault planted in SQLite itself: the second session's last turn cannot be stored.
    store.conn.execute(
        "CREATE TEMP TRIGGER boom BEFORE INSERT ON turns WHEN new.text LIKE 'I took the bike%' "
        "BEGIN SELECT RAISE(ABORT, 'planted fault'); END"
    )
    with pytest.raises(apsw.ConstraintError, match="planted fault"):
        store.write_sessions(garden_sessions)
    assert journal(store) == [] and store.conn.execute("SELECT count(*) FROM turns").fetchone()[0] == 0
    store.conn.execute("DROP TRIGGER temp.boom")
    store.write_sessions(garden_sessions)
    assert len(journal(store, "turn")) == 8


# -- model-derived: cues, antecedent edges, topics and themes -----------------------------


def test_extraction_journals_cues_with_spans_tags_and_model(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    before = len(journal(store))
    gen = ScriptedGenerator()
    enriched_now = 0
    while jobs := claim(store.conn, 20):  # one session's turns per claim
        enriched_now += enrich_jobs(store, gen, jobs)
    assert enriched_now == 8
    turn_hash = hashes(store)
    stored = {
        (turn_hash[int(t)], k, x, int(a), int(b), tags or "")
        for t, k, x, a, b, tags in store.conn.execute(
            "SELECT c.turn_id, c.kind, c.text, c.span_start, c.span_end, "
            "(SELECT group_concat(g.name, ',') FROM (SELECT g.name FROM cue_tags x JOIN tags g ON g.id = x.tag_id "
            "WHERE x.cue_id = c.id ORDER BY g.name) g) FROM cues c WHERE c.kind != 'statement'"
        )
    }
    assert stored  # the scripted model found keywords
    cues = journal(store, "cue")
    # the journal alone rebuilds every extracted cue, its span and its tags
    replayed = {
        (d["turn"], d["kind"], d["text"], d["span"][0], d["span"][1], ",".join(sorted(d["tags"])))
        for d in (r["data"] for r in cues)
    }
    assert replayed == stored and len(cues) == len(stored)
    assert all(r["key"] == cue_key(r["data"]["turn"], r["data"]["kind"], r["data"]["text"]) for r in cues)
    assert all(r["model"] == gen.model_id and r["origin"] is None for r in cues)
    enriched = journal(store, "enrichment")
    assert sorted(r["key"] for r in enriched) == sorted(turn_hash.values())
    types = dict(
        store.conn.execute("SELECT t.hash, e.memory_type FROM turn_enrichment e JOIN turns t ON t.id = e.turn_id")
    )
    assert {r["key"]: r["data"]["memory_type"] for r in enriched} == types
    assert {r["kind"] for r in journal(store)[before:]} == {"cue", "enrichment"}  # FTS, vectors, jobs: derived
    # nothing left to do: no new row
    n = len(journal(store))
    assert enrich_jobs(store, gen, claim(store.conn, 20)) == 0 and len(journal(store)) == n


def test_a_rolled_back_extraction_leaves_no_journal_row(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    before = journal(store)
    store.conn.execute(
        "CREATE TEMP TRIGGER boom BEFORE INSERT ON cue_vec BEGIN SELECT RAISE(ABORT, 'planted fault'); END"
    )
    with pytest.raises(apsw.ConstraintError, match="planted fault"):
        enrich_jobs(store, ScriptedGenerator(), claim(store.conn, 20))
    assert journal(store) == before
    assert store.conn.execute("SELECT count(*) FROM cues WHERE kind != 'statement'").fetchone()[0] == 0


def test_antecedent_edges_are_journaled_with_their_reason(tmp_path: Path) -> None:
    fake = CableFake(queries=lambda text: ["Seattle job offer"], accept=lambda cur, old: "Seattle" in old)
    with make_store(tmp_path, CableParams(enabled=True, kb=1)) as store:
        run_worker(store, Enriching(fake), until_empty=True)  # type: ignore[arg-type]
        turn_hash = hashes(store)
        edges = {
            (turn_hash[int(s)], turn_hash[int(d)], float(w), str(r))
            for s, d, w, r in store.conn.execute("SELECT src, dst, weight, reason FROM edges WHERE kind = 'antecedent'")
        }
        assert edges
        rows = journal(store, "antecedent")
        assert {(r["data"]["src"], r["data"]["dst"], r["data"]["weight"], r["data"]["reason"]) for r in rows} == edges
        assert all(r["key"] == f"{r['data']['src']}>{r['data']['dst']}" for r in rows)
        assert all(r["model"] == "test-enriching" and r["data"]["reason"].startswith("because") for r in rows)
        semantic = store.conn.execute("SELECT count(*) FROM edges WHERE kind != 'antecedent'").fetchone()[0]
        assert semantic > 0 and len(rows) == len(edges)  # temporal and semantic edges: derived


def replay_topics(rows: list[Row]) -> dict[str, tuple[str, str, set[str], set[str]]]:
    """Topic key -> (kind, label, member turn hashes, grouped topic keys), from the journal
    alone: topic rows, removals, and forgets (a forgotten turn leaves every topic; a topic
    left without turns goes, as its cascade does)."""
    out: dict[str, tuple[str, str, set[str], set[str]]] = {}
    for r in rows:
        if r["kind"] == "topic_removed":
            out.pop(r["key"], None)
        elif r["kind"] == "forget":
            out = {k: (a, b, t - {r["key"]}, g) for k, (a, b, t, g) in out.items()}
            out = {k: v for k, v in out.items() if v[2]}
        else:
            d = r["data"]
            _k, _l, turns, topics = out.get(r["key"], ("", "", set(), set()))
            out[r["key"]] = (
                d["kind"],
                d["label"],
                (turns | set(d["add"])) - set(d["remove"]),
                topics | set(d["topics"]),
            )
    known = set(out)
    return {k: (a, b, t, g & known) for k, (a, b, t, g) in out.items()}


def stored_topics(store: Store) -> dict[str, tuple[str, str, set[str], set[str]]]:
    out: dict[str, tuple[str, str, set[str], set[str]]] = {}
    for tid, key, kind, label in store.conn.execute("SELECT id, key, kind, label FROM topics").fetchall():
        turns = {
            str(r[0])
            for r in store.conn.execute(
                "SELECT t.hash FROM topic_turns x JOIN turns t ON t.id = x.turn_id WHERE x.topic_id = ?", (tid,)
            )
        }
        grouped = {
            str(r[0])
            for r in store.conn.execute(
                "SELECT p.key FROM theme_topics x JOIN topics p ON p.id = x.topic_id WHERE x.theme_id = ?", (tid,)
            )
        }
        out[str(key)] = (str(kind), str(label), turns, grouped)
    return out


def test_topics_and_themes_replay_from_the_journal(tmp_path: Path) -> None:
    def script(lines: list[tuple[int, str, str]]) -> dict[str, str]:
        return {"label": "a theme" if lines else "a chat", "summary": "about things"}

    with Store(tmp_path / "t.db", embedder=ConceptEmbedder()) as store:
        store.write_sessions(six_sessions())
        gen = ScriptedGenerator(script)
        stats = run_topics(store, gen)
        assert stats.themes is not None and stats.themes.themes_created == 2
        rows = journal(store, "topic", "topic_removed")
        assert replay_topics(rows) == stored_topics(store)
        assert {r["data"]["kind"] for r in rows} == {"session", "theme"}
        assert all(r["model"] == gen.model_id for r in rows)  # every label came from the model
        # a theme that no longer recurs is dissolved: a removal keyed like its making
        themes = {k for k, v in stored_topics(store).items() if v[0] == "theme"}
        store.forget(session="s5")
        later = run_topics(store)  # keyword labels now: no model
        assert later.themes is not None and later.themes.themes_dissolved == 1
        removed = journal(store, "topic_removed")
        assert len(removed) == 1 and removed[0]["key"] in themes and removed[0]["data"] is None
        assert replay_topics(journal(store, "topic", "topic_removed", "forget")) == stored_topics(store)
        assert all(r["model"] is None for r in journal(store, "topic")[len(rows) :])


def test_a_theme_pass_that_meets_a_concurrent_change_journals_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "t.db", embedder=ConceptEmbedder()) as store:
        store.write_sessions(six_sessions())
        run_topics(store, themes=False)
        before = journal(store)

        def meddle(lines: list[tuple[int, str, str]]) -> dict[str, str]:
            other = db.connect(tmp_path / "t.db")
            other.execute("UPDATE topics SET updated_at = '2030-01-01T00:00:00' WHERE id = 1")
            other.close()
            return {"label": "x", "summary": "y"}

        assert run_themes(store, ScriptedGenerator(meddle)).conflicts == 1
        assert journal(store) == before


# -- the door is the only one ------------------------------------------------------------

FACT_WRITES = re.compile(
    r"(INSERT\s+(OR\s+\w+\s+)?INTO\s+(sessions|turns|turn_enrichment|cue_tags|tags|topics|topic_turns|theme_topics)\b"
    r"|(UPDATE|DELETE\s+FROM)\s+(sessions|turns|turn_enrichment|cues|cue_tags|topics|topic_turns|theme_topics)\b"
    r"|INSERT\s+(OR\s+\w+\s+)?INTO\s+cues\b(?![^\"]*'statement')"
    r"|INTO\s+edges\b[^\"]*antecedent)",
    re.IGNORECASE,
)
# What may write a fact table besides the door: the theme pass's local work marker, a
# redaction moving the original turn out of its place for the redacted one (the door
# forgets that row in the same transaction; a place is not journaled), and the benchmarks'
# synthetic stores, built in bulk without a journal (never user data).
ALLOWED = {
    ("localmem/storage/layers/topics.py", "UPDATE topics SET themed = 1"),
    ("localmem/storage/write/rewrite.py", "UPDATE turns SET ord = -1 - ord WHERE id = ?"),
    ("localmem/bench/latency.py", "'antecedent', 0.8, 'synthetic'"),
}
UNJOURNALED = re.compile(r"synthetic")


def test_only_the_door_writes_the_facts() -> None:
    root = Path(__file__).resolve().parents[2]
    found = []
    for path in sorted((root / "localmem").rglob("*.py")) + sorted((root / "mcp_server").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "localmem/storage/write/changes.py" or UNJOURNALED.search(path.name):
            continue
        for line in path.read_text("utf-8").splitlines():
            if FACT_WRITES.search(line) and not any(rel == f and snippet in line for f, snippet in ALLOWED):
                found.append(f"{rel}: {line.strip()}")
    assert found == [], "a change to the facts outside localmem/storage/write/changes.py:\n" + "\n".join(found)
