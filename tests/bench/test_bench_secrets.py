"""``localmem bench secrets`` through the real CLI: the table and its JSON, chat turns from
small LoCoMo- and LongMemEval-shaped files (a planted secret among them is counted, so the
count can fail), ``--code`` running a source tree's guard in a child process, bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import localmem

ROOT = Path(localmem.__file__).resolve().parents[1]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "localmem", "bench", "secrets", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


def data(tmp_path: Path) -> tuple[Path, Path]:
    turns = [
        {"speaker": "A", "dia_id": "D1:1", "text": "I finally changed my password, it was weak."},
        {"speaker": "B", "dia_id": "D1:2", "text": "Use a password manager! The key is consistency."},
        {"speaker": "A", "dia_id": "D1:3", "text": "ok, the wifi password is Saffron#8505 btw"},
    ]
    locomo = tmp_path / "locomo.json"
    locomo.write_text(json.dumps([{"sample_id": "x", "conversation": {"session_1": turns}}]))
    session = [
        {"role": "user", "content": "What's a good sourdough hydration?"},
        {"role": "assistant", "content": "Start at 70%; the secret to good bread is time."},
    ]
    lme = tmp_path / "lme.json"
    lme.write_text(json.dumps([{"question_id": "q", "haystack_sessions": [session, session]}]))
    return locomo, lme


def test_the_bench_counts_caught_and_false_positives(tmp_path: Path) -> None:
    locomo, lme = data(tmp_path)
    proc = bench("--locomo", str(locomo), "--longmemeval", str(lme), "--snippets", "60", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    c = result["corpus"]
    assert c["items"] >= 150 and c["kinds"] >= 50 and c["caught"] >= 0.97 * c["items"]
    assert sum(t for _, t in result["forms"].values()) == c["items"]
    assert result["chat"]["locomo"]["turns"] == 3 and result["chat"]["locomo"]["changed"] == 1
    assert result["chat"]["locomo"]["examples"][0].startswith("password: ")
    assert result["chat"]["longmemeval"] == {**result["chat"]["longmemeval"], "turns": 2, "changed": 0}
    assert result["code_snippets"]["snippets"] == 60 and result["code_snippets"]["changed"] == 0
    assert "form" in proc.stdout and "false positives on locomo: 1 of 3" in proc.stdout


def test_code_runs_that_trees_guard(tmp_path: Path) -> None:
    here = json.loads(bench("--per-kind", "1", "--snippets", "20", "--json").stdout.splitlines()[-1])
    proc = bench("--per-kind", "1", "--snippets", "20", "--code", str(ROOT), "--json")
    assert proc.returncode == 0, proc.stderr
    there = json.loads(proc.stdout.splitlines()[-1])
    assert there["code"] == str(ROOT) and there["forms"] == here["forms"]
    # a tree whose guard redacts nothing: every item missed, read through the child process
    fake = tmp_path / "old"
    (fake / "localmem" / "util" / "secrets").mkdir(parents=True)
    (fake / "localmem" / "__init__.py").write_text("")
    (fake / "localmem" / "util" / "__init__.py").write_text("")
    (fake / "localmem" / "util" / "secrets" / "__init__.py").write_text("def redact(t):\n    return t\n")
    none = json.loads(
        bench("--per-kind", "1", "--snippets", "5", "--code", str(fake), "--json").stdout.splitlines()[-1]
    )
    assert none["corpus"]["caught"] == 0


def test_bad_input_is_refused(tmp_path: Path) -> None:
    proc = bench("--code", str(tmp_path))
    assert proc.returncode != 0 and "no localmem package" in proc.stderr
    proc = bench("--locomo", str(tmp_path / "missing.json"))
    assert proc.returncode != 0 and "no such file" in proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    proc = bench("--longmemeval", str(bad))
    assert proc.returncode != 0 and "cannot read" in proc.stderr
