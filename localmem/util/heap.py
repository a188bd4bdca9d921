"""Give the C heap's free pages back to the system after a big, one-off allocation.

glibc keeps memory freed by native code (onnxruntime's graph optimisation while it
loads the embedding model, SQLite and numpy while the vector mirrors load) in the
process's heap, so a long-running MCP server would keep its load-time peak as resident
memory. ``malloc_trim(0)`` returns those pages: measured on the 2-core dev machine, a
process that has loaded the MiniLM model goes from 239 MB to 173 MB resident, with no
change in query speed. Invariant: a no-op (never an error) where the C library is not
glibc (macOS, musl, Windows).
"""

from __future__ import annotations

import ctypes
import ctypes.util

BIG_LOAD = 10_000  # rows loaded at once after which callers release (a first mirror load)
_trim: object = None


def _malloc_trim() -> object:
    global _trim
    if _trim is None:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            _trim = getattr(libc, "malloc_trim", False)
        except OSError:
            _trim = False
    return _trim


def release() -> bool:
    """Return free heap pages to the system; True when the C library could."""
    fn = _malloc_trim()
    if not fn:
        return False
    return bool(fn(0))  # type: ignore[operator]
