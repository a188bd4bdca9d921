"""localmem reembed in real processes with real ONNX embedders (the packaged MiniLM and a
second real model folder, ``make_other_folder``): a reader process querying in a loop
while ``localmem reembed`` runs in another never fails and each of its answers is wholly
one embedder's; a reembed killed with SIGKILL and run again ends byte-identical to an
uninterrupted one; afterwards another embedder is refused with both ids and the fix."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import apsw
import pytest

from localmem.config import Settings
from localmem.memory import open_memory
from localmem.models.registry import default_embedder
from localmem.records import SessionIn, TurnIn
from localmem.storage.write.store import Store
from tests.helpers.cli import ROOT, run
from tests.helpers.embedders import make_folder, make_other_folder

QUERIES = ("When did I adopt the dog?", "Which city did we move to?")
TOPICS = (
    "I adopted a golden retriever named Max in spring {i}.",
    "We moved to Lisbon in May; the flat number {i} has a balcony facing the river.",
    "My sister Ines plays the cello in orchestra {i} on Thursdays.",
    "The physio gave me {i} clamshell exercises for my knee.",
    "I switched to a vegetarian diet after reading book {i}.",
    "Our team ships the product launch {i} in June.",
    "I booked flight {i} to Oslo for the conference.",
    "The garden has {i} tomato plants that need sun.",
)

READER = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from localmem.memory import open_memory
db, stop = Path(sys.argv[1]), Path(sys.argv[2])
mem = open_memory(db)
while not stop.exists():
    for q in {queries!r}:
        ctx = mem.reconstruct(q, 300)
        turns = [[t.turn_id, round(t.score, 6)] for t in ctx.turns]
        print(json.dumps({{"t": time.time(), "q": q, "emb": mem.store.embedder.model_id, "turns": turns}}), flush=True)
"""


