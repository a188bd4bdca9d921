"""Bounded work per write: the turn-size cap in every path (refused with the file and the
line or JSON path; ``--skip-bad`` steps over just that unit), over-long JSON Lines lines
refused without being read whole, statement cues deduplicated and capped, ingest batches
cut into short transactions, and a zero-turn ingest (a wrong ``--format``) refused."""

from __future__ import annotations

import json
import subprocess
import time
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localmem.errors import InputError
from localmem.ingest import load, runner
from localmem.ingest._units import TURN_RECORD_BYTES
from localmem.records import MAX_TURN_CHARS, SessionIn, TurnIn
from localmem.storage.write.prepare import MAX_STATEMENT_CUES
from localmem.storage.write.store import Store
from tests.helpers.cli import driver
from tests.helpers.fakes import HashEmbedder

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"


def line(text: str, **extra: object) -> str:
    return json.dumps({"speaker": "Ann", "text": text, **extra}) + "\n"


def test_a_turn_over_the_cap_is_refused_naming_file_and_line_and_skip_bad_skips_only_it(tmp_path: Path) -> None:
    p = tmp_path / "log.jsonl"
    p.write_text(line("first turn.") + line("x" * (MAX_TURN_CHARS + 1)) + line("third turn."), "utf-8")
    db = tmp_path / "m.db"
    proc = subprocess.run(driver("--db", str(db), "ingest", str(p)), capture_output=True, text=True)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert f"{p} at line 2" in proc.stderr and f"{MAX_TURN_CHARS + 1:,} characters" in proc.stderr
    proc = subprocess.run(
        driver("--db", str(db), "ingest", str(p), "--skip-bad", "--json"), capture_output=True, text=True
    )
    out = json.loads(proc.stdout)
    assert proc.returncode == 0 and out["new"] == 2 and [e["where"] for e in out["errors"]] == ["line 2"]


def test_a_message_over_the_cap_names_its_conversation(tmp_path: Path) -> None:
    conv = {"id": "c1", "messages": [{"role": "user", "content": "hi"}, {"role": "user", "content": "y" * 100_001}]}
    p = tmp_path / "export.json"
    p.write_text(json.dumps([{"id": "c0", "messages": [{"role": "user", "content": "fine"}]}, conv]), "utf-8")
    with pytest.raises(InputError, match=r"export\.json at \$\[1\]: turn 1 \(id c1:1\)"):
        load(p)


def test_the_store_refuses_a_turn_over_the_cap(store: Store) -> None:
    with pytest.raises(InputError, match="100,001 characters"):
        store.write([TurnIn("z" * (MAX_TURN_CHARS + 1), speaker="a")], session="s")
    assert store.write([TurnIn("z" * MAX_TURN_CHARS, speaker="a")], session="s").new_turns == 1


