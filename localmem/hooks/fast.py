"""A hook's recall through the store's resident process: what ``python -m localmem.hooks``
tries first at a session's start and a prompt, before anything heavy is imported.

:func:`answer` asks the resident process (``resident.client.ask_hook``) for the recall
``resident.recall.answer`` computes, with this process's hook settings (budget, bar) and
within what is left of the hook's deadline; when it answers, the reply is written and the
outcome counted (``via: resident``) and the process is done. When none answers, the
caller starts one for next time (``resident.daemon``) and does the same work in-process
(``hooks.run``), from :func:`hook_ask`, the one description of the question both paths use.

Invariant: light (the standard library, ``config``, ``hooks.events`` / ``status`` and the
light side of ``resident``): no numpy, no model, no store opened here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from localmem.config import Settings
from localmem.hooks import events, status
from localmem.hooks.events import HookEvent
from localmem.resident import client
from localmem.resident.wire import HOOK_EVENTS, HookAsk

MARGIN_S = 0.1  # of the deadline kept for printing the reply and counting the outcome


def deadline(settings: Settings, event: str) -> float:
    """Seconds a hook for ``event`` may take, counted from the process's start."""
    h = settings.hooks
    return {"session-start": h.session_deadline, "prompt": h.prompt_deadline}.get(event, h.ingest_deadline)


def hook_ask(settings: Settings, ev: HookEvent, here: str | None = None) -> HookAsk:
    """What a session-start or prompt hook asks, in-process or of the resident process: its
    project is the payload's ``cwd`` (else the hook's folder ``here``, default this
    process's), made absolute against ``here`` (a resident process passes its caller's)."""
    budget = settings.hooks.session_budget if ev.event == "session-start" else settings.hooks.prompt_budget
    folder = here or os.getcwd()
    project = os.path.normpath(os.path.join(folder, os.path.expanduser(ev.cwd or folder)))  # abspath, from ``here``
    return HookAsk(ev.event, ev.client, project, ev.session_id, ev.prompt, budget, settings.hooks.prompt_bar)


def answer(
    settings: Settings, client_name: str, event: str, raw: bytes, write: Callable[[str], None], started: float
) -> str | None:
    """The hook done through the resident process (module docstring): None when it is done
    (replied, or quiet with nothing to recall for); else why the resident process did not
    answer (``client.ask_hook``; '' for an event it does not answer), and the caller does
    the work."""
    if event not in HOOK_EVENTS:
        return ""
    try:
        ev = events.parse(client_name, event, raw)
    except events.PayloadError:
        return ""  # counted by the in-process path, which names the failure the same way
    why = events.nothing_to_recall(ev)
    if why is not None:
        _record(settings, client_name, event, "quiet", started, {"why": why})
        return None
    left = started + deadline(settings, event) - time.perf_counter() - MARGIN_S
    if left <= 0:
        return "no time left"
    got, why_not = client.ask_hook(settings, hook_ask(settings, ev), left)
    if got is None:
        return why_not
    line, outcome, detail = served(ev, got)
    if line is not None:
        write(line)
    _record(settings, client_name, event, outcome, started, detail)
    return None


def served(ev: HookEvent, got: dict[str, Any]) -> tuple[str | None, str, dict[str, object]]:
    """A recall the resident process answered (``resident.recall.answer``'s dict): the line
    the hook prints (None: nothing), its outcome and the detail its status keeps; the
    same for op ``hook`` (here) and op ``hook-cli`` (``hooks.served``)."""
    detail: dict[str, object] = {"via": "resident"}
    detail.update({k: got[k] for k in ("turns", "best_cosine", "not_recorded") if k in got})
    if got["text"]:
        return reply_line(ev, got["text"]), "replied", detail
    return None, "quiet", detail


def reply_line(ev: HookEvent, text: str) -> str | None:
    """The line a hook prints to give ``text`` to its client (``events.reply``); None for a
    caller with no hook events that gives the text its own way (``localmem aider``: a file
    aider reads, ``hooks.aider_launch``)."""
    return events.reply(ev.client, ev.event, text) if ev.client in events.CLIENT_EVENTS else None


def _record(
    settings: Settings, client_name: str, event: str, outcome: str, started: float, detail: dict[str, object]
) -> None:
    ms = (time.perf_counter() - started) * 1000
    status.record(settings.db, client_name, event, outcome, ms=ms, detail=detail)
