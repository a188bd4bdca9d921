"""The hooks' outcomes, kept beside the store (``<db>-hooks.json``) for ``doctor`` and
``stats``: runs, replies, quiet runs and failures per event, failures by kind, and the
last error (when, which client and event, its kind and message).

A hook records its outcome even when the store cannot be written: the file is its own,
outside SQLite. It is kept at a fixed size (``SIZE`` bytes, JSON padded with spaces) and
rewritten in place, so recording a failure needs no new disk block and still works on a
full disk once the file exists (``hooks install`` makes it). Hooks running at once take
turns on it (``flock``). Recording never raises and never disturbs the agent. A status
that cannot be written beside the store (its folder read-only, a file system mounted
read-only) goes to this user's state folder instead (:func:`fallback_path`), saying where it
could not go and why; :func:`read` returns whichever of the two holds the latest run, and
:func:`summary` (``doctor``, ``stats``, ``hooks status``) names the folder that refused it.
Lost only when neither can be written. Messages hold error text and paths, never a prompt
or a transcript's words.

Failure kinds: ``store locked`` (another process held the write lock too long), ``disk
full``, ``key missing`` (an encrypted store and no key, or a wrong one), ``timeout`` (the
hook's deadline), ``read-only``, ``bad payload``, ``no transcript`` (an ingest hook's payload named
a transcript that is not a file), ``error`` (anything else, with its type).

Standard library only (and ``util.private``, imported when the file is made). The file is
mode 600 whatever the umask: its messages name paths.
"""

from __future__ import annotations

import json
import os
import time

TYPE_CHECKING = False  # typing costs ~3 ms of a hook's fast path (``hooks.quick``); type checkers take the branch
if TYPE_CHECKING:
    from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no flock; concurrent hooks may then lose a count
    fcntl = None  # type: ignore[assignment]

SIZE = 8192
MAX_MESSAGE = 300
KINDS = ("store locked", "disk full", "key missing", "timeout", "read-only", "bad payload", "no transcript", "error")


def path_for(db: str | os.PathLike[str]) -> str:
    """The status file of the store at ``db``: ``<db>-hooks.json`` (os.path, not pathlib:
    ~3 ms of a hook's fast path). ValueError for a path with no file name."""
    path = os.fspath(db).rstrip("/") or os.fspath(db)
    if os.path.basename(path) in ("", ".", ".."):
        raise ValueError(f"{path!r} names no file")
    return path + "-hooks.json"


def empty() -> dict[str, Any]:
    return {"events": {}, "failures": {}, "last_error": None, "last_run": None}


def fallback_path(db: str | os.PathLike[str]) -> str:
    """Where the status of the store at ``db`` goes when it cannot be written beside the
    store: ``$XDG_STATE_HOME/localmem/hook-status/<file name>-<digest of its real path>``
    (``~/.local/state`` when that is unset or relative; ``%LOCALAPPDATA%`` on Windows)."""
    import hashlib  # lazy: only a status that could not be written beside the store, and its readers

    p = os.path.realpath(path_for(db))
    if os.name == "nt":
        base = os.environ.get("LOCALAPPDATA") or os.path.expanduser("~")
    else:
        base = os.environ.get("XDG_STATE_HOME", "")
        if not os.path.isabs(base):  # the XDG rule: a relative value is ignored
            base = os.path.join(os.path.expanduser("~"), ".local", "state")
    digest = hashlib.sha256(os.fsencode(p)).hexdigest()[:16]
    return os.path.join(base, "localmem", "hook-status", f"{os.path.basename(p)}-{digest}")


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
        data = json.loads(text) if text else empty()
    except (OSError, ValueError):
        return empty()
    return data if isinstance(data, dict) else empty()


def _at(data: dict[str, Any]) -> str:
    return str((data.get("last_run") or {}).get("at") or "")


def read(db: str | os.PathLike[str]) -> dict[str, Any]:
    """The recorded outcomes (empty when nothing was recorded or the file is unreadable).
    When runs went to :func:`fallback_path`, the file with the latest run is returned: the
    fallback's with ``unwritable`` (``{"path", "error", "at"}``: where a run could not be
    recorded and why) and ``status_file``; or the store's own with ``unwritable_before``
    (it could not be written for a while, and can be again)."""
    data = _read(path_for(db))
    try:
        other = fallback_path(db)
    except ValueError:
        return data
    if not os.path.exists(other):
        return data
    moved = _read(other)
    refused = moved.get("unwritable")
    if not refused:
        return data
    if _at(moved) >= _at(data):
        return {**moved, "status_file": other}
    return {**data, "unwritable_before": refused}


def create(db: str | os.PathLike[str]) -> str:
    """Make the file at its full size (so later records need no new space), mode 600 in a
    folder made 700 (``util.private``); keeps it if it exists. Its path."""
    return _create(path_for(db))


def _create(p: str) -> str:
    from localmem.util import private  # not on the fast path: the file exists once hooks are installed

    if not os.path.exists(p):
        private.make_private_dir(os.path.dirname(p) or ".")
        with private.open_private(p, "xb") as fh:
            fh.write(_padded(empty()))
    return p


