"""Pipelined batch writes: batch k+1 is embedded while batch k commits.

Three steps per batch: ``stage`` (main thread: check, hash, look up what is stored),
``embed`` (one worker thread: the model only, no SQL; onnxruntime and tokenizers
release the GIL, so it runs beside the main thread) and ``commit`` (main thread: one
write transaction). The main thread reads and stages batch k+1, hands it to the
worker, then commits batch k and gives it back to the caller (who may save a resume
point) while the worker embeds k+1.

Invariants:
- batches commit in input order, each in its own transaction, and are given back
  only after they commit;
- a failure anywhere in batch k (reading it, staging, embedding, committing) leaves
  every batch before k committed and given back, nothing of k or later, and the
  exception propagates;
- the database is touched only by the calling thread (one connection per thread).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Generic, TypeVar

B = TypeVar("B")  # a batch as given
S = TypeVar("S")  # a staged batch
V = TypeVar("V")  # its vectors
R = TypeVar("R")  # what its commit returns


class _Job(Generic[B, S, V]):
    def __init__(self, batch: B, staged: S, vectors: Future[V]) -> None:
        self.batch, self.staged, self.vectors = batch, staged, vectors


def pipelined(
    batches: Iterable[B],
    stage: Callable[[B], S],
    embed: Callable[[S], V],
    commit: Callable[[S, V], R],
) -> Iterator[tuple[R, B]]:
    """``(commit result, batch)`` for each batch, in order, each after its commit."""
    it = iter(batches)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="localmem-embed") as pool:
        pending: _Job[B, S, V] | None = None
        while True:
            try:
                batch = next(it)
                staged = stage(batch)
            except StopIteration:
                job = None
            except BaseException:
                if pending is not None:  # the batch before the failing one still commits
                    yield commit(pending.staged, pending.vectors.result()), pending.batch
                raise
            else:
                job = _Job(batch, staged, pool.submit(embed, staged))
            if pending is not None:
                # The worker embeds the next batch meanwhile.
                yield commit(pending.staged, pending.vectors.result()), pending.batch
            if job is None:
                return
            pending = job
