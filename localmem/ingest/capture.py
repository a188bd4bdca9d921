"""Coding agents' session logs (and VS Code's chat sessions) where the agents keep them:
the default folders, the files in them, and a backfill of everything not stored yet
(``localmem capture``; ``localmem watch`` with no folder follows the same folders).

=============  ==========================================  ===================================
client         folder (first that applies)                 files
=============  ==========================================  ===================================
claude-code    ``$CLAUDE_CONFIG_DIR/projects``,             ``<encoded cwd>/<session>.jsonl`` and
               ``~/.claude/projects``                       ``<session>/subagents/*.jsonl``
codex          ``$CODEX_HOME/sessions``, ``~/.codex/sessions``  ``YYYY/MM/DD/rollout-*.jsonl``
gemini         ``~/.gemini/tmp``                            ``<project>/chats/session-*.json(l)``
vscode         ``$VSCODE_PORTABLE/user-data/User``, else    ``workspaceStorage/<id>/chatSessions/
               ``~/.config/Code/User`` (Linux,              *.json(l)`` and ``globalStorage/
               ``$XDG_CONFIG_HOME``), ``~/Library/          emptyWindowChatSessions/*.json(l)``
               Application Support/Code/User`` (macOS),
               ``%APPDATA%\\Code\\User`` (Windows)
copilot        ``$COPILOT_HOME/session-state``,             ``<session>/events.jsonl``
               ``~/.copilot/session-state``
cursor         ``~/.cursor/projects``                       ``<project>/agent-transcripts/*.jsonl``
                                                            (and ``<id>/<id>.jsonl``,
                                                            ``<id>/subagents/*.jsonl``)
opencode       ``$XDG_DATA_HOME/opencode``,                ``opencode.db`` (``opencode-<channel>.db``),
               ``~/.local/share/opencode``                 a SQLite database: ``ingest.opencode``
aider          only when asked (``--only aider`` or          ``.aider.chat.history.md`` in the
               ``--dir aider=PATH``): PATH, else ``~``       folder and up to 3 folders below it
=============  ==========================================  ===================================

Aider writes its history into each repository, not a folder of its own: its location is a
folder of repositories (``--dir aider=~/code``), searched ``AIDER_DEPTH`` folders deep,
hidden folders skipped; it is left out of the default set so that ``watch`` never follows
a whole home folder unasked.

OpenCode keeps its sessions in a SQLite database, not in log files: it is read read-only
with progress per session (``ingest.opencode_runner``), and ``watch`` follows its folder (not
recursively: its ``snapshot``, ``log`` and ``storage`` folders are not sessions) for changes
to the database or its ``-wal``.

VS Code's folder is its ``User`` folder (``--dir vscode=PATH`` names another, e.g. VS Code
Insiders' ``Code - Insiders/User``); it gives two locations, its workspaces' chat sessions
and its empty windows', so that ``watch`` follows those folders and not the whole ``User``
folder (settings, file history, extension state).

Invariants:
- resumable and idempotent: each file goes through ``runner.ingest_file`` (its resume point
  in ``ingest_files``), and a file whose stored state says it was read to its end at its
  present size and time is not opened at all; a second backfill stores nothing new;
- a log written in the last ``RECENT`` seconds is read with ``hold`` (a step the agent is
  still in is left for the next read: ``ingest._agent``); an older one is read to its end.
  A log whose open step was held back is named in the report (``held``) with the time
  from which a backfill reads it whole (its last write + ``RECENT``), so nothing is held
  back without saying so;
- one bad file never stops a backfill: it is reported (file and reason) and the next is
  read; a store that cannot be written stops it (``StoreError`` propagates).
"""

from __future__ import annotations

import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localmem.errors import InputError, LocalmemError, StoreError
from localmem.ingest import opencode, opencode_runner, runner, state
from localmem.storage.write.store import Store

CLIENTS = ("claude-code", "codex", "gemini", "vscode", "copilot", "cursor", "opencode", "aider")
ON_REQUEST = ("aider",)  # read only when named (--only, --dir): module docstring
AIDER_FILE = ".aider.chat.history.md"
AIDER_DEPTH = 3  # folders below an aider location searched for histories
VSCODE_PARTS = ("workspaceStorage",), ("globalStorage", "emptyWindowChatSessions")
RECENT = 120.0  # seconds: a log changed this recently may be mid-step (read with hold)


