"""``bench scale``'s synthetic stores and the ``bench scale`` / ``bench ingest`` commands."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from localmem.bench import scale, synthetic
from localmem.cli import build_parser
from localmem.config import Settings
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.engine import db
from localmem.storage.write.store import Store
from tests.helpers.cli import run as run_cli
from tests.helpers.fakes import HashEmbedder
from tests.helpers.files import fs_type

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"


def _rows(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]], list[tuple[object, ...]]]:
    conn = db.connect(path, readonly=True)
    try:
        turns = conn.execute(
            "SELECT s.source, s.key, s.started_at, t.ord, t.speaker, t.role, t.text, t.ts, t.hash, t.words "
            "FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.id"
        ).fetchall()
        cues = conn.execute(
            "SELECT t.hash, c.kind, c.text, c.span_start, c.span_end FROM cues c JOIN turns t ON t.id = c.turn_id "
            "ORDER BY c.id"
        ).fetchall()
        temporal = conn.execute(
            "SELECT a.hash, b.hash, round(e.weight, 6) FROM edges e JOIN turns a ON a.id = e.src "
            "JOIN turns b ON b.id = e.dst WHERE e.kind = 'temporal' ORDER BY a.hash, b.hash"
        ).fetchall()
        return turns, cues, temporal
    finally:
        conn.close()


def test_synthetic_store_holds_the_rows_the_write_path_makes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(synthetic, "CHUNK_TURNS", 100)  # several chunks: ids and edge rings carried over
    emb = HashEmbedder()
    path = tmp_path / "synthetic.db"
    assert synthetic.build(path, 400, emb, Settings(db=path)) > 0

    # The same generated sessions written by the real write path give the same rows.
    real = tmp_path / "real.db"
    with Store(real, embedder=emb, settings=Settings(db=real)) as store:
        store.write_sessions([s for s, _topics in synthetic.Synth(emb.dim).sessions(400)])
    assert _rows(path) == _rows(real)

    conn = db.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        for fts in ("turns_fts", "cues_fts"):
            conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('integrity-check')")  # raises if corrupt

        def n(sql: str) -> int:
            return int(conn.one(sql)[0])

        assert n("SELECT count(*) FROM turns") == 400
        assert n("SELECT count(*) FROM turn_vec") == 400 == n("SELECT count(*) FROM jobs WHERE kind = 'extract'")
        assert n("SELECT count(*) FROM cue_vec") == n("SELECT count(*) FROM cues")
        # the mirrors' code tables are filled by the vector tables' triggers, as on the write path
        assert n("SELECT count(*) FROM turn_codes") == 400
        assert n("SELECT count(*) FROM cue_codes") == n("SELECT count(*) FROM cues")
        assert 1.5 < n("SELECT count(*) FROM cues") / 400 < 2.1  # ~1.8 statement cues per turn
        # semantic edges join two different turns, lower id first, weight a cosine
        bad = "SELECT count(*) FROM edges WHERE kind = 'semantic' AND (src >= dst OR weight > 1.0001 OR weight < -1)"
        assert n("SELECT count(*) FROM edges WHERE kind = 'semantic'") > 400 and n(bad) == 0
        vec = np.frombuffer(bytes(conn.one("SELECT embedding FROM cue_vec WHERE cue_id = 1")[0]), dtype=np.float32)
        assert vec.shape == (emb.dim,) and abs(float(np.linalg.norm(vec)) - 1) < 1e-4
        assert conn.one("SELECT value FROM meta WHERE key = 'embedder_id'")[0] == emb.model_id
    finally:
        conn.close()


def test_synthetic_vectors_cluster_by_topic() -> None:
    synth = synthetic.Synth(384)
    topics = np.repeat(np.arange(20), 30)
    v = synth.turn_vectors(topics)
    sims = v @ v.T
    same = topics[:, None] == topics[None, :]
    np.fill_diagonal(same, False)
    other = topics[:, None] != topics[None, :]
    assert 0.4 < sims[same].mean() < 0.75  # neighbours share a topic...
    assert 0.05 < sims[other].mean() < 0.3  # ...others are far, not orthogonal noise
    cues = synth.cue_vectors(v)
    assert 0.6 < float(np.mean(np.sum(cues * v, axis=1))) < 0.9


def test_reconstruct_answers_on_a_synthetic_store_and_a_kept_store_is_reused(tmp_path: Path) -> None:
    emb = HashEmbedder()
    path = tmp_path / "s.db"
    settings = Settings(db=path)
    assert synthetic.build(path, 300, emb, settings) > 0
    assert synthetic.build(path, 300, emb, settings) == 0.0  # same recipe: kept
    queries = scale.queries_for(path, 3)
    assert len(queries) == 3 and all(q.startswith("What did ") for q in queries)
    with Store(path, embedder=emb, settings=settings) as store:
        ctx = reconstruct(store, queries[0], 300)
        assert ctx.turns and all(t.text and t.tokens > 0 for t in ctx.turns)
    assert synthetic.build(path, 200, emb, settings) > 0  # another size: rebuilt
    conn = db.connect(path, readonly=True)
    assert int(conn.one("SELECT count(*) FROM turns")[0]) == 200
    conn.close()


def test_bench_scale_prints_its_table(tmp_path: Path) -> None:
    args = ["--turns", "2000", "--queries", "5", "--cache", "as-is", "--workdir", str(tmp_path), "--json"]
    proc = run_cli("bench", "scale", *args)
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("scale (") and "p50_ms" in lines[1] and "rss_mb" in lines[1]
    assert lines[3].split("|")[0].strip() == "2000"
    (row,) = json.loads(lines[-1])["rows"]
    assert "error" not in row, row
    assert row["cache"] == "as-is" and 0 <= row["cached_pct"] <= 100
    assert row["turns"] == 2000 and 0 < row["p50_ms"] <= row["p95_ms"]
    assert row["rss_mb"] > row["mirror_mb"] > 0 and row["db_mb"] > 0 and row["build_s"] > 0
    # memory split: private + file-backed pages make up the resident set; idle = after the first query
    assert 0 < row["idle_mb"] <= row["rss_mb"] and row["anon_mb"] > 0 and row["file_mb"] > 0
    assert row["anon_mb"] + row["file_mb"] <= row["rss_mb"] + 1
    # every stage of a query was timed, and the stages make up most of it
    stages = row["stages_ms"]
    assert set(stages) == set(scale.STAGES) and min(stages.values()) >= 0
    assert min(stages[k] for k in ("embed", "lexical", "dense", "features", "pack")) > 0  # each one really timed
    assert 0.5 * row["p50_ms"] < sum(stages.values()) < 1.5 * row["p95_ms"]
    assert "median ms per query by stage" in proc.stdout
    # a real MCP server answered over stdio and was measured idle: the query process plus the SDK
    assert "mcp_error" not in row, row
    assert row["mcp_idle_mb"] > row["mirror_mb"] and row["mcp_peak_mb"] >= row["mcp_idle_mb"] > row["idle_mb"] - 50
    assert "mcp_idle_mb" in lines[1]


def test_bench_scale_serves_each_size_once_per_cache_mode(tmp_path: Path) -> None:
    args = ["--turns", "300", "--queries", "3", "--cache", "warm,cold", "--workdir", str(tmp_path), "--json"]
    proc = run_cli("bench", "scale", *args, "--no-mcp")
    lines = proc.stdout.strip().splitlines()
    result = json.loads(lines[-1])
    assert result["cache"] == ["warm", "cold"]
    warm, cold = result["rows"]
    assert "error" not in warm and "error" not in cold, result["rows"]
    assert (warm["turns"], warm["cache"]) == (300, "warm") and (cold["turns"], cold["cache"]) == (300, "cold")
    assert warm["queries"] == cold["queries"] == 3 and warm["db_mb"] == cold["db_mb"]
    assert "mcp_idle_mb" not in warm and "mcp_idle_mb" not in cold  # --no-mcp
    assert warm["cached_pct"] == 100.0  # the whole file was read just before
    if fs_type(tmp_path) not in ("tmpfs", "ramfs"):  # a file in memory only cannot be evicted
        assert cold["cached_pct"] == 0.0
    # the table and the stage table say each row's mode
    header = [c.strip() for c in lines[1].split("|")]
    assert header[:3] == ["turns", "cache", "cached_pct"]
    assert [[c.strip() for c in line.split("|")][:2] for line in lines[3:5]] == [["300", "warm"], ["300", "cold"]]
    stage_head = lines.index("median ms per query by stage")
    assert [c.strip() for c in lines[stage_head + 1].split("|")][:2] == ["turns", "cache"]
    assert [line.split("|")[1].strip() for line in lines[stage_head + 2 : stage_head + 4]] == ["warm", "cold"]


def test_bench_scale_rejects_an_unknown_cache_mode(tmp_path: Path) -> None:
    assert build_parser().parse_args(["bench", "scale"]).cache == "warm,cold"
    for value, says in (("warm,hot", "unknown mode 'hot'"), (",", "no mode")):
        bad = run_cli("bench", "scale", "--turns", "300", "--cache", value, "--workdir", str(tmp_path), check=False)
        assert bad.returncode == 3 and "Traceback" not in bad.stderr, bad.stderr
        assert f"--cache must be a comma list of warm, cold, as-is; {says}" in bad.stderr
    assert not list(tmp_path.iterdir())  # rejected before any store was built


def test_bench_ingest_prints_its_table(tmp_path: Path) -> None:
    data = DATA / "chatgpt_conversations.json"
    proc = run_cli("bench", "ingest", "--data", str(data), "--workdir", str(tmp_path), "--json")
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("ingest of chatgpt_conversations.json") and "embed_only_turns_per_s" in lines[1]
    result = json.loads(lines[-1])
    assert result["turns"] > 0 and lines[3].split("|")[0].strip() == str(result["turns"])
    assert result["turns_per_s"] > 0 and result["embed_only_turns_per_s"] > 0 and result["model_turns_per_s"] > 0
    assert result["cpu_s"] > 0 and result["model_cpu_s"] > 0
    # The model runs beside the rest: shares add up to 100 plus the overlap.
    assert abs(sum(result["share"].values()) - result["overlap"] - 100) < 1 and result["share"]["embed"] > 0
    assert min(result["stage_s"].values()) >= 0
    bad = run_cli("bench", "ingest", "--data", str(tmp_path / "missing.json"), check=False)
    assert bad.returncode != 0 and "no such file" in bad.stderr and "Traceback" not in bad.stderr
