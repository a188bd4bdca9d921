"""util.heap: freed C-heap pages go back to the system (real process, real glibc)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_CHILD = textwrap.dedent(
    """
    import ctypes, ctypes.util
    from localmem.util import heap

    def rss_kb():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])

    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    blocks = [libc.malloc(1024) for _ in range(150_000)]  # ~150 MB of small heap blocks
    for b in blocks:
        ctypes.memset(b, 1, 1024)
    keep = libc.malloc(1024)  # pins the top of the heap, as live objects do
    for b in blocks:
        libc.free(b)
    before = rss_kb()
    ok = heap.release()
    print(before, rss_kb(), ok)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc_trim")
def test_release_returns_freed_heap_pages() -> None:
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True, check=True, timeout=60)
    before, after, ok = out.stdout.split()
    assert ok == "True"
    assert int(before) - int(after) > 100_000  # kB: most of the freed 150 MB left the process


def test_idle_release_trims_once_after_a_burst_of_calls() -> None:
    import threading
    import time

    from localmem.util.heap import IdleRelease

    calls: list[float] = []
    done = threading.Event()

    def fake_release() -> None:
        calls.append(time.monotonic())
        done.set()

    idle = IdleRelease(delay=0.3, release=fake_release)
    last = 0.0
    for _ in range(5):  # a burst: each poke pushes the trim back
        # Read before the poke: the timer counts from inside it, so a busy machine that
        # delays this thread after the poke cannot make the trim look early.
        last = time.monotonic()
        idle.poke()
        time.sleep(0.05)
    assert done.wait(10)
    time.sleep(0.6)  # a second trim would have come by now
    assert len(calls) == 1
    assert calls[0] - last >= 0.3

    idle.poke()
    idle.cancel()  # the server stops: no trim after it
    time.sleep(0.6)
    assert len(calls) == 1