@dataclass(frozen=True)
class Location:
    """One agent's folder of session logs and how to read them."""

    client: str
    root: Path
    format: str  # the ingest format of its files

    @property
    def recursive(self) -> bool:
        """Whether its sessions lie in folders below ``root`` (all but OpenCode's database)."""
        return self.client != "opencode"

    def accepts(self, path: Path) -> bool:
        """Whether ``path`` (inside ``root``) is one of this agent's session logs."""
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return False
        name = path.name
        if self.client == "aider":
            return name == AIDER_FILE and len(rel.parts) <= AIDER_DEPTH + 1 and not _hidden(rel.parts[:-1])
        if _hidden(rel.parts):
            return False
        if self.client == "opencode":  # the database, or its -wal (where its writes land first)
            return len(rel.parts) == 1 and opencode.database_of(path) is not None
        if self.client == "vscode":
            if not name.endswith((".json", ".jsonl")):
                return False
            if self.root.name == "emptyWindowChatSessions":
                return len(rel.parts) == 1
            return len(rel.parts) == 3 and rel.parts[1] == "chatSessions"  # <workspace id>/chatSessions/<session>
        if self.client == "claude-code":
            return name.endswith(".jsonl")
        if self.client == "codex":
            return name.startswith("rollout-") and name.endswith(".jsonl")
        if self.client == "copilot":
            return name == "events.jsonl" and len(rel.parts) == 2  # <session>/events.jsonl
        if self.client == "cursor":
            return name.endswith(".jsonl") and len(rel.parts) >= 3 and rel.parts[1] == "agent-transcripts"
        return name.startswith("session-") and name.endswith((".json", ".jsonl")) and "chats" in rel.parts

    def files(self) -> list[Path]:
        """Its session logs, oldest first (by modification time, then name)."""
        if not self.root.is_dir():
            return []
        found = []
        # VS Code's workspace folders also hold its extensions' state (indexes, caches): only
        # the chat folders are listed.
        pattern = "*/chatSessions/*" if self.client == "vscode" and self.root.name == "workspaceStorage" else None
        if self.client == "opencode":
            candidates: Iterable[Path] = (p for p in self.root.glob("opencode*.db") if opencode.is_database(p))
        elif self.client == "aider":  # a folder of repositories: only so deep (module docstring)
            candidates = (p for d in range(AIDER_DEPTH + 1) for p in self.root.glob("*/" * d + AIDER_FILE))
        else:
            candidates = self.root.glob(pattern) if pattern else self.root.rglob("*")
        for path in candidates:
            try:
                if path.is_file() and self.accepts(path):
                    found.append((path.stat().st_mtime_ns, str(path), path))
            except OSError:
                continue  # gone meanwhile
        return [p for *_, p in sorted(found)]


# Each terminal agent's own folder (its settings and its session logs live under it), and
# the variable that moves it.
AGENT_HOMES = {
    "claude-code": ("CLAUDE_CONFIG_DIR", ".claude"),
    "codex": ("CODEX_HOME", ".codex"),
    "gemini": (None, ".gemini"),
    "copilot": ("COPILOT_HOME", ".copilot"),
    "cursor": (None, ".cursor"),
}
# The folder under it where its session logs are.
LOG_FOLDERS = {"claude-code": "projects", "codex": "sessions", "gemini": "tmp", "copilot": "session-state"}
LOG_FOLDERS |= {"cursor": "projects"}


def _hidden(parts: Iterable[str]) -> bool:
    return any(part.startswith(".") for part in parts)


def agent_home(client: str, env: Mapping[str, str], home: Path) -> Path:
    """The folder of a terminal agent (``AGENT_HOMES``): its variable when set, else under ``home``."""
    var, folder = AGENT_HOMES[client]
    return Path(env[var]).expanduser() if var and env.get(var) else home / folder


