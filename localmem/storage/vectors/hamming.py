"""Hamming distances over word-major sign codes and the shortlist of the nearest rows.

Codes are (words, n) uint64 arrays (``VectorMirror.codes``). Both functions run in
blocks that stay in cache and allocate nothing of the table's size but their result
(and one masked copy of the distances), so a search over millions of rows costs a few
passes over memory; a pass over a large table runs on two threads, each filling its own
half of the result. The shortlist is exact: the same positions, in the same order, as
a full sort of the distances by (distance, position).

Invariant: a row whose distance is ``FAR`` is never returned (it is masked out).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

FAR = np.uint16(0xFFFF)  # a Hamming distance no code reaches (dimensions < 65,535)
BLOCK = 32_768  # rows per block (its temporaries stay in cache)
_GROUP = 3  # words summed in uint8 before widening: 3 * 64 = 192 bits <= 255
_PARALLEL_ROWS = 262_144  # from here a pass is split between two threads (~30% faster on 2 cores)
_SAMPLE = 64  # every 64th row estimates the shortlist's distance threshold


def distances(codes: np.ndarray, qcode: np.ndarray) -> np.ndarray:
    """Hamming distance of every row's code to ``qcode`` ((words,) uint64), as uint16.
    A large table is split between two threads (numpy releases the GIL in its loops)."""
    n = codes.shape[1]
    out = np.zeros(n, dtype=np.uint16)
    if n < _PARALLEL_ROWS or (os.cpu_count() or 1) < 2:
        _count(codes, qcode, out, 0, n)
        return out
    half = (n // 2 // BLOCK + 1) * BLOCK
    other = _threads().submit(_count, codes, qcode, out, half, n)
    _count(codes, qcode, out, 0, half)
    other.result()
    return out


def _count(codes: np.ndarray, qcode: np.ndarray, out: np.ndarray, lo: int, hi: int) -> None:
    """Fill ``out[lo:hi]`` with the distances of those rows."""
    words = codes.shape[0]
    m0 = min(hi - lo, BLOCK)
    xor = np.empty(m0, dtype=np.uint64)
    bits = np.empty(m0, dtype=np.uint8)
    acc = np.empty(m0, dtype=np.uint8)
    for start in range(lo, hi, BLOCK):
        end = min(start + BLOCK, hi)
        m = end - start
        for g in range(0, words, _GROUP):
            # Popcounts add up in uint8 (a few cheap passes) and widen once per group.
            for w in range(g, min(g + _GROUP, words)):
                np.bitwise_xor(codes[w, start:end], qcode[w], out=xor[:m])
                np.bitwise_count(xor[:m], out=bits[:m] if w > g else acc[:m])
                if w > g:
                    np.add(acc[:m], bits[:m], out=acc[:m])
            np.add(out[start:end], acc[:m], out=out[start:end])


def distances_many(codes: np.ndarray, qcodes: np.ndarray) -> np.ndarray:
    """Hamming distances of every row's code to each of ``qcodes`` ((k, words) uint64),
    as a (k, n) uint16 matrix: row i equals ``distances(codes, qcodes[i])``. The same
    arithmetic as :func:`_count` (popcounts summed in uint8 per group of words, in
    preallocated blocks), done for all k codes in each operation: ingest links a new
    turn's cues together, and on a cue mirror of a few thousand rows per-call overhead,
    not arithmetic, is what a pass costs."""
    k, n = len(qcodes), codes.shape[1]
    words = codes.shape[0]
    out = np.zeros((k, n), dtype=np.uint16)
    m0 = max(1, min(n, BLOCK // max(k, 1)))  # block temporaries of ~BLOCK elements
    xor = np.empty((k, m0), dtype=np.uint64)
    bits = np.empty((k, m0), dtype=np.uint8)
    acc = np.empty((k, m0), dtype=np.uint8)
    q = qcodes.T[:, :, None]  # (words, k, 1)
    for start in range(0, n, m0):
        end = min(start + m0, n)
        m = end - start
        for g in range(0, words, _GROUP):
            for w in range(g, min(g + _GROUP, words)):
                np.bitwise_xor(codes[w, start:end][None, :], q[w], out=xor[:, :m])
                np.bitwise_count(xor[:, :m], out=bits[:, :m] if w > g else acc[:, :m])
                if w > g:
                    np.add(acc[:, :m], bits[:, :m], out=acc[:, :m])
            np.add(out[:, start:end], acc[:, :m], out=out[:, start:end])
    return out


_pool: tuple[int, ThreadPoolExecutor] | None = None


def _threads() -> ThreadPoolExecutor:
    """The helper thread of this process (a forked child gets its own: the parent's
    thread does not exist there, and its executor would wait for it forever)."""
    global _pool
    if _pool is None or _pool[0] != os.getpid():
        _pool = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix="localmem-hamming"))
    return _pool[1]


def shortlist(dist: np.ndarray, ok: np.ndarray | None, size: int) -> np.ndarray:
    """Positions of the ``size`` rows nearest by ``dist`` among those ``ok`` allows,
    nearest first (ties by position).

    On a large table a strided sample gives a distance threshold that keeps a little
    more than ``size`` rows; only those are partitioned. When the sample misjudges
    (too few rows under its threshold) the whole table is partitioned instead, so the
    result never depends on the sample."""
    d = dist if ok is None else np.where(ok, dist, FAR)
    n = len(d)
    cand: np.ndarray = np.arange(n) if n <= size else np.zeros(0, dtype=np.int64)
    if n > size:
        found = _under_sampled_threshold(d, size)
        cand = np.arange(n) if found is None else found
        sub = d[cand]
        t = np.partition(sub, size - 1)[size - 1]
        near = cand[sub < t]
        cand = np.concatenate([near, cand[sub == t][: size - len(near)]])
    cand = cand[d[cand] != FAR]
    out: np.ndarray = cand[np.lexsort((cand, d[cand]))]
    return out


def _under_sampled_threshold(d: np.ndarray, size: int) -> np.ndarray | None:
    """Positions (ascending) of every row at or under a threshold that a strided sample
    says at least ``size`` rows reach; None when the sample cannot tell or was wrong."""
    n = len(d)
    if n < 16 * size:
        return None
    sample = d[::_SAMPLE]
    # Twice the expected sample rank, plus slack, so a threshold too low is rare.
    rank = min(len(sample) - 1, 2 * (size * len(sample)) // n + 8)
    t = np.partition(sample, rank)[rank]
    if t == FAR:
        return None
    cand = np.flatnonzero(d <= t)
    return cand if len(cand) >= size else None


def asymmetric(codes: np.ndarray, pos: np.ndarray, qvec: np.ndarray) -> np.ndarray:
    """Estimated similarity of rows ``pos`` to the float query ``qvec``: the query
    against each row's sign code read as a +-1 vector. Ranks a shortlist much closer
    to the exact order than the Hamming distance does (the query keeps its magnitudes),
    so fewer exact vectors need reading."""
    dim = len(qvec)
    raw = np.ascontiguousarray(codes[:, pos].T).view(np.uint8)  # (k, words * 8): the stored codes' bytes
    signs = np.unpackbits(raw, axis=1, bitorder="little")[:, :dim].astype(np.float32)
    out: np.ndarray = (2.0 * signs - 1.0) @ qvec.astype(np.float32)
    return out