def test_a_huge_line_is_refused_unread_with_bounded_memory(tmp_path: Path) -> None:
    p = tmp_path / "huge.jsonl"
    big = 4 * TURN_RECORD_BYTES  # 6.4 MB: the check, not the size, is under test
    with p.open("w", encoding="utf-8") as fh:
        fh.write(line("a normal first turn."))
        fh.write('{"speaker": "Ann", "text": "')
        for _ in range(big // 100_000):
            fh.write("w" * 100_000)
        fh.write('"}\n')
        fh.write(line("a normal last turn."))
    t0 = time.perf_counter()
    assert p.read_bytes().count(b"\n") == 3  # this machine's speed now: one plain pass over the file
    scan = time.perf_counter() - t0
    tracemalloc.start()
    t0 = time.perf_counter()
    with pytest.raises(InputError, match=r"huge\.jsonl at line 2: the line has 6,400,0\d\d bytes"):
        load(p)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 3 * TURN_RECORD_BYTES < big, peak  # about the limit, never the whole line
    # a few passes' worth, never a parse of the line: 5 s, or 100 plain passes on a slower machine
    assert seconds < max(5.0, 100 * scan), (seconds, scan)


def test_repeated_sentences_make_one_cue_each_and_at_most_the_cap(tmp_path: Path) -> None:
    class Counting(HashEmbedder):
        texts = 0

        def embed(self, texts):  # type: ignore[no-untyped-def]
            Counting.texts += len(texts)
            return super().embed(texts)

    store = Store(tmp_path / "m.db", embedder=Counting())
    sentence = "I ran along the river this morning. "
    text = (sentence * (MAX_TURN_CHARS // len(sentence)))[:MAX_TURN_CHARS].strip()
    store.write([TurnIn(text, speaker="Ann")], session="s")
    cues = store.conn.execute("SELECT text FROM cues WHERE kind = 'statement'").fetchall()
    assert len(cues) == len({c for (c,) in cues}) <= 2  # the sentence, and the cut last one
    assert Counting.texts <= 3  # the turn and its distinct sentences, not 2,700 copies
    varied = " ".join(f"Sentence {i} is about item {i}." for i in range(400))
    store.write([TurnIn(varied, speaker="Ann")], session="t")
    n = store.conn.execute("SELECT count(*) FROM cues c JOIN turns t ON t.id = c.turn_id WHERE t.text = ?", (varied,))
    assert n.fetchone()[0] == MAX_STATEMENT_CUES
    store.close()


sizes = st.lists(st.lists(st.integers(1, 300), min_size=1, max_size=8), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(sizes, st.integers(1, 5), st.integers(1, 700))
def test_chunks_keep_order_and_bounds(sessions: list[list[int]], turns: int, chars: int) -> None:
    given_ = [
        SessionIn(key=f"s{i}", turns=tuple(TurnIn("x" * n, source_id=f"{i}:{j}") for j, n in enumerate(lens)))
        for i, lens in enumerate(sessions)
    ]
    pieces = list(runner.chunks(given_, turns, chars))
    flat = [(s.key, t.source_id) for piece in pieces for s in piece for t in s.turns]
    assert flat == [(s.key, t.source_id) for s in given_ for t in s.turns]
    for piece in pieces:
        n = sum(len(s.turns) for s in piece)
        size = sum(len(t.text) for s in piece for t in s.turns)
        assert 1 <= n <= turns and all(s.turns for s in piece)
        assert size <= chars or n == 1


def test_a_big_batch_is_written_in_short_transactions(store: Store, tmp_path: Path) -> None:
    p = tmp_path / "long.jsonl"
    p.write_text("".join(line(f"Turn {i} " + "words " * 15_000) for i in range(10)), "utf-8")  # 90,000+ chars each
    calls: list[int] = []
    commit = store._commit  # one write transaction

    def counted(staged, vectors, **kw):  # type: ignore[no-untyped-def]
        calls.append(sum(len(t.text) for s, _ in staged.sessions for t in s.turns))
        return commit(staged, vectors, **kw)

    store._commit = counted  # type: ignore[method-assign]
    report = runner.ingest_file(store, p)
    assert report.new == 10 and len(calls) >= 4 and max(calls) <= runner.BATCH_CHARS


def test_a_wrong_format_that_yields_no_turns_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "chat.jsonl"
    p.write_text(line("Hello there.") + line("How are you?"), "utf-8")
    db = tmp_path / "m.db"
    proc = subprocess.run(
        driver("--db", str(db), "ingest", str(p), "--format", "transcript"), capture_output=True, text=True
    )
    assert proc.returncode == 3 and "Traceback" not in proc.stderr
    assert str(p) in proc.stderr and "no turns found reading it as transcript" in proc.stderr
    assert "--format jsonl" in proc.stderr
    assert subprocess.run(driver("--db", str(db), "ingest", str(p)), capture_output=True).returncode == 0


def test_a_transcript_turn_over_the_cap_is_refused_at_its_first_line(tmp_path: Path) -> None:
    p = tmp_path / "chat.md"
    body = "\n".join(["continued " * 1000] * 12)  # 120,000 characters over 12 lines
    p.write_text(f"# 2024-05-01\nAnn: Hello.\nBob: Here it comes:\n{body}\nAnn: Thanks.\n", "utf-8")
    with pytest.raises(InputError, match=r"chat\.md at line 3: the turn of Bob has more than 100,000 characters"):
        load(p)
    p.write_text("Ann: Hello.\nBob: " + "w" * (TURN_RECORD_BYTES + 10) + "\n", "utf-8")
    with pytest.raises(InputError, match=r"chat\.md at line 2: a line of 1,600,016 bytes; not read"):
        load(p, "transcript")
