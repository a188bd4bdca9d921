"""What the coding agents' log parsers share: the events a log line yields, their grouping
into turns and units, and the compact line a tool call becomes.

A format module turns each record (a log line) into events: ``Said`` (something the
person or the agent said), ``Tool`` (a tool call, as one compact line), ``Skip`` (left out
on purpose, counted by reason) and ``Break`` (a compaction: nothing said before it joins
a turn after it). ``group`` makes turns of them. An agent's *step* is a text it said and
the tool calls that follow it, until the next thing said: one turn, ``I'll run the
tests.`` + ``ran: pytest -q``. Tool calls before any text open a step of their own.

Invariants:
- a turn never changes once it is in a unit: a step still open when the file ends is
  emitted as it is, with its resume point after it; if the log grows and the step goes on
  (more tool calls), those calls become a turn of their own, so nothing is stored twice
  and nothing is lost (a file read from its start joins them again, in another store);
- units end only between records, at a point where no step is open (or at the end), so
  a resume point never falls inside a turn;
- a last line still being written (no newline, not yet JSON) is left for the next read;
- ``hold`` (a log still being written, read by ``watch`` or ``capture``): a step still open
  at the end of the file is not emitted; the resume point stays before it and the next
  read takes it whole, so a step is not cut because the agent was busy when it was read.
  A read without ``hold`` (the agent's Stop hook, a file quiet for a while) emits it.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from localmem.ingest._json import Cursor, Record, loads
from localmem.ingest._units import Unit, bad
from localmem.records import Project, SessionIn, TurnIn
from localmem.util import secrets

TOOL_LINES = ("compact", "none")
MAX_ARG = 160  # characters of a tool line's argument (a command, a path, a query)


@dataclass(frozen=True)
class Said:
    key: str  # session key
    role: str  # "user" or "assistant"
    speaker: str
    text: str
    ts: str | None
    native: str | None
    step: bool = True  # an agent's text opens a step (False: a turn of its own)


@dataclass(frozen=True)
class Tool:
    key: str
    line: str
    ts: str | None
    native: str | None


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass(frozen=True)
class Break:
    pass


Event = Said | Tool | Skip | Break


@dataclass
class Session:
    """What a log says of a session besides its turns."""

    source: str
    client: str
    project: Project | None = None
    started_at: str | None = None
    title: str = ""


@dataclass
class _Step:
    key: str
    speaker: str
    ts: str | None
    native: str | None
    parts: list[str] = field(default_factory=list)

    def turn(self) -> tuple[str, TurnIn] | None:
        text = "\n".join(p for p in self.parts if p).strip()
        if not text:
            return None
        return self.key, TurnIn(
            text=text, speaker=self.speaker, role="assistant", timestamp=self.ts, source_id=self.native
        )


def group(
    records: Iterable[Record],
    events: Callable[[Record], list[Event]],
    session: Callable[[str], Session],
    start: Cursor,
    *,
    hold: bool = False,
) -> Iterator[Unit]:
    """Units of the turns that ``events`` finds in ``records`` read from ``start`` (see the
    module docstring); ``session(key)`` says what a session's source, client and project
    are; ``hold``: a step open at the end is left for the next read."""
    done: list[tuple[str, TurnIn]] = []
    skipped: Counter[str] = Counter()
    step: _Step | None = None
    first: Record | None = None  # the first record of the unit being gathered
    last: Cursor | None = None

    def unit(after: Cursor) -> Unit:
        nonlocal done, skipped, first
        assert first is not None
        u = Unit(first.index, first.where, _sessions(done, session), after, skipped)
        done, skipped, first = [], Counter(), None
        return u

    def close() -> None:
        nonlocal step
        if step is not None and (t := step.turn()) is not None:
            done.append(t)
        step = None

    for rec in records:
        if rec.error is not None:
            if rec.after.offset <= (last or start).offset:
                break  # a last line still being written: the next read takes it
            close()
            if first is not None:
                yield unit(last or rec.after)
            yield bad(rec.index, rec.where, rec.after, rec.error)
            last = rec.after
            continue
        evs = events(rec)
        if step is not None and evs and not isinstance(evs[0], Tool | Skip):
            close()  # this record starts something new: what came before is a unit
            if first is not None and last is not None:
                yield unit(last)
        first = first or rec
        for ev in evs:
            if isinstance(ev, Skip):
                skipped[ev.reason] += 1
            elif isinstance(ev, Break):
                close()
            elif isinstance(ev, Tool):
                if step is None or step.key != ev.key:
                    close()
                    step = _Step(ev.key, "assistant", ev.ts, ev.native)
                step.parts.append(ev.line)
            elif ev.role == "assistant" and ev.step:
                close()
                step = _Step(ev.key, ev.speaker, ev.ts, ev.native, [ev.text])
            else:
                close()
                done.append((ev.key, TurnIn(ev.text, ev.speaker, ev.role, ev.ts, ev.native)))
        last = rec.after
        if step is None:
            yield unit(rec.after)
    if hold and step is not None:
        return  # the open step (and what its records hold) is read again, whole, next time
    close()
    if first is not None and last is not None:
        yield unit(last)


def _sessions(done: list[tuple[str, TurnIn]], session: Callable[[str], Session]) -> tuple[SessionIn, ...]:
    by_key: dict[str, list[TurnIn]] = {}
    for key, turn in done:
        by_key.setdefault(key, []).append(turn)
    out = []
    for key, turns in by_key.items():
        s = session(key)
        out.append(SessionIn(key, tuple(turns), s.started_at, s.source, s.title, s.client, s.project))
    return tuple(out)


# -- tool calls as one line ---------------------------------------------------------------

_RAN = {"bash", "shell", "exec_command", "local_shell", "run_shell_command", "container.exec", "bashoutput"}
_EDITED = {"edit", "multiedit", "write", "notebookedit", "write_file", "replace", "edit_file", "create_file"}
_READ = {"read", "read_file", "view", "read_many_files", "list_directory", "ls", "view_image", "notebookread"}
_SEARCHED = {"grep", "glob", "search_file_content", "grep_search", "websearch", "google_web_search", "web_search"}
_FETCHED = {"webfetch", "web_fetch"}
_DELEGATED = {"task", "agent"}
_BOOKKEEPING = {"todowrite", "todoread", "update_plan", "write_todos", "exitplanmode", "killshell", "killbash"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)


def message_blocks(
    content: Any,
    key: str,
    speaker: str,
    ts: str | None,
    native: str | None,
    tool_lines: str,
    *,
    tool: Callable[[str, Any], str | None] | None = None,
    thinking: tuple[str, ...] = ("thinking", "redacted_thinking"),
    placeholder: str | None = None,
) -> list[Event]:
    """An assistant message's content in Anthropic's shape (a string, or a list of ``text``,
    ``tool_use`` and thinking blocks) as events: its text said by ``speaker`` (but a client's
    ``placeholder`` for no text), each tool call one line (``tool``, default
    :func:`tool_line`) when ``tool_lines`` is ``compact``, thinking and any other block
    skipped by kind. Claude Code's transcripts and Cursor's share it."""
    namer = tool or tool_line
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    out: list[Event] = []
    for block in content if isinstance(content, list) else []:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            text = block["text"].strip()
            if text and text != placeholder:
                out.append(Said(key, "assistant", speaker, text, ts, native))
        elif kind == "tool_use" and isinstance(block.get("name"), str):
            line = namer(block["name"], block.get("input"))
            if tool_lines == "compact" and line is not None:
                out.append(Tool(key, line, ts, native))
            else:
                out.append(Skip("tool call"))
        elif kind in thinking:
            out.append(Skip("thinking"))
        elif isinstance(kind, str):
            out.append(Skip(f"{kind} block"))
    return out or [Skip("empty message")]


def tool_line(name: str, args: Any) -> str | None:
    """``ran: pytest -q``, ``edited: src/x.py``, ``read: README.md``, ``searched: foo``,
    ``fetched: URL``, ``delegated: …``, ``used: NAME``; None for the agent's own bookkeeping
    (to-do lists, plans)."""
    low = name.lower()
    if low in _BOOKKEEPING:
        return None
    if isinstance(args, str):
        try:
            args = loads(args)
        except ValueError:
            args = {"input": args}
    a = args if isinstance(args, dict) else {}
    if low == "apply_patch":
        files = _PATCH_FILE.findall(str(a.get("input") or a.get("patch") or ""))
        return "edited: " + _short(", ".join(dict.fromkeys(files))) if files else "edited: (a patch)"
    if low in _RAN:
        cmd = a.get("command", a.get("cmd", a.get("input")))
        if isinstance(cmd, list):
            cmd = _unwrap_shell([str(c) for c in cmd])
        return "ran: " + _short(str(cmd or ""))
    if low in _EDITED:
        return "edited: " + _short(_first(a, "file_path", "notebook_path", "path", "absolute_path", "target_file"))
    if low in _READ:
        paths = a.get("paths")
        if isinstance(paths, list):
            return "read: " + _short(", ".join(map(str, paths)))
        return "read: " + _short(_first(a, "file_path", "absolute_path", "path", "notebook_path", "dir_path"))
    if low in _SEARCHED:
        return "searched: " + _short(_first(a, "pattern", "query", "q"))
    if low in _FETCHED:
        return "fetched: " + _short(_first(a, "url", "prompt"))
    if low in _DELEGATED:
        return "delegated: " + _short(_first(a, "description", "prompt"))
    return "used: " + _short(name)


def _first(a: dict[str, Any], *keys: str) -> str:
    return next((str(a[k]) for k in keys if isinstance(a.get(k), str | int) and str(a[k]).strip()), "")


def _unwrap_shell(argv: list[str]) -> str:
    """``["bash", "-lc", "pytest -q"]`` -> ``pytest -q``; any other argv joined as a shell would read it."""
    if len(argv) == 3 and argv[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh") and argv[1] in ("-c", "-lc"):
        return argv[2]
    return shlex.join(argv)


def _short(text: str) -> str:
    # Redacted before it is cut: a secret cut in half would no longer look like one.
    one = " ".join(secrets.redact(text).split())
    return one if len(one) <= MAX_ARG else one[: MAX_ARG - 1] + "…"


def text_of(content: Any, kinds: Iterable[str] = ("text",), placeholders: dict[str, str] | None = None) -> str:
    """The text of a message's content: a string, or the ``text`` of its blocks of the
    given kinds (others that have a placeholder, e.g. an image, become it)."""
    if isinstance(content, str):
        return content.strip()
    if not isinstance(content, list):
        return ""
    wanted = set(kinds)
    out = []
    for block in content:
        if isinstance(block, str):
            out.append(block.strip())
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in wanted and isinstance(block.get("text"), str):
                out.append(block["text"].strip())
            elif placeholders and kind in placeholders:
                out.append(placeholders[kind])
    return "\n\n".join(p for p in out if p).strip()
