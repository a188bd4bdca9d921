"""The Hamming pass and the sampled shortlist give exactly what a full sort gives:
on random distances with ties, masks that hide almost everything, tiny and large
tables, and on codes of every word count."""

from __future__ import annotations

import numpy as np
import pytest

from localmem.storage.vectors import hamming


def full_sort(d: np.ndarray, ok: np.ndarray | None, size: int) -> np.ndarray:
    d = d if ok is None else np.where(ok, d, hamming.FAR)
    order = np.lexsort((np.arange(len(d)), d))[:size]
    out: np.ndarray = order[d[order] != hamming.FAR]
    return out


@pytest.mark.parametrize("n", [10, 500, 600, 9_000, 40_000, 200_000])
def test_the_shortlist_is_the_full_sort_prefix(n: int) -> None:
    rng = np.random.default_rng(n)
    for trial in range(12):
        d = rng.integers(0, [3, 40, 385][trial % 3], n).astype(np.uint16)
        ok = None if trial % 4 == 0 else rng.random(n) < [0.0005, 0.5, 1.0][trial % 3]
        size = [1, 30, 500][trial % 3]
        assert np.array_equal(hamming.shortlist(d, ok, size), full_sort(d, ok, size)), (trial, size)


def test_a_sample_that_misjudges_falls_back_to_the_whole_table() -> None:
    # Every sampled row (each 64th) is near, every other row is far: the sample's
    # threshold keeps too few rows and the full partition must take over.
    n, size = 64 * 1000, 2000
    d = np.full(n, 300, dtype=np.uint16)
    d[::64] = 1
    d[5::64] = 2
    got = hamming.shortlist(d, None, size)
    assert np.array_equal(got, full_sort(d, None, size)) and len(got) == size


def test_distances_are_popcounts_of_the_xor_for_any_word_count() -> None:
    rng = np.random.default_rng(7)
    for words in (1, 2, 3, 4, 6, 8):
        codes = rng.integers(0, 2**63, (words, 70_001), dtype=np.uint64) | np.uint64(1 << 63)
        q = rng.integers(0, 2**63, words, dtype=np.uint64)
        want = sum(np.bitwise_count(codes[w] ^ q[w]).astype(np.uint16) for w in range(words))
        assert np.array_equal(hamming.distances(codes, q), want)
    all_ones = np.full((6, 5), np.uint64(2**64 - 1))
    assert hamming.distances(all_ones, np.zeros(6, dtype=np.uint64)).tolist() == [384] * 5  # no uint8 wrap


@pytest.mark.parametrize("n", [hamming.BLOCK * 8, hamming.BLOCK * 9 + 17])
def test_a_pass_split_between_two_threads_fills_every_row(n: int) -> None:
    assert n >= hamming._PARALLEL_ROWS  # the two-thread path
    rng = np.random.default_rng(n)
    codes = rng.integers(0, 2**63, (6, n), dtype=np.uint64)
    q = rng.integers(0, 2**63, 6, dtype=np.uint64)
    want = sum(np.bitwise_count(codes[w] ^ q[w]).astype(np.uint16) for w in range(6))
    assert np.array_equal(hamming.distances(codes, q), want)


def test_a_forked_child_gets_its_own_helper_thread() -> None:
    import multiprocessing

    n = hamming._PARALLEL_ROWS
    codes = np.ones((6, n), dtype=np.uint64)
    hamming.distances(codes, np.zeros(6, dtype=np.uint64))  # the parent's helper thread exists now
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        got = pool.apply_async(_child_distances, (n,)).get(timeout=60)  # a hang fails here
    assert got == 6 * n


def _child_distances(n: int) -> int:
    return int(hamming.distances(np.ones((6, n), dtype=np.uint64), np.zeros(6, dtype=np.uint64)).sum())


@pytest.mark.parametrize(("n", "k"), [(1, 1), (7, 3), (5_000, 12), (hamming.BLOCK + 5, 1), (70_001, 40)])
def test_many_codes_at_once_equal_one_by_one(n: int, k: int) -> None:
    rng = np.random.default_rng(n + k)
    for words in (1, 4, 6):
        codes = rng.integers(0, 2**63, (words, n), dtype=np.uint64) | np.uint64(1 << 63)
        qs = rng.integers(0, 2**63, (k, words), dtype=np.uint64)
        got = hamming.distances_many(codes, qs)
        assert got.shape == (k, n) and got.dtype == np.uint16
        assert np.array_equal(got, np.stack([hamming.distances(codes, q) for q in qs]))
    ones = np.full((6, 3), np.uint64(2**64 - 1))
    assert hamming.distances_many(ones, np.zeros((2, 6), dtype=np.uint64)).tolist() == [[384] * 3] * 2
