"""`localmem recall`, the hook entry point, as a hook runs it (a real process, the payload
on stdin): a bad payload is one line naming stdin and the field, exit 3; a blank prompt
prints nothing; a question prints the context `query` prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "localmem" / "data" / "sample_conversation.jsonl"


def recall(db: Path, payload: bytes, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "recall", *args],
        input=payload,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        (b"\xff\xfe{}", "stdin: not UTF-8 text"),
        (b"{not json", "stdin at line 1: invalid JSON"),
        (b"[1, 2]", "stdin: the payload must be a JSON object"),
        (b'{"text": "hi"}', 'stdin: the payload needs a string field "query" (or "prompt")'),
        (b'{"query": "hi", "budget": "9"}', 'stdin: "budget" must be an integer'),
        (b'{"query": "hi", "as_of": 5}', 'stdin: "as_of" must be a string'),
    ],
)
def test_a_bad_payload_is_one_line(tmp_path: Path, payload: bytes, says: str) -> None:
    proc = recall(tmp_path / "none.db", payload)
    err = proc.stderr.decode()
    assert proc.returncode == 3 and says in err and err.count("\n") == 1 and not proc.stdout, err
    assert not (tmp_path / "none.db").exists()  # refused before any store is opened


def test_a_blank_prompt_prints_nothing(tmp_path: Path) -> None:
    proc = recall(tmp_path / "none.db", b'{"prompt": "  \\n", "session_id": "x"}')
    assert proc.returncode == 0 and proc.stdout == b"" and proc.stderr == b""


def test_recall_prints_what_query_prints(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    ingest = [sys.executable, "-m", "localmem", "--db", str(db), "ingest", str(SAMPLE)]
    subprocess.run(ingest, check=True, capture_output=True, timeout=300)
    question = "Which shoes did Maya switch to?"
    proc = recall(db, json.dumps({"prompt": question, "budget": 150, "cwd": "/x"}).encode())
    query = [sys.executable, "-m", "localmem", "--db", str(db), "query", question, "--budget", "150"]
    expected = subprocess.run(query, check=True, capture_output=True, timeout=300).stdout
    assert proc.returncode == 0 and proc.stdout == expected and b"Brooks Ghost" in proc.stdout
    nothing = recall(db, json.dumps({"query": "zyxwvut qqqq"}).encode(), "--json")
    out = json.loads(nothing.stdout)
    assert out["via"] == "in-process" and set(out["context"]) >= {"text", "tokens", "turns"}
