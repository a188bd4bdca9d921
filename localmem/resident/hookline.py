"""A raw hook command line (op ``hook-cli``) answered by a resident process: the plan the
server's planner makes of it (``localmem.hooks.served``), checked against the server's own
store and settings, then a session start's or a prompt's recall within the time the plan
leaves of the hook's deadline, or an ingest event's transcript read into the store for a
detached hook (``hooks.detach``) for at most about ``INGEST_S``.

Invariants (``resident.server``'s, which calls :func:`answer`): what the server does is
what the caller's own process would (the same plan, the same recall or ingest); an ingest
runs only under the caller's own write settings (``wire.write_fingerprint``), and one
longer than ``INGEST_S`` is refused ``partial`` once its first batches are stored: the
caller reads on from there in its own process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from localmem.resident import recall, wire
from localmem.storage.layers.recalls import RecallWrite
from localmem.storage.write.store import Store

INGEST_S = 2.0  # a hook's ingest done here stops at the first batch's end past this; the caller reads on
Answer = tuple[dict[str, Any], RecallWrite | None]  # a reply, and the recall-log row left to write
Early = Callable[[dict[str, Any]], None] | None


class Serving(Protocol):
    """What of the server (``resident.server.ResidentServer``) a hook line needs."""

    store: Store
    hooks: Callable[[wire.HookCall], wire.HookPlan] | None
    writes: str  # the server's ``wire.write_fingerprint``
    busy_s: float  # how long a call waits for the store's lock
    wait_s: float  # what a caller may wait past the work: the lock, the reply

    def planned(self, plan_of: Callable[[], wire.HookPlan]) -> wire.HookPlan | Answer: ...

    def locked(self, call: Callable[[], Answer], busy_s: float = ...) -> Answer: ...

    def within(self, call: Callable[[], Answer], seconds: float) -> Answer: ...


def answer(server: Serving, req: dict[str, Any], early: Early) -> Answer:
    """A raw hook command line (op ``hook-cli``): its plan, checked, and its recall
    answered within the time the plan leaves, which ``early`` tells the caller first
    (module docstring)."""
    hooks = server.hooks
    assert hooks is not None
    t0 = time.monotonic()
    plan = server.planned(lambda: hooks(wire.parse_hook_call(req)))
    if isinstance(plan, tuple):  # refused
        return plan
    if plan.ingest is not None:
        return _ingest(server, plan, early)
    ask = plan.ask
    if ask is None:
        return {"ok": True, **plan.render(None)}, None
    left = plan.left - (time.monotonic() - t0)  # the plan's time (a caller's first settings: ~30 ms) is the hook's
    if left <= 0:
        return refuse("timeout"), None
    if early is not None:
        early({"ok": True, "left": left})
    return server.within(
        lambda: server.locked(
            lambda: ({"ok": True, **plan.render(recall.answer(server.store, ask))}, None), min(server.busy_s, left)
        ),
        left,
    )


def _ingest(server: Serving, plan: wire.HookPlan, early: Early) -> Answer:
    """An ingest hook's transcript read into this process's store (op ``hook-cli`` from a
    detached hook: ``hooks.detach``), for at most about ``INGEST_S``: a longer one is
    refused ``partial`` once its first batches are stored, and the caller reads on from
    there in its own process."""
    ingest = plan.ingest
    assert ingest is not None
    if plan.write_fingerprint != server.writes:
        return refuse("settings"), None  # what it stores would differ: the caller's own process
    if early is not None:
        early({"ok": True, "left": INGEST_S + server.wait_s})  # a batch may run past INGEST_S

    def work() -> Answer:
        until = time.monotonic() + INGEST_S
        got = ingest(server.store, lambda: time.monotonic() > until)
        if got.get("stopped"):
            return refuse("partial"), None
        return {"ok": True, **plan.render(got)}, None

    return server.locked(work)


def refuse(why: str) -> dict[str, Any]:
    return {"ok": False, "why": why}
