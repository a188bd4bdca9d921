"""A device in its own process, for the sync tests that kill one (``python -m
tests.helpers.sync_worker ROLE DB FOLDER [N]``): ``write-sync`` writes N sessions, syncing after
each; ``sync`` makes one pass, printing ``recorded K`` after each segment it folds and, given
``--pause-at K``, waiting on stdin after the K-th, so a kill there lands mid-fold for certain.
Prints one line per step, flushed, so the test knows what was acknowledged before the kill."""

from __future__ import annotations

import sys
from pathlib import Path

from localmem.sync import fold
from tests.helpers.sync import open_device, session, sync


def _signal_each_segment(pause_at: int) -> None:
    record, seen = fold._record, [0]

    def signalled(*args: object) -> None:
        record(*args)  # type: ignore[arg-type]
        seen[0] += 1
        print(f"recorded {seen[0]}", flush=True)
        if seen[0] == pause_at:
            sys.stdin.readline()

    fold._record = signalled  # type: ignore[assignment]


def main() -> None:
    role, db, root = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    store = open_device(db)
    if role == "write-sync":
        for i in range(int(sys.argv[4])):
            store.write(session(f"s{i}", *(f"Turn {j} of session {i} about topic {i * 7 + j}." for j in range(5))))
            print(f"wrote s{i}", flush=True)
            sync(store, root)
            print(f"synced s{i}", flush=True)
    elif role == "sync":
        _signal_each_segment(int(sys.argv[5]) if sys.argv[4:5] == ["--pause-at"] else 0)
        print("ready", flush=True)
        done = sync(store, root)
        print(f"folded {done.folded.segments}", flush=True)
    store.close()


if __name__ == "__main__":
    main()
