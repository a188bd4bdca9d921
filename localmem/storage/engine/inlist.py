"""IN lists of bound values: the one place that writes ``?,?,…`` and cuts long lists.

SQLite caps the bound variables of a statement (32,766 since 3.32) and a long IN list
makes a statement's plan slow to build, so every list of ids or hashes of unknown length
is bound ``CHUNK`` values at a time.

Invariants: a query with ``{marks}`` in its text runs once per chunk, in input order,
and duplicates are dropped before chunking (order of first appearance kept), so no row is
returned twice for a value given twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

CHUNK = 500  # bound values per statement


def marks(n: int) -> str:
    """``n`` comma-separated ``?`` marks (``n`` ≥ 1)."""
    return ",".join("?" * n)


def chunks(items: Iterable[T], size: int = CHUNK) -> Iterator[Sequence[T]]:
    """The distinct ``items`` (first appearance kept) in slices of at most ``size``."""
    unique = list(dict.fromkeys(items))
    for at in range(0, len(unique), size):
        yield unique[at : at + size]


def rows_in(
    conn: Any, sql: str, values: Iterable[Any], *, before: Sequence[Any] = (), size: int = CHUNK
) -> Iterator[Any]:
    """The rows of ``sql`` (which holds one ``{marks}``) for every chunk of ``values``;
    ``before`` are bound ahead of the chunk's values on each run."""
    for part in chunks(values, size):
        yield from conn.execute(sql.format(marks=marks(len(part))), (*before, *part))
