"""Pipelined writes (storage/write/pipeline.py, Store.write_stream): batch k+1 is embedded while
batch k commits; batches commit in order, each in its own transaction; a failure in
batch k leaves the batches before it committed and nothing of k or later."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from localmem.config import Settings
from localmem.errors import InputError
from localmem.records import SessionIn, TurnIn
from localmem.storage.write.pipeline import pipelined
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder, session


class Boom(Exception):
    pass


def run(n: int, *, fail_stage: int = -1, fail_embed: int = -1, fail_commit: int = -1) -> tuple[list[int], list[str]]:
    log: list[str] = []
    committed: list[int] = []

    def stage(b: int) -> int:
        log.append(f"stage {b}")
        if b == fail_stage:
            raise Boom
        return b

    def embed(b: int) -> int:
        if b == fail_embed:
            raise Boom
        return b * 10

    def commit(b: int, v: int) -> int:
        assert v == b * 10
        if b == fail_commit:
            raise Boom
        committed.append(b)
        log.append(f"commit {b}")
        return b

    got: list[int] = []
    for r, b in pipelined(range(n), stage, embed, commit):
        assert r == b
        got.append(b)
    assert got == committed
    return committed, log


def test_order_and_prefetch() -> None:
    committed, log = run(5)
    assert committed == [0, 1, 2, 3, 4]
    # Batch k+1 is staged (and handed to the model) before batch k commits.
    assert log.index("stage 1") < log.index("commit 0")
    assert log.index("stage 4") < log.index("commit 3")
    assert run(0)[0] == []


@pytest.mark.parametrize("where", ["stage", "embed", "commit"])
@pytest.mark.parametrize("k", [0, 2, 4])
def test_a_failure_in_batch_k_leaves_the_batches_before_it(where: str, k: int) -> None:
    committed: list[int] = []
    with pytest.raises(Boom):
        for _r, b in pipelined(
            range(6),
            lambda b: (_ for _ in ()).throw(Boom()) if where == "stage" and b == k else b,
            lambda b: (_ for _ in ()).throw(Boom()) if where == "embed" and b == k else b,
            lambda b, _v: (_ for _ in ()).throw(Boom()) if where == "commit" and b == k else b,
        ):
            committed.append(b)
    assert committed == list(range(k))


def test_a_failing_input_iterator_still_commits_what_came_before() -> None:
    def batches() -> Iterator[int]:
        yield 0
        yield 1
        raise Boom

    committed: list[int] = []
    with pytest.raises(Boom):
        for _r, b in pipelined(batches(), lambda b: b, lambda b: b, lambda b, _v: b):
            committed.append(b)
    assert committed == [0, 1]


def test_the_model_runs_while_the_previous_batch_commits() -> None:
    # embed(1) must start before commit(0) returns: commit(0) waits for it.
    started = threading.Event()
    threads: set[str] = set()

    def embed(b: int) -> int:
        threads.add(threading.current_thread().name)
        if b == 1:
            started.set()
        return b

    def commit(b: int, _v: int) -> int:
        if b == 0:
            assert started.wait(10), "batch 1 was not embedded while batch 0 committed"
        return b

    assert [b for _r, b in pipelined(range(3), lambda b: b, embed, commit)] == [0, 1, 2]
    assert threads and threading.current_thread().name not in threads


def turns_of(store: Store) -> list[tuple[str, str]]:
    return [(str(k), str(t)) for k, t in store.conn.execute(
        "SELECT s.key, t.text FROM turns t JOIN sessions s ON s.id = t.session_id ORDER BY t.id")]  # fmt: skip


def batch(i: int, n: int = 3) -> list[SessionIn]:
    return [session(f"b{i}", "2024-02-01T10:00:00", *[("Ana", f"Batch {i} line {j} about apples.") for j in range(n)])]


def test_write_stream_commits_in_order_like_write_sessions(store: Store) -> None:
    tags = [tag for _res, tag in store.write_stream((batch(i), i) for i in range(4))]
    assert tags == [0, 1, 2, 3]
    assert turns_of(store) == [(f"b{i}", f"Batch {i} line {j} about apples.") for i in range(4) for j in range(3)]
    # Again: everything is already present, nothing new.
    again = [r for res, _ in store.write_stream((batch(i), i) for i in range(4)) for r in res]
    assert sum(r.new_turns for r in again) == 0 and sum(r.existing_turns for r in again) == 12
    # Every turn got its vector, cues and edges as write_sessions writes them.
    n = store.conn.one("SELECT count(*) FROM turn_vec")[0]
    assert n == 12 and store.conn.one("SELECT count(*) FROM cue_vec")[0] == 12


def test_a_bad_turn_in_batch_k_leaves_batches_before_it_and_nothing_of_k(store: Store) -> None:
    bad = SessionIn(key="b2", turns=(TurnIn(text="fine"), TurnIn(text="   ")), started_at="2024-02-01")
    batches = [(batch(0), 0), (batch(1), 1), ([bad], 2), (batch(3), 3)]
    done: list[int] = []
    with pytest.raises(InputError):
        for _res, tag in store.write_stream(batches):
            done.append(tag)
    assert done == [0, 1]
    assert {k for k, _t in turns_of(store)} == {"b0", "b1"}


class FailsOn(HashEmbedder):
    """Embeds until it sees ``word``, then raises (a model failure in one batch)."""

    def __init__(self, word: str) -> None:
        super().__init__()
        self.word = word

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any(self.word in t for t in texts):
            raise RuntimeError("model failed")
        return super().embed(texts)


def test_a_model_failure_in_batch_k_leaves_batches_before_it(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Store(db, embedder=FailsOn("Batch 2"), settings=Settings(db=db)) as s:
        done: list[int] = []
        with pytest.raises(RuntimeError):
            for _res, tag in s.write_stream((batch(i), i) for i in range(5)):
                done.append(tag)
        assert done == [0, 1]
        assert {k for k, _t in turns_of(s)} == {"b0", "b1"}
        assert s.conn.one("SELECT count(*) FROM turn_vec")[0] == 6
