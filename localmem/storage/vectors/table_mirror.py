"""In-memory mirrors of the vector tables: binary codes for search, exact vectors on demand.

The store holds each turn's and cue's float32 unit vector (``turn_vec`` / ``cue_vec``) and
its sign bits with the columns a query ranks by (``turn_codes`` / ``cue_codes``). A process
mirrors only those: ~80 bytes per turn, ~60 per cue, not 1,536-byte float32 rows. A search
is a Hamming pass over the codes (``hamming``) to ``SHORTLIST`` rows, then exact cosines of
those read from the store by rowid in the caller's snapshot; it ranks by the exact cosine.
A table of at most ``HELD_ROWS`` rows keeps its float32 vectors in memory (<= 30 MB): on a
small store reading them would cost more than the search. A larger table reads only the
``RESCORED`` best of a ``FILE_SHORTLIST`` shortlist by ``hamming.asymmetric`` (a read
costs ~7 us cached, ~300 us from disk). On real MiniLM vectors (32.6k turns / 287k cues,
1,059 LoCoMo and LongMemEval questions) the exact top 30 lies in the Hamming top 500 for
99.2% (turns) / 96.9% (cues) of its rows, in those 200 for 98.9% / 96.5%. On a 1M-cue
store (the 100k-message export, 300 questions) the returned top 10 holds 90.3% of the
exact top 10 from a 500-row shortlist, 94.1% from 1,000 and 96.1% from 2,000; the rows it
misses are within ~0.003 of the exact 10th cosine (tests/storage/test_quantized.py).

Invariants:
- a mirror object never changes once built: a refresh makes a new one (sharing the
  unchanged arrays), so whoever holds a mirror holds one fixed state of its table;
- a refresh (``synced``) loads only rows newer than the newest held, which is exact
  while rows are only added (SQLite gives a new row max(id) + 1); when rows were
  deleted or changed, :mod:`localmem.storage.vectors.mirrors` reloads the table whole;
- memory: a load reads its rows in chunks into arrays sized up front, so a process never
  holds a Python object per row nor a float32 matrix of the table.
"""

from __future__ import annotations

import copy
import itertools
from contextlib import closing
from typing import Any, TypeVar

import numpy as np

from localmem.storage.engine.db import Conn
from localmem.storage.vectors import hamming
from localmem.storage.vectors.stored import UNDATED, mismatch, quantize, read_vectors
from localmem.util import heap

_versions = itertools.count(1)  # every mirror state gets its own number, across objects
M = TypeVar("M", bound="VectorMirror")
_I32 = np.iinfo(np.int32)

SHORTLIST = 500  # rows nearest by Hamming distance per search (see the module docstring for its recall)
RESCORED = 200  # of those, rows whose exact vectors are read from the file (the best by ``hamming.asymmetric``)
# A table read from the file shortlists at least this many: the estimate ranks them in
# memory, so a wider shortlist costs ~0.5 ms and no reads (recall in the module docstring).
FILE_SHORTLIST = 1000
HELD_ROWS = 20_000  # a table this small also keeps its float32 vectors in memory (<= 30 MB at 384-d)
CHUNK = 8192  # rows per fetch while loading (bounds the Python objects alive at once)