def _sessions() -> list[SessionIn]:
    return [
        SessionIn(
            f"s{i}",
            tuple(
                TurnIn(
                    text=t.format(i=i),
                    speaker="Maya" if k % 2 == 0 else "Assistant",
                    timestamp=f"2024-0{i % 9 + 1}-10T10:00:00",
                )
                for k, t in enumerate(TOPICS)
            ),
        )
        for i in range(18)
    ]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 144 turns written with the packaged MiniLM (as `localmem ingest` would)."""
    path = tmp_path_factory.mktemp("base") / "m.db"
    with Store(path, embedder=default_embedder("minilm"), settings=Settings(db=path)) as store:
        store.write_sessions(_sessions())
    return path


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_other_folder(tmp_path_factory.mktemp("models") / "negated")


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


def _answers(db: Path) -> tuple[str, dict[str, Any]]:
    with open_memory(db) as mem:
        out = {q: [[t.turn_id, round(t.score, 6)] for t in mem.reconstruct(q, 300).turns] for q in QUERIES}
        return mem.store.embedder.model_id, out


def _reembed(db: Path, model: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "localmem", "--db", str(db), "reembed", "--model", str(model), "--json", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())


def test_a_reader_keeps_reading_one_embedders_answers_while_reembed_runs(
    base: Path, other: Path, tmp_path: Path
) -> None:
    live = _copy(base, tmp_path / "live.db")
    old_id, old = _answers(_copy(base, tmp_path / "before.db"))
    stop = tmp_path / "stop"
    script = READER.format(root=str(ROOT), queries=QUERIES)
    reader = subprocess.Popen(
        [sys.executable, "-c", script, str(live), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    assert reader.stdout is not None
    lines = [json.loads(reader.stdout.readline()) for _ in range(4)]  # reading before the build starts
    started = time.time()
    proc = _reembed(live, other, "--batch", "2")
    while proc.poll() is None:
        lines.append(json.loads(reader.stdout.readline()))
    ended = time.time()
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    report = json.loads(out)
    while sum(1 for line in lines if line["t"] > ended) < 4:  # and after the switch
        lines.append(json.loads(reader.stdout.readline()))
    stop.touch()
    rest, reader_err = reader.communicate(timeout=60)
    lines += [json.loads(line) for line in rest.splitlines()]
    assert reader.returncode == 0, reader_err

    new_id, new = _answers(live)
    assert (report["previous"], report["embedder"], report["switched"]) == (old_id, new_id, True)
    assert old != new  # the two models rank differently: a mixed answer would match neither
    embs = [line["emb"] for line in lines]
    assert set(embs) == {old_id, new_id}
    assert embs == sorted(embs, key=lambda e: e == new_id)  # old answers, then new ones, never back
    for line in lines:
        assert line["turns"] == (old if line["emb"] == old_id else new)[line["q"]], line
    during = [line for line in lines if started < line["t"] < ended]
    assert len(during) >= 2  # reads went on while the new vectors were built


def _dump(db: Path) -> dict[str, list[tuple[Any, ...]]]:
    conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        out = {t: list(conn.execute(f"SELECT * FROM {t} ORDER BY 1")) for t in ("turn_vec", "cue_vec")}
        out.update({t: list(conn.execute(f"SELECT * FROM {t} ORDER BY 1")) for t in ("turn_codes", "cue_codes")})
        out["meta"] = list(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'embedder%' ORDER BY key"))
        out["left"] = list(conn.execute("SELECT name FROM sqlite_master WHERE name LIKE '%next%' OR name = 'x'"))
        return out
    finally:
        conn.close()


def _built(db: Path) -> int:
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READONLY)
        conn.set_busy_timeout(2000)
        try:
            return int(conn.execute("SELECT count(*) FROM turn_vec_next").fetchone()[0])  # type: ignore[index]
        finally:
            conn.close()
    except apsw.Error:
        return 0


def test_a_reembed_killed_half_way_resumes_to_the_same_store(base: Path, other: Path, tmp_path: Path) -> None:
    whole = _copy(base, tmp_path / "whole.db")
    killed = _copy(base, tmp_path / "killed.db")
    run("reembed", "--model", str(other), db=whole)

    proc = _reembed(killed, other, "--batch", "1")
    deadline = time.monotonic() + 120
    while _built(killed) < 10 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert 10 <= _built(killed) < 144  # killed mid-way, with batches committed

    with open_memory(killed) as mem:  # reads work meanwhile, on the old vectors
        assert mem.store.embedder.model_id == default_embedder("minilm").model_id
        assert mem.reconstruct(QUERIES[0], 300).turns

    report = json.loads(run("reembed", "--model", str(other), "--json", db=killed).stdout)
    assert report["resumed"] is True and 0 < report["embedded"] < report["units"] == 144
    assert _dump(killed) == _dump(whole)


def test_afterwards_another_embedder_is_refused_and_the_default_setting_follows(
    base: Path, other: Path, tmp_path: Path
) -> None:
    db = _copy(base, tmp_path / "m.db")
    run("reembed", "--model", str(other), db=db)
    copy = make_folder(tmp_path / "packaged-copy")
    refused = run("--embedder", str(copy), "query", QUERIES[0], db=db, check=False)
    assert refused.returncode == 5
    err = refused.stderr
    assert "negated-words@" in err and "packaged-copy@" in err
    assert f"--embedder {other.resolve()}" in err and f"localmem reembed --model {copy.resolve()}" in err
    followed = run("query", QUERIES[0], "--json", db=db)  # the embedder setting left at default
    assert json.loads(followed.stdout)["turns"]
    stats = json.loads(run("stats", "--json", db=db).stdout)
    assert stats["embedder"].startswith("negated-words@")


def test_compact_gives_the_old_vectors_pages_back(base: Path, other: Path, tmp_path: Path) -> None:
    plain, packed = _copy(base, tmp_path / "plain.db"), _copy(base, tmp_path / "packed.db")
    run("reembed", "--model", str(other), db=plain)
    report = json.loads(run("reembed", "--model", str(other), "--compact", "--json", db=packed).stdout)
    shrunk = report["compact"]
    assert shrunk["done"] is True and shrunk["why"] == ""
    assert shrunk["bytes_after"] == packed.stat().st_size < plain.stat().st_size
    assert shrunk["bytes_after"] < shrunk["bytes_before"]
    assert _answers(packed) == _answers(plain)  # the same store, only smaller
    again = json.loads(run("reembed", "--model", str(other), "--compact", "--json", db=packed).stdout)
    assert again["switched"] is False and again["compact"]["done"] is True  # a later run can compact alone
