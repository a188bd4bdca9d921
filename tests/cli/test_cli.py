"""The CLI through real subprocesses, with the real default embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from localmem.cli import build_parser
from tests.helpers.benchdata import locomo_doc
from tests.helpers.cli import run

SAMPLE = Path(__file__).resolve().parents[2] / "localmem" / "data" / "sample_conversation.jsonl"


def test_ingest_query_stats_roundtrip(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    summary = json.loads(run("ingest", str(SAMPLE), "--json", db=db).stdout)
    assert summary["format"] == "jsonl" and summary["new"] == summary["turns"] > 20
    again = json.loads(run("ingest", str(SAMPLE), "--json", db=db).stdout)
    assert again["new"] == 0 and again["already_present"] == summary["turns"]

    res = json.loads(run("query", "Which shoes did Maya switch to?", "--budget", "120", "--json", db=db).stdout)
    assert res["tokens"] <= 120
    assert any("Brooks Ghost" in t["text"] for t in res["turns"])
    assert {"turn_id", "source_id", "session", "timestamp", "speaker", "text", "reason", "score"} <= set(
        res["turns"][0]
    )

    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["turns"] == summary["turns"] and stats["cues"]["statement"] >= stats["turns"]
    assert "turns" in run("stats", db=db).stdout


def test_query_batch_and_as_of(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    run("ingest", str(SAMPLE), db=db)
    batch = tmp_path / "q.jsonl"
    batch.write_text(
        json.dumps({"query": "Who goes to Lisbon with Maya?"})
        + "\n"
        + json.dumps({"query": "knee pain", "as_of": "2024-04-01"})
        + "\n",
        "utf-8",
    )
    lines = run("query", "--batch", str(batch), "--json", db=db).stdout.strip().splitlines()
    assert len(lines) == 2
    second = json.loads(lines[1])
    assert second["turns"] and all(t["timestamp"] < "2024-04-01" for t in second["turns"])


def test_user_errors_are_one_clear_line(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    proc = run("ingest", str(tmp_path / "missing.jsonl"), db=db, check=False)
    assert proc.returncode == 3 and "missing.jsonl" in proc.stderr and "Traceback" not in proc.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": \n', "utf-8")
    proc = run("ingest", str(bad), db=db, check=False)
    assert proc.returncode == 3 and "line 2" in proc.stderr and "Traceback" not in proc.stderr
    proc = run("query", "x", "--as-of", "someday", db=db, check=False)
    assert proc.returncode == 3 and "as_of" in proc.stderr


def test_doctor_and_demo(tmp_path: Path) -> None:
    checks = json.loads(run("doctor", "--json", db=tmp_path / "m.db").stdout)
    assert all(c["ok"] for c in checks), checks
    out = run("demo").stdout
    assert "Lisbon half marathon" in out and "tokens" in out


@pytest.mark.parametrize("methods", ["bm25,rrf,localmem"])
def test_bench_locomo_json(tmp_path: Path, methods: str) -> None:
    doc = locomo_doc()
    doc[0]["qa"] = [
        {"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Rex learn?", "answer": "sit", "evidence": ["D2:1; D1:1"], "category": 1},
        {"question": "adversarial", "adversarial_answer": "x", "evidence": ["D1:1"], "category": 5},
        {"question": "no evidence", "answer": "x", "evidence": ["D"], "category": 4},
    ]
    data = tmp_path / "lo.json"
    data.write_text(json.dumps(doc), "utf-8")
    proc = run(
        "bench",
        "locomo",
        "--data",
        str(data),
        "--budgets",
        "20,500",
        "--methods",
        methods,
        "--workdir",
        str(tmp_path / "w"),
        "--json",
    )
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["questions"] == 2 and result["skipped_no_evidence"] == 1
    rows = {(r["method"], r["budget"]): r for r in result["rows"]}
    assert rows[("localmem", 500)]["all"] == 100.0  # the whole conversation fits in 500 tokens
    assert "multi-hop" in proc.stdout


def _two_questions(tmp_path: Path) -> Path:
    """locomo_doc with a single-hop question (evidence D1:1) and a multi-hop one (D2:1, D1:1)."""
    doc = locomo_doc()
    doc[0]["qa"] = [
        {"question": "What is the name of Ann's puppy?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
        {"question": "What did Rex learn?", "answer": "sit", "evidence": ["D2:1; D1:1"], "category": 1},
    ]
    data = tmp_path / "lo.json"
    data.write_text(json.dumps(doc), "utf-8")
    return data


def test_bench_locomo_losses_name_a_fate_for_every_missed_turn(tmp_path: Path) -> None:
    data = _two_questions(tmp_path)
    args = ["bench", "locomo", "--losses", "--data", str(data), "--workdir", str(tmp_path / "w")]
    proc = run(*args, "--budgets", "12,500", "--json")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["evidence"] == {"single-hop": 1, "multi-hop": 2}
    found = {(r["type"], r["budget"]): r["found"] for r in result["found"]}
    assert found[("single-hop", 500)] == 1 and found[("multi-hop", 500)] == 2  # all three turns fit in 500
    # 12 tokens hold no turn line at all: every evidence turn is lost, each with one fate.
    assert found[("single-hop", 12)] == 0 and found[("multi-hop", 12)] == 0
    at12 = [r for r in result["lost"] if r["budget"] == 12]
    assert len(at12) == 3 and all(r["fate"] == "scored low" for r in at12)
    assert "Where the evidence is lost, LoCoMo" in proc.stdout
    bad = run(*args, "--mode", "explore", check=False)
    assert bad.returncode == 3 and "--losses" in bad.stderr


def test_embedder_flag_is_used_and_checked(tmp_path: Path) -> None:
    proc = run("--embedder", str(tmp_path / "missing.gguf"), "doctor", "--json", db=tmp_path / "m.db", check=False)
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    assert proc.returncode == 1 and not checks["embedder"]["ok"] and "missing.gguf" in checks["embedder"]["detail"]


def test_bench_locomo_sessions_keeps_questions_inside_them(tmp_path: Path) -> None:
    data = _two_questions(tmp_path)
    args = ["bench", "locomo", "--data", str(data), "--budgets", "500", "--methods", "localmem"]
    proc = run(*args, "--sessions", "1", "--workdir", str(tmp_path / "w"), "--json")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["questions"] == 1 and result["sessions"] == 1
    assert "first 1 sessions" in proc.stdout
    assert (tmp_path / "w" / "locomo-conv-x-s1.db").exists()
    bad = run(*args, "--sessions", "0", check=False)
    assert bad.returncode != 0 and "--sessions must be positive" in bad.stderr


def test_cable_flags_reach_the_read_path(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    run("ingest", str(SAMPLE), db=db)
    on = json.loads(run("query", "half marathon", "--json", db=db).stdout)
    off = json.loads(run("query", "half marathon", "--no-cable", "--json", db=db).stdout)
    assert on["stats"]["antecedent"] == off["stats"]["antecedent"] == 0  # no links without a model
    bad = run("query", "half marathon", "--cable-budget", "-1", db=db, check=False)
    assert bad.returncode != 0 and "cable_budget" in bad.stderr
    assert "--no-verification" in run("enrich", "--help").stdout
    from localmem.cli import cable_flags
    from localmem.config import Settings

    serve = build_parser().parse_args(["serve", "--cable"])
    assert cable_flags.apply(serve, Settings()).cable.enabled is True
    stats = json.loads(run("stats", "--json", db=db).stdout)["enrichment"]["antecedent"]
    assert stats["construction_enabled"] is False and stats["edges"] == 0
    assert "construction off" in run("stats", db=db).stdout