def record(
    db: str | os.PathLike[str],
    client: str,
    event: str,
    outcome: str,
    *,
    ms: float,
    kind: str | None = None,
    message: str = "",
    detail: dict[str, Any] | None = None,
) -> None:
    """Count one run of ``event``: ``outcome`` is ``replied``, ``quiet`` (nothing to say, or
    nothing new) or ``failed`` (with ``kind`` and ``message``)."""
    now = time.strftime("%Y-%m-%dT%H:%M:%S")
    run = {"at": now, "client": client, "event": event, "outcome": outcome, "ms": round(ms, 1), **(detail or {})}
    failure = {"kind": kind or "error", "message": message[:MAX_MESSAGE]} if outcome == "failed" else None
    try:
        p = path_for(db)
        _count(p, event, outcome, run, failure, None)
        return
    except ValueError:  # a path naming no file: nowhere to keep it
        return
    except OSError as exc:  # beside the store it cannot be written: this user's state folder takes it
        refused = {"path": p, "error": exc.strerror or type(exc).__name__, "at": now}
    try:  # noqa: SIM105 (contextlib is an import the hook's fast path does without)
        _count(fallback_path(db), event, outcome, run, failure, refused)
    except (OSError, ValueError):  # lost, never the agent's problem (module docstring)
        pass


def _count(
    p: str,
    event: str,
    outcome: str,
    run: dict[str, Any],
    failure: dict[str, str] | None,
    refused: dict[str, str] | None,
) -> None:
    """Add one run to the status file ``p`` (made when missing), under its lock; OSError when
    it cannot be written. ``refused``: where the run could not be recorded, and why."""
    if not os.path.exists(p):
        _create(p)
    with open(p, "r+b") as fh:
        if fcntl is not None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        raw = fh.read().decode("utf-8", errors="replace").strip()
        try:
            data = json.loads(raw) if raw else empty()
        except ValueError:
            data = empty()
        ev = data.setdefault("events", {}).setdefault(event, {})
        ev["runs"] = ev.get("runs", 0) + 1
        ev[outcome] = ev.get(outcome, 0) + 1
        ev["last_ms"] = run["ms"]
        data["last_run"] = run
        if failure is not None:
            k = failure["kind"]
            data.setdefault("failures", {})[k] = data.get("failures", {}).get(k, 0) + 1
            data["last_error"] = {**run, **failure}
        if refused is not None:
            data["unwritable"] = refused
        fh.seek(0)
        fh.write(_padded(data))
        fh.flush()


def _padded(data: dict[str, Any]) -> bytes:
    body = json.dumps(data, ensure_ascii=False, sort_keys=True).encode("utf-8")
    if len(body) > SIZE - 1:  # never grows: drop the details first
        data = {**data, "last_run": None}
        if data.get("last_error"):
            data["last_error"] = {k: v for k, v in data["last_error"].items() if k in ("at", "kind", "event")}
        body = json.dumps(data, sort_keys=True).encode("utf-8")
        if len(body) > SIZE - 1:  # cannot happen with the fields above; never write broken JSON
            body = json.dumps(empty()).encode("utf-8")
    return body + b" " * (SIZE - 1 - len(body)) + b"\n"


def runs(db: str | os.PathLike[str], event: str) -> int:
    """How many runs of ``event`` are counted for the store at ``db``."""
    n = (read(db).get("events") or {}).get(event, {}).get("runs", 0)
    return n if isinstance(n, int) else 0


def wait_for_runs(db: str | os.PathLike[str], event: str, n: int, timeout: float, poll: float = 0.02) -> int:
    """Wait until ``event`` is counted ``n`` times (a detached hook's worker counts each run
    once it is done: ``hooks.background``), at most ``timeout`` seconds; the count then."""
    end = time.monotonic() + timeout
    while (got := runs(db, event)) < n and time.monotonic() < end:
        time.sleep(poll)
    return got


def summary(data: dict[str, Any]) -> str:
    """One line for ``doctor`` / ``stats``."""
    events = data.get("events") or {}
    if not events:
        return unwritable(data) + "no hook has run yet"
    parts = []
    for name, ev in sorted(events.items()):
        bits = [f"{ev.get('runs', 0)} runs"]
        bits += [f"{ev[k]} {k}" for k in ("replied", "quiet", "failed") if ev.get(k)]
        parts.append(f"{name} " + ", ".join(bits))
    text = "; ".join(parts)
    failures = data.get("failures") or {}
    if failures:
        text += "; failures: " + ", ".join(f"{n} {k}" for k, n in sorted(failures.items()))
    return unwritable(data) + text


def unwritable(data: dict[str, Any]) -> str:
    """The words that say a status could not be written beside the store ('' when it could)."""
    if refused := data.get("unwritable"):
        return (
            f"status could not be written to {refused.get('path')} ({refused.get('error')}); "
            f"recorded in {data.get('status_file')} since {refused.get('at')}: "
        )
    if refused := data.get("unwritable_before"):
        return f"status could not be written to {refused.get('path')} ({refused.get('error')}) at {refused.get('at')}, and can be now: "
    return ""
