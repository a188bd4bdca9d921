"""What ``localmem aider`` does around an aider session: the session-start context of the
project it starts in, written to a private file aider reads, and the session's chat history
stored once aider has exited.

Aider (Aider-AI/aider 0.86.2) has no hooks. What it reads on its own is a read-only file,
``--read FILE``: it must exist when aider starts (``aider/coders/base_coder.py``,
``Coder.__init__``: else "Read-only file … does not exist. Skipping.") and its text is read
again each time a request is built (``Coder.get_read_only_files_content``). Into its chat
history aider writes the file's name only, as tool output ("Added FILE to the chat
(read-only).", ``Coder.get_announcements``; the command line it echoes), never its text: a
``> `` line ``ingest.aider`` leaves out. So what localmem injects is not stored back (and
were a reply to quote a block, the write path drops it: ``util.injected``).

- :func:`context`: a session start of client ``aider`` (a ``HookEvent`` made here, its
  ``cwd`` the folder aider starts in, whose git root is the project: ``hooks.fast.hook_ask``),
  answered by the store's resident process when one serves it (``resident.client.ask_hook``)
  or in this process (``hooks.run.run_event``: the session-start hook's own work, within
  ``hooks.session_deadline`` counted from the launcher's start; a store locked elsewhere is
  waited for about half of it). Counted in the hooks' status (``doctor``) as client
  ``aider``. No store yet, a missing key, a lock or the deadline: no context, and why in
  words; never an exception.
- :func:`write_context`: the file, ``<runtime dir>/aider-<pid>-<random>/localmem-memory.md``
  (``resident.wire.runtime_dir``: ``$XDG_RUNTIME_DIR/localmem``, else ``run`` in the user
  data dir; the folder 700, the file 600), outside the repository; :func:`remove` takes it
  away. A folder whose launcher is gone (killed) is removed by the next launch.
- :func:`history_file`: where aider writes its history (``aider/args.py``:
  ``--chat-history-file``, default ``.aider.chat.history.md`` in the git root,
  ``aider/main.py`` ``get_git_root``, else the current folder); ``--chat-history-file`` or
  ``AIDER_CHAT_HISTORY_FILE`` when the person gives one (a ``chat-history-file`` in
  ``.aider.conf.yml`` is not read: such a history is stored by ``capture``).
- :func:`store_session`: that file from its resume point (``runner.ingest_file``, format
  ``aider``: the ``ingest_files`` row ``capture`` and ``watch`` use, so nothing is stored twice
  whoever reads it first; secrets redacted on the same write path), read to its end (aider
  has exited: no step is held back), waiting for a lock held elsewhere a bounded time.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from localmem.config import Settings
from localmem.hooks import run, status
from localmem.hooks.events import HookEvent
from localmem.hooks.fast import MARGIN_S, deadline, hook_ask, served
from localmem.ingest import runner
from localmem.memory import open_store
from localmem.resident import client, daemon, unix, wire
from localmem.storage.engine.retry import BUSY_TIMEOUT_ENV
from localmem.util import gitinfo, private

CLIENT = "aider"  # as the hooks' status and the recall log (``hook:aider``) name it
EVENT = "session-start"
FORMAT = "aider"  # ``ingest.aider``
HISTORY = ".aider.chat.history.md"
HISTORY_ENV = "AIDER_CHAT_HISTORY_FILE"
FILE_NAME = "localmem-memory.md"  # the name aider shows the model above the file's text
FOLDER_PREFIX = "aider-"
STORE_WAIT_MS = 5000  # a lock held elsewhere, waited for after aider exits (SQLite's busy timeout)


@dataclass(frozen=True)
class Context:
    text: str  # the wrapped context to give aider ('' for none)
    why: str = ""  # when there is none because of a failure or no store: why, in one line


def context(settings: Settings, folder: str, started: float) -> Context:
    """The session-start context of the project ``folder`` is in (module docstring), within
    the session-start deadline counted from ``started`` (a ``time.perf_counter()`` reading)."""
    ev = HookEvent(CLIENT, EVENT, cwd=folder)
    left = started + deadline(settings, EVENT) - time.perf_counter() - MARGIN_S
    why_not = "no time left"
    if left > 0:
        try:
            got, why_not = client.ask_hook(settings, hook_ask(settings, ev, folder), left)
        except Exception as exc:  # the resident path's own trouble: the in-process path names any failure
            got, why_not = None, f"error: {type(exc).__name__}"
        if got is not None:
            _, outcome, detail = served(ev, got)
            ms = (time.perf_counter() - started) * 1000
            status.record(settings.db, CLIENT, EVENT, outcome, ms=ms, detail=detail)
            return Context(str(got["text"]))
    note: dict[str, object] | None = {"resident": why_not} if why_not else None
    previous = os.environ.get(BUSY_TIMEOUT_ENV)  # the hook's work sets its own (a share of the deadline)
    try:
        out = run.run_event(settings, CLIENT, EVENT, lambda: ev, write=lambda _: None, started=started, note=note)
    finally:
        _restore(previous)
    if out.outcome == "failed":
        return Context("", f"{out.kind}: {out.message}")
    with contextlib.suppress(Exception):  # for the next launch, as a hook starts it; never this one's problem
        daemon.start(settings, settings.hooks.daemon_idle)  # (none for a store not made yet)
    why = (out.detail or {}).get("why")
    return Context(out.text, f"no store yet at {settings.db}" if why == "no store yet" else "")


def write_context(text: str, folder: Path | None = None) -> Path:
    """A new private file holding ``text`` (module docstring); ``folder``: where its own
    folder is made (default the runtime dir). OSError (or ValueError: a folder others may
    use) when it cannot be made."""
    base = folder or wire.runtime_dir()
    private.make_private_dir(base)
    problem = unix.folder_problem(base, create=False)
    if problem is not None:
        raise ValueError(problem)
    clear_stale(base)
    own = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-", dir=base))  # mode 700
    path = own / FILE_NAME
    try:
        private.write_file(path, text)
    except BaseException:
        shutil.rmtree(own, ignore_errors=True)
        raise
    return path


def remove(path: Path) -> None:
    """Take away the file :func:`write_context` made, with its folder."""
    shutil.rmtree(path.parent, ignore_errors=True)


def clear_stale(base: Path) -> None:
    """Remove the folders in ``base`` of launchers that are gone (killed before their own removal)."""
    for found in base.glob(f"{FOLDER_PREFIX}*-*"):
        pid = found.name[len(FOLDER_PREFIX) :].split("-", 1)[0]
        if pid.isdigit() and found.is_dir() and not _alive(int(pid)):
            shutil.rmtree(found, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def history_file(args: Sequence[str], folder: Path, env: Mapping[str, str] | None = None) -> Path:
    """The chat history aider run with ``args`` in ``folder`` writes (module docstring)."""
    env = os.environ if env is None else env
    named: str | None = env.get(HISTORY_ENV) or None
    no_git = False
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break  # what follows is aider's files, not its options
        if arg == "--chat-history-file" and i + 1 < len(args):
            named, i = args[i + 1], i + 1
        elif arg.startswith("--chat-history-file="):
            named = arg.split("=", 1)[1]
        elif arg in ("--no-git", "--git"):
            no_git = arg == "--no-git"
        i += 1
    if named:
        return folder / Path(named).expanduser()
    root = "" if no_git else gitinfo.repo_of(folder).root
    return Path(root or folder) / HISTORY


def store_session(settings: Settings, history: Path) -> runner.Report:
    """Store what ``history`` holds and the store lacks (module docstring). Raises
    ``LocalmemError`` (a locked store: ``StoreLocked``) or ``OSError``."""
    previous = os.environ.get(BUSY_TIMEOUT_ENV)
    os.environ[BUSY_TIMEOUT_ENV] = previous or str(STORE_WAIT_MS)  # bounded: the person is back at their shell
    try:
        with open_store(settings) as store:
            return runner.ingest_file(store, history, FORMAT, skip_bad=True)
    finally:
        _restore(previous)


def _restore(value: str | None) -> None:
    if value is None:
        os.environ.pop(BUSY_TIMEOUT_ENV, None)
    else:
        os.environ[BUSY_TIMEOUT_ENV] = value