def default_root(
    client: str, env: Mapping[str, str] | None = None, home: Path | None = None, platform: str = sys.platform
) -> Path:
    """Where ``client`` keeps its session logs (module docstring; for vscode its ``User`` folder)."""
    env = os.environ if env is None else env
    home = home or Path.home()
    if client in AGENT_HOMES:
        return agent_home(client, env, home) / LOG_FOLDERS[client]
    if client == "aider":
        return home
    if client == "opencode":
        data = Path(env["XDG_DATA_HOME"]).expanduser() if env.get("XDG_DATA_HOME") else home / ".local" / "share"
        return data / "opencode"
    if client == "vscode":
        if env.get("VSCODE_PORTABLE"):
            return Path(env["VSCODE_PORTABLE"]).expanduser() / "user-data" / "User"
        if platform == "darwin":
            return home / "Library" / "Application Support" / "Code" / "User"
        if platform == "win32":
            return (Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming") / "Code" / "User"
        config = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else home / ".config"
        return config / "Code" / "User"
    raise InputError(f"unknown client {client!r}: one of {', '.join(CLIENTS)}")


def locations(
    only: Iterable[str] = (), folders: Mapping[str, Path] | None = None, env: Mapping[str, str] | None = None
) -> list[Location]:
    """The locations to read: every client (or ``only`` these), each at its default folder
    unless ``folders`` names another."""
    folders = folders or {}
    chosen = list(only) or [c for c in CLIENTS if c not in ON_REQUEST or c in folders]
    for name in [*chosen, *folders]:
        if name not in CLIENTS:
            raise InputError(f"unknown client {name!r}: one of {', '.join(CLIENTS)}")
    out: list[Location] = []
    for c in chosen:
        root = Path(folders[c]).expanduser() if c in folders else default_root(c, env)
        if c == "vscode":
            out.extend(Location(c, root.joinpath(*parts), c) for parts in VSCODE_PARTS)
        else:
            out.append(Location(c, root, c))
    return out


def unchanged(store: Store, path: Path) -> bool:
    """Whether ``path`` was read to its very end (nothing held back) at its present size
    and modification time: then it has nothing new and is not opened."""
    if opencode.is_database(path):
        return opencode_runner.unchanged(store, path)
    try:
        st = path.stat()
    except OSError:
        return True  # gone: nothing to read
    return any(
        r.complete and (r.stat.size, r.stat.mtime_ns) == (st.st_size, st.st_mtime_ns) and r.cursor.offset == st.st_size
        for r in state.for_path(store.conn, path)
    )


@dataclass
class CaptureReport:
    """What a backfill did, in all and by client."""

    locations: list[dict[str, Any]] = field(default_factory=list)
    files: int = 0
    unchanged: int = 0
    read: int = 0
    sessions: int = 0
    new: int = 0
    already_present: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    by_client: dict[str, Counter[str]] = field(default_factory=dict)
    errors: list[dict[str, str]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)  # file, client, after (unix s)
    stopped: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "locations": self.locations,
            "files": self.files,
            "unchanged": self.unchanged,
            "read": self.read,
            "sessions": self.sessions,
            "new": self.new,
            "already_present": self.already_present,
            "skipped": dict(self.skipped),
            "by_client": {c: dict(n) for c, n in self.by_client.items()},
            "errors": self.errors,
            "held": [{**h, "after": _local(h["after"], "%Y-%m-%dT%H:%M:%S")} for h in self.held],
            "stopped": self.stopped,
            "seconds": round(self.seconds, 2),
        }

    def line(self) -> str:
        text = (
            f"captured {self.files} logs ({self.read} read, {self.unchanged} unchanged): {self.sessions} sessions, "
            f"{self.new} new turns, {self.already_present} already present"
        )
        if self.errors:
            text += f", {len(self.errors)} files skipped (see --json)"
        if self.stopped:
            text += " (stopped early; run it again to continue)"
        text += f", in {self.seconds:.1f} s"
        if self.held:
            n = len(self.held)
            logs, them, settle = ("logs", "them", "they settle") if n != 1 else ("log", "it", "it settles")
            after = _local(max(h["after"] for h in self.held), "%H:%M:%S")
            text += (
                f"\nheld back the last step of {n} {logs} written in the last {RECENT / 60:g} minutes (still being "
                f"written): `localmem capture` reads {them} after {after}, `localmem watch` as soon as {settle}"
            )
        return text