class VectorMirror:
    """Row ids, turn ids and sign codes of one vector table, in ascending id order.
    Codes are word-major, (words, n) uint64, so a Hamming pass is a few contiguous ops."""

    table = ""  # the vector table (exact vectors)
    key = ""  # its id column
    kind = ""  # its row in ``mirror_snapshots`` (``snapshots``) and its ``mirror_epochs`` column
    saved: tuple[str, ...] = ("ids", "turns", "codes")  # the arrays a snapshot holds; the rest is derived from them
    # Load query: rows (row id, turn id, extra columns..., code) with id > ?, by id.
    load_sql = ""
    count_sql = ""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.words = (dim + 63) // 64
        # int32 until an id does not fit (then widened): 14 MB less per million cues.
        self.ids = np.zeros(0, dtype=np.int32)
        self.turns = np.zeros(0, dtype=np.int32)
        self.codes = np.zeros((self.words, 0), dtype=np.uint64)
        # The exact vectors, while the table has at most HELD_ROWS rows: reading a few
        # hundred vectors from the file per query (~15 us each) costs more than the
        # whole search on a small store. None above it: they are read from the file.
        self.held: np.ndarray | None = np.zeros((0, dim), dtype=np.float32)
        self.version = next(_versions)

    @property
    def newest(self) -> int:
        return int(self.ids[-1]) if len(self.ids) else 0

    def synced(self: M, conn: Conn) -> M:
        """This mirror plus the table's rows newer than its newest (itself if none)."""
        n = int(conn.one(self.count_sql, (self.newest,))[0])
        if n == 0:
            return self
        new = copy.copy(self)
        at = old = len(self.ids)
        new._grow(old + n)
        nbytes = (self.dim + 7) // 8
        # Closed once the rows are in: the loop stops at the count, not at the end of the
        # rows, so the statement is still stepping, and apsw 3.54.0.0 (the build
        # apsw-sqlite3mc ships) leaks a reference to every cursor alive when another
        # statement runs on its connection (read_vectors below): left to the garbage
        # collector it would never be reset and would hold a read transaction for good.
        with closing(conn.execute(self.load_sql, (self.newest,))) as cur:
            while chunk := list(itertools.islice(cur, min(CHUNK, old + n - at))):
                cols = list(zip(*chunk, strict=True))
                blob = b"".join(cols[-1])
                if len(blob) != nbytes * len(chunk):
                    raise mismatch(self.dim)
                bits = np.frombuffer(blob, dtype=np.uint8).reshape(len(chunk), nbytes)
                padded = np.zeros((len(chunk), 8 * self.words), dtype=np.uint8)
                padded[:, :nbytes] = bits
                sl = slice(at, at + len(chunk))
                new.codes[:, sl] = padded.view(np.uint64).T
                new._put("ids", sl, cols[0])
                new._fill(sl, cols)
                at += len(chunk)
                if at >= old + n:
                    break
        if at < old + n:  # the table cannot shrink inside a snapshot; guard against a foreign one
            new._grow(at)
        if self.held is not None and at <= HELD_ROWS:
            fresh = read_vectors(conn, self.table, self.key, new.ids[old:at], self.dim)
            new.held = np.concatenate([self.held[:old], fresh])
        else:
            new.held = None
        new.version = next(_versions)
        if n > heap.BIG_LOAD:
            heap.release()  # the load's fetch buffers would stay resident in a long-lived server
        return new

    def _grow(self, n: int) -> None:
        """Give this (fresh) copy new arrays of ``n`` rows holding the old rows first."""
        self.ids = _resized(self.ids, n)
        self.turns = _resized(self.turns, n)
        codes = np.zeros((self.words, n), dtype=np.uint64)
        keep = min(n, self.codes.shape[1])
        codes[:, :keep] = self.codes[:, :keep]
        self.codes = codes

    def _fill(self, sl: slice, cols: list[tuple[Any, ...]]) -> None:
        """Set the extra columns of rows ``sl`` from a chunk's columns."""
        self._put("turns", sl, cols[1])

    def extra(self) -> dict[str, Any]:
        """What a snapshot keeps besides the ``saved`` arrays (JSON values)."""
        return {}

    def restore(self, extra: dict[str, Any]) -> None:
        """Complete a fresh mirror whose ``saved`` arrays were just set from a snapshot
        (``extra`` as :meth:`extra` gave it); before anyone else holds it."""

    def _put(self, name: str, sl: slice, values: tuple[Any, ...]) -> None:
        """Set rows ``sl`` of the id array ``name``, widening it to int64 first if a value
        does not fit its int32."""
        arr: np.ndarray = getattr(self, name)
        v = np.array(values, dtype=np.int64)
        if arr.dtype != np.int64 and len(v) and (v.max() > _I32.max or v.min() < _I32.min):
            arr = arr.astype(np.int64)
            setattr(self, name, arr)
        arr[sl] = v

    def nbytes(self, *, held: bool = True) -> int:
        """Bytes held by this mirror state's arrays (shared arrays counted once);
        ``held=False`` leaves out the float32 vectors a small table keeps."""
        seen: dict[int, int] = {}
        for k, v in vars(self).items():
            if isinstance(v, np.ndarray) and (held or k != "held"):
                seen[id(v)] = v.nbytes
        return sum(seen.values())

    def hamming(self, qcode: np.ndarray) -> np.ndarray:
        """Hamming distance of every row's code to ``qcode`` ((words,) uint64), as uint16."""
        return hamming.distances(self.codes, qcode)

    def shortlist(self, dist: np.ndarray, ok: np.ndarray | None, size: int = SHORTLIST) -> np.ndarray:
        """Positions of the ``size`` rows nearest by ``dist`` among those ``ok`` allows,
        nearest first (ties by position); rows at distance ``FAR`` never."""
        return hamming.shortlist(dist, ok, size)

    def vectors(self, conn: Conn, pos: np.ndarray) -> np.ndarray:
        """Exact vectors of mirror positions ``pos`` (from the store, this snapshot)."""
        if self.held is not None:
            out: np.ndarray = self.held[pos]
            return out
        return read_vectors(conn, self.table, self.key, self.ids[pos], self.dim)

    def nearest(
        self,
        conn: Conn,
        qvec: np.ndarray,
        k: int,
        ok: np.ndarray | None = None,
        dist: np.ndarray | None = None,
        size: int = SHORTLIST,
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` rows (among those ``ok`` allows) most similar to the unit vector
        ``qvec``: (positions, exact cosines), best first. ``dist``: the query's Hamming
        distances if already computed. Rescores a shortlist of max(size, k) rows."""
        if k <= 0 or len(self.ids) == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if dist is None:
            dist = self.hamming(quantize(qvec, self.words)[0])
        if self.held is None:
            size = max(size, FILE_SHORTLIST)
        short = self.shortlist(dist, ok, max(size, k))
        keep = max(k, RESCORED)
        if self.held is None and len(short) > keep:  # exact vectors come from the file: read fewer
            est = hamming.asymmetric(self.codes, short, qvec)
            short = short[np.sort(np.argsort(-est, kind="stable")[:keep])]
        sims = self.vectors(conn, short) @ qvec.astype(np.float32)
        order = np.argsort(-sims, kind="stable")[:k]
        return short[order], sims[order]

    def index_of(self, ids: np.ndarray) -> np.ndarray:
        """Positions of row ids in the mirror (ids are kept in ascending order); -1 where absent."""
        ids = np.asarray(ids, dtype=np.int64)
        if len(self.ids) == 0:
            return np.full(len(ids), -1, dtype=np.int64)
        # Searching in the mirror's own dtype: a mixed search would copy the whole array.
        fits = (ids >= _I32.min) & (ids <= _I32.max) if self.ids.dtype == np.int32 else True
        key = np.where(fits, ids, 0).astype(self.ids.dtype)
        pos = np.clip(np.searchsorted(self.ids, key), 0, len(self.ids) - 1)
        return np.where(fits & (self.ids[pos] == ids), pos, -1)


def _resized(a: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=a.dtype)
    keep = min(n, len(a))
    out[:keep] = a[:keep]
    return out


class CueMirror(VectorMirror):
    """The cue mirror also says which rows are statement cues (the model-free ones)."""

    table, key, kind = "cue_vec", "cue_id", "cues"
    saved = ("ids", "turns", "statement", "codes")
    load_sql = "SELECT cue_id, turn_id, statement, code FROM cue_codes WHERE cue_id > ? ORDER BY cue_id"
    count_sql = "SELECT count(*) FROM cue_codes WHERE cue_id > ?"

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.statement = np.zeros(0, dtype=bool)

    def _grow(self, n: int) -> None:
        super()._grow(n)
        self.statement = _resized(self.statement, n)

    def _fill(self, sl: slice, cols: list[tuple[Any, ...]]) -> None:
        super()._fill(sl, cols)
        self.statement[sl] = np.array(cols[2], dtype=bool)


class TurnMirror(VectorMirror):
    """The turn mirror also keeps what reconstruct scores with, per turn: session id,
    order in session, words of its context line ("Speaker: text"), speaker (an index
    into ``names``) and time (epoch seconds, ``UNDATED`` when none). ``turns`` is ``ids``."""

    table, key, kind = "turn_vec", "turn_id", "turns"
    saved = ("ids", "session", "ord", "line_words", "speaker", "ts", "codes")
    load_sql = (
        "SELECT turn_id, turn_id, session_id, ord, words, speaker, ts, code FROM turn_codes "
        "WHERE turn_id > ? ORDER BY turn_id"
    )
    count_sql = "SELECT count(*) FROM turn_codes WHERE turn_id > ?"

    def __init__(self, dim: int) -> None:
        super().__init__(dim)
        self.turns = self.ids
        self.session = np.zeros(0, dtype=np.int32)
        self.ord = np.zeros(0, dtype=np.int32)
        self.line_words = np.zeros(0, dtype=np.int32)
        self.speaker = np.zeros(0, dtype=np.int32)
        self.names: list[str] = []  # speaker names, in order of first appearance
        self._name_index: dict[str, int] = {}
        self._name_words = np.zeros(0, dtype=np.int32)  # words each name adds to a context line
        self.ts = np.zeros(0, dtype=np.int64)
        self._order: np.ndarray | None = None
        self._rank: np.ndarray | None = None

    def _grow(self, n: int) -> None:
        super()._grow(n)
        self.turns = self.ids
        self.session = _resized(self.session, n)
        self.ord = _resized(self.ord, n)
        self.line_words = _resized(self.line_words, n)
        self.speaker = _resized(self.speaker, n)
        self.ts = _resized(self.ts, n)
        self.names, self._name_index = list(self.names), dict(self._name_index)
        self._order, self._rank = None, None

    def _fill(self, sl: slice, cols: list[tuple[Any, ...]]) -> None:
        self.turns = self.ids  # _put may have widened ids
        self._put("session", sl, cols[2])
        self.ord[sl] = np.array(cols[3], dtype=np.int32)
        codes = []
        for name in cols[5]:
            code = self._name_index.get(name)
            if code is None:
                code = self._name_index[name] = len(self.names)
                self.names.append(str(name))
            codes.append(code)
        # "Speaker: text" adds the speaker's words to the turn's own (util.text.line_word_cost).
        self._name_words = np.array([len(n.split()) for n in self.names], dtype=np.int32)
        spk = np.array(codes, dtype=np.int32)
        self.speaker[sl] = spk
        self.line_words[sl] = np.array(cols[4], dtype=np.int32) + self._name_words[spk]
        self.ts[sl] = np.array([UNDATED if t is None else t for t in cols[6]], dtype=np.int64)

    def extra(self) -> dict[str, Any]:
        return {"names": self.names}

    def restore(self, extra: dict[str, Any]) -> None:
        names = extra.get("names")
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ValueError("a turn mirror snapshot without its speaker names")
        self.turns = self.ids
        self.names = list(names)
        self._name_index = {n: i for i, n in enumerate(self.names)}
        self._name_words = np.array([len(n.split()) for n in self.names], dtype=np.int32)

    def speakers(self, pos: np.ndarray) -> list[str]:
        """The speaker names of mirror positions ``pos``."""
        return [self.names[int(i)] for i in self.speaker[pos]]

    def neighbour(self, pos: np.ndarray, offset: int) -> np.ndarray:
        """Mirror position of the turn ``offset`` places away in the same session
        (places, not ord values, so gaps left by forget do not break adjacency), or -1."""
        if self._order is None or self._rank is None:
            order = np.lexsort((self.ord, self.session)).astype(np.int32)
            rank = np.empty(len(order), dtype=np.int32)
            rank[order] = np.arange(len(order), dtype=np.int32)
            self._order, self._rank = order, rank  # a cache of this fixed state
        order, rank = self._order, self._rank
        pos = np.asarray(pos, dtype=np.int64)
        j = rank[pos].astype(np.int64) + offset
        inside = (j >= 0) & (j < len(order))
        cand = order[np.clip(j, 0, max(len(order) - 1, 0))].astype(np.int64)
        same = inside & (self.session[cand] == self.session[pos])
        return np.where(same, cand, -1)
