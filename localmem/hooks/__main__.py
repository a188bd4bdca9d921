"""``python -m localmem.hooks [--db DB] EVENT --client CLIENT``: the command the agents' hook
entries run (``localmem hooks install`` writes them), with the client's JSON on stdin.

An event that ingests (stop, pre-compact, session end) is done in the background: the
process forks once the payload is read and the agent's wait ends (``hooks.detach``), its
child queues the work for the store's one ingest worker (``hooks.background``).
A session start or a prompt is first sent raw to the store's resident process
(``hooks.quick``: the standard library only, no settings loaded); the hook with its
settings loaded (``hooks.entry``: the settings, then the same question with them, then the
in-process path) is imported only when that did not answer, and then does everything as
it does without a resident process. Exits 0 whatever happens (``localmem.hooks``).
"""

from __future__ import annotations

import sys
import time

from localmem.hooks import detach

MAX_PAYLOAD = 1 << 20  # hooks.events.MAX_PAYLOAD: the payload read, as every path reads it


def main(argv: list[str] | None = None) -> int:
    t0 = time.perf_counter()
    args_in = sys.argv[1:] if argv is None else argv
    if "-h" in args_in or "--help" in args_in:
        from localmem.hooks import entry  # lazy: the parser, only to print its help

        entry.parser().print_help()
        return 0
    raw = sys.stdin.buffer.read(MAX_PAYLOAD + 1)
    if detach.wanted(detach.event_of(args_in)) and detach.detach():
        # the child: the agent has stopped waiting. The resident process reads the transcript
        # (its model loaded, its store open); else, or for a long one, this process does
        from localmem.hooks import entry, quick

        started = time.perf_counter()
        try:
            if quick.answer(args_in, raw, started, quick.INGEST):
                return 0
        except Exception:  # the resident's trouble: this process does the work and names any failure
            pass
        return entry.main(args_in, raw, started, detached=True)
    from localmem.hooks import quick  # lazy: a Stop's parent (above) exits before it is needed

    try:
        answered = quick.answer(args_in, raw, t0)
    except Exception:  # never the agent's problem: the path with settings loaded does the hook
        answered = False
    if answered:
        return 0
    from localmem.hooks import entry  # lazy: the settings and the rest, only when no resident process answered

    return entry.main(args_in, raw, t0)


if __name__ == "__main__":
    sys.exit(main())