def _local(t: float, fmt: str) -> str:
    return time.strftime(fmt, time.localtime(t))


def held_back(store: Store, path: Path) -> bool:
    """Whether the last read of ``path`` stopped before the end it saw (an open step held)."""
    records = state.for_path(store.conn, path)
    return bool(records) and all(r.cursor.offset < r.stat.size for r in records)


def every_log(locs: Iterable[Location]) -> Iterator[tuple[Location, Path]]:
    """Every log of ``locs``, by location, oldest first."""
    for loc in locs:
        for path in loc.files():
            yield loc, path


def backfill(
    store: Store,
    locs: list[Location],
    *,
    progress: Callable[[int], None] | None = None,
    on_total: Callable[[int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    now: Callable[[], float] = time.time,
) -> CaptureReport:
    """Store what the logs in ``locs`` hold and the store lacks (module docstring).
    ``on_total`` is told the bytes to read once they are known, ``progress`` the bytes of
    each file when it is done."""
    t0 = time.perf_counter()
    report = CaptureReport(locations=[{"client": loc.client, "folder": str(loc.root)} for loc in locs])
    todo: list[tuple[Location, Path, int]] = []
    for loc, path in every_log(locs):
        report.files += 1
        if unchanged(store, path):
            report.unchanged += 1
            continue
        try:
            todo.append((loc, path, path.stat().st_size))
        except OSError:
            report.unchanged += 1
    if on_total is not None:
        on_total(sum(size for *_, size in todo))
    for loc, path, size in todo:
        if should_stop is not None and should_stop():
            report.stopped = True
            break
        counts = report.by_client.setdefault(loc.client, Counter())
        if loc.client == "opencode":
            _database(store, path, report, counts, now(), should_stop)
            if progress is not None:
                progress(size)
            if report.stopped:
                break
            continue
        try:
            mtime = path.stat().st_mtime
            recent = now() - mtime < RECENT
            got = runner.ingest_file(store, path, loc.format, skip_bad=True, hold=recent, should_stop=should_stop)
        except StoreError:
            raise
        except (LocalmemError, OSError) as exc:
            report.errors.append({"file": str(path), "client": loc.client, "error": str(exc)})
            counts["errors"] += 1
        else:
            report.read += 1
            report.sessions += got.sessions
            report.new += got.new
            report.already_present += got.already_present
            report.skipped.update(got.skipped)
            report.errors.extend({"file": str(path), "client": loc.client, **e} for e in got.errors)
            counts.update(files=1, new=got.new, already_present=got.already_present)
            if recent and not got.stopped and held_back(store, path):
                report.held.append({"file": str(path), "client": loc.client, "after": mtime + RECENT})
            if got.stopped:
                report.stopped = True
                break
        if progress is not None:
            progress(size)
    report.seconds = time.perf_counter() - t0
    return report


def _database(
    store: Store,
    db: Path,
    report: CaptureReport,
    counts: Counter[str],
    now: float,
    should_stop: Callable[[], bool] | None,
) -> None:
    """OpenCode's database into ``report``: a session updated in the last ``RECENT``
    seconds is read with ``hold`` and named in ``held`` when a step of it was held back."""
    try:
        got = opencode_runner.ingest(store, db, hold_since=now - RECENT, should_stop=should_stop)
    except StoreError:
        raise
    except (LocalmemError, OSError) as exc:
        report.errors.append({"file": str(db), "client": "opencode", "error": str(exc)})
        counts["errors"] += 1
        return
    r = got.report
    report.read += 1
    report.sessions += r.sessions
    report.new += r.new
    report.already_present += r.already_present
    report.skipped.update(r.skipped)
    report.errors.extend({"file": str(db), "client": "opencode", **e} for e in r.errors)
    counts.update(files=1, new=r.new, already_present=r.already_present)
    report.held.extend(
        {"file": str(db), "client": "opencode", "session": h["session"], "after": h["updated"] + RECENT}
        for h in got.held
    )
    report.stopped = report.stopped or r.stopped
