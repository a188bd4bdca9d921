"""A hybrid logical clock (Kulkarni, Demirbas et al., "Logical Physical Clocks and
Consistent Snapshots in Globally Distributed Databases", 2014, algorithm 2).

Sync orders the changes of several devices whose wall clocks disagree. A timestamp is
one integer: the physical part (milliseconds since the epoch, the largest wall time this
clock has seen, its own or a peer's) shifted left by 16 bits, plus a logical counter that
breaks ties within one millisecond. Invariants:

- ``now()`` is strictly greater than every timestamp this clock gave out or received
  (``observe``), so a change made after folding a peer's segment orders after every change
  in it, however far behind this device's wall clock is;
- the physical part never runs ahead of the largest wall time seen, so timestamps stay
  close to real time (a peer's clock far in the future drags them, as the paper accepts).

PyPI's ``hlcpy`` (0.0.2, 2021, unmaintained) does the same over a string form; the
algorithm is a dozen lines, so it lives here with the state kept in the store.
"""

from __future__ import annotations

import time
from collections.abc import Callable

LOGICAL_BITS = 16
_LOGICAL_MASK = (1 << LOGICAL_BITS) - 1


def pack(physical_ms: int, logical: int) -> int:
    return (physical_ms << LOGICAL_BITS) | logical


def unpack(stamp: int) -> tuple[int, int]:
    return stamp >> LOGICAL_BITS, stamp & _LOGICAL_MASK


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class HybridClock:
    """One device's clock; ``last`` is the newest timestamp given out or received."""

    def __init__(self, last: int = 0, wall: Callable[[], int] = wall_ms) -> None:
        self.last = last
        self._wall = wall

    def now(self) -> int:
        """A timestamp for a local event (the paper's send/local case)."""
        l_old, c_old = unpack(self.last)
        physical = max(l_old, self._wall())
        logical = c_old + 1 if physical == l_old else 0
        return self._set(physical, logical)

    def observe(self, remote: int) -> int:
        """Merge a timestamp received from another device (the paper's receive case)."""
        l_old, c_old = unpack(self.last)
        l_m, c_m = unpack(remote)
        physical = max(l_old, l_m, self._wall())
        if physical == l_old == l_m:
            logical = max(c_old, c_m) + 1
        elif physical == l_old:
            logical = c_old + 1
        elif physical == l_m:
            logical = c_m + 1
        else:
            logical = 0
        return self._set(physical, logical)

    def _set(self, physical: int, logical: int) -> int:
        if logical > _LOGICAL_MASK:  # 65k events in one millisecond: borrow the next one
            physical, logical = physical + 1, 0
        self.last = pack(physical, logical)
        return self.last
