"""``localmem aider [--aider PATH] [-- AIDER ARGS…]``: aider with localmem's memory, since
aider has no hooks (``hooks.aider_launch`` says what is given and stored, and how).

1. find aider (``--aider PATH``, else ``aider`` on PATH; an error naming what to install);
2. the session-start context of the project of the current folder, within the session-start
   deadline, written to a private file that aider gets as ``--read FILE`` before the
   person's own arguments;
3. aider as a child on this terminal; its exit code is the command's;
4. once aider has exited: its chat history stored from its resume point, the file removed.

Invariants: localmem never keeps aider from running. A bad config or key file, no store
yet, a locked store, a missing key or the deadline: aider runs without the file, and one
line on stderr says why (so this command loads its settings itself: ``main`` hands it
``None``). While aider runs, Ctrl-C is aider's (the terminal sends SIGINT to both; this
process ignores it, so it cannot die half-way), and a SIGTERM or SIGHUP sent to this
process is passed on to aider, whose exit is then waited for, its session stored and the
file removed as after any exit. An exit by a signal N is 128 + N, as a shell reports it.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import NamedTuple

import apsw

from localmem.cli import keyflags
from localmem.cli.common import Subparsers
from localmem.config import Settings, load_settings
from localmem.errors import InputError, LocalmemError
from localmem.hooks import aider_launch

INSTALL = "`pipx install aider-chat`, or `python -m pip install aider-install && aider-install`"
# what this process passes on to aider while it runs (SIGINT reaches aider from the terminal itself)
FORWARDED = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


def add_aider(sub: Subparsers) -> None:
    c = sub.add_parser(
        "aider",
        help="run aider with this project's memory: recalled when it starts, its chat stored when it exits",
        description="Run aider in the current folder with localmem's memory. Aider has no hooks, so this command "
        "does what the other agents' session-start and stop hooks do: it gives aider the context a session start "
        "gives (where the project's last session left off, what it decided and left open) as a read-only file "
        "(--read), and when aider exits it stores the session from the repository's .aider.chat.history.md (as "
        "`localmem capture --dir aider=…` does: nothing twice, secrets redacted). Aider runs whatever happens: "
        "without the file, and a line on stderr saying why, when localmem cannot give it. "
        "Put aider's own arguments after `--`; one line makes it the everyday command: "
        "alias aider='localmem aider --'",
    )
    c.add_argument("--aider", metavar="PATH", help="the aider command (default: aider on PATH)")
    c.add_argument("aider_args", nargs="*", metavar="AIDER_ARGS", help="aider's own arguments, after --")
    c.set_defaults(func=cmd_aider, own_settings=True)


def find_aider(named: str | None) -> Path:
    """The aider command: ``named`` (a path or a name on PATH), else ``aider`` on PATH."""
    found = shutil.which(named or "aider")
    if found is None:
        if named:
            raise InputError(f"--aider {named}: not an executable file")
        raise InputError(f"aider is not on PATH: install it with {INSTALL}; or name it with --aider PATH")
    return Path(found)


def cmd_aider(args: argparse.Namespace, _: Settings | None = None) -> int:
    started = time.perf_counter()  # the session-start deadline counts from here
    command = find_aider(args.aider)
    folder = Path.cwd()
    settings, why = _settings(args)
    given: Path | None = None
    if settings is not None:
        got = aider_launch.context(settings, str(folder), started)
        why = got.why
        if got.text:
            try:
                given = aider_launch.write_context(got.text)
            except (OSError, ValueError) as exc:
                why = f"cannot write the context file: {exc}"
    if why:
        say(f"localmem: aider starts without memory: {why}")
    history = aider_launch.history_file(args.aider_args, folder)
    before = _stamp(history)
    try:
        code = run_child([str(command), *(["--read", str(given)] if given else []), *args.aider_args])
        if settings is not None and _stamp(history) not in (before, None):
            store(settings, history)
    finally:
        if given is not None:
            aider_launch.remove(given)
    return code


def _settings(args: argparse.Namespace) -> tuple[Settings | None, str]:
    """This command's settings, or None and why (a bad config or key file must not stop aider)."""
    try:
        keyflags.apply_key_file(args)
        return load_settings(db=args.db, embedder=args.embedder), ""
    except LocalmemError as exc:
        return None, str(exc)


def run_child(argv: list[str]) -> int:
    """Run ``argv`` on this terminal until it exits (module docstring: the signals); its exit code."""
    child: list[subprocess.Popen[bytes]] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGINT and child:
            with contextlib.suppress(OSError):
                child[0].send_signal(signum)

    # a Python handler, not SIG_IGN: the child gets the default back when it starts (an ignored one it would keep)
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, *FORWARDED)}
    try:
        child.append(subprocess.Popen(argv))
        code = child[0].wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 - code if code < 0 else code


class _Stamp(NamedTuple):
    size: int
    mtime_ns: int


def _stamp(path: Path) -> _Stamp | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return _Stamp(st.st_size, st.st_mtime_ns)


def store(settings: Settings, history: Path) -> None:
    """Store the session aider wrote to ``history``; a failure is one line on stderr naming
    the command that stores it later."""
    later = (
        f"localmem capture --dir aider={history.parent}"
        if history.name == aider_launch.HISTORY
        else f"localmem ingest --format aider {history}"
    )
    try:
        aider_launch.store_session(settings, history)
    except (LocalmemError, OSError, apsw.Error) as exc:
        say(f"localmem: this aider session was not stored ({exc}); `{later}` stores it")


def say(line: str) -> None:
    """One line on stderr (its line breaks as spaces); a terminal that is gone costs nothing."""
    with contextlib.suppress(OSError):
        print(" ".join(line.split()), file=sys.stderr, flush=True)
