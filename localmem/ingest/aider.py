"""Aider chat histories: ``.aider.chat.history.md`` at the root of each git repository aider
ran in (its ``--chat-history-file``; the working folder outside a repository).

The file is Markdown that aider only appends to (Aider-AI/aider 0.86, ``aider/io.py``:
``InputOutput.append_chat_history``, ``user_input``, ``ai_output``, ``tool_output``):

- ``# aider chat started at YYYY-MM-DD HH:MM:SS`` (local time) opens a session, one per
  launch of aider;
- what the person typed: one ``#### `` line per line typed, each ending in two spaces (a
  Markdown line break), after a blank line; ``#### <blank>`` for an empty input;
- tool output, warnings and the person's answers to aider's questions: ``> `` lines, also
  ending in two spaces; ``tool_output`` writes a message of several lines as one ``> ``
  line and the rest without it, the two spaces only after the last (the command line aider
  echoes first, ``aider/main.py``, when ``--message`` has a line break), so a ``> `` line
  without them still opens tool output where no reply can start: before the session's
  first ``#### `` (nothing has been asked yet) or right after a ``#### `` line (a reply
  always comes after a blank line);
- the model's reply: plain Markdown after a blank line (``ai_output`` writes ``"\\n" +
  content + "\\n\\n"``), up to the next ``#### ``, ``> `` or session line. While streaming,
  aider keeps the model's reasoning in the reply between
  ``<thinking-content-7bbeb8e1441453ad999a0bbba8a46d4b>`` tags (``aider/reasoning_tags.py``)
  or the model's own ``<think>`` tags, and that is the text it writes here.

Kept: what the person typed and the model's reply, its reasoning cut out and each
SEARCH/REPLACE edit block (``aider/coders/editblock_coder.py``) a compact ``edited: FILE``
line (setting ``ingest.tool_lines``; ``none`` drops them). Left out (counted): ``> `` tool
lines, slash commands and ``!`` shell commands, empty inputs and the answers aider echoes
as input (``… (Y)es/(N)o … [Yes]: y``). ``/ask``, ``/code``, ``/architect`` and
``/context`` with a question are left out too: aider runs the question as the person's
next input (``Commands._generic_chat_command`` calls ``coder.run(question)``, which logs it
as its own ``#### `` line), so that line is the one kept (the real Aider's file, checked
by tests/agents/test_aider.py). A markdown ``####`` heading in a reply does not end in
two spaces and stays the reply's.

The session key is ``<start time> <folder>`` (the folder the history file is in, also the
session's project): on a resumed read the session a point falls in is found again from the
last start line before it. A turn's native id is its first line's number; turns carry no
time of their own. Source = ``aider``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

from localmem.errors import InputError
from localmem.ingest._agent import Break, Event, Said, Session, Skip, group
from localmem.ingest._json import Cursor, Record, bounded_lines
from localmem.ingest._units import TURN_RECORD_BYTES, Unit
from localmem.records import Project

SOURCE = CLIENT = "aider"
FILE_NAME = ".aider.chat.history.md"
_START = re.compile(r"^# aider chat started at (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\s*$")
_USER = "#### "
_CONFIRM = re.compile(r"\(Y\)es/\(N\)o.*\]: ?\S*$")
_THINKING = re.compile(r"<(thinking-content-[0-9a-f]{32}|think)>.*?</\1>", re.DOTALL)
_THINKING_END = re.compile(r"^.*?</(?:thinking-content-[0-9a-f]{32}|think)>", re.DOTALL)
_SEARCH = re.compile(r"^<{5,9} SEARCH>?\s*$")
_REPLACE = re.compile(r"^>{5,9} REPLACE\s*$")


def units(path: Path, start: Cursor | None = None, tool_lines: str = "compact", hold: bool = False) -> Iterator[Unit]:
    start = start or Cursor()
    folder = str(path.expanduser().resolve().parent)
    project = Project(cwd=folder)
    sessions: dict[str, Session] = {}
    before = _before(path, start.offset, folder)
    current = [before.key]

    def session(key: str) -> Session:
        return sessions.setdefault(key, Session(SOURCE, CLIENT, project, _started(key)))

    def events(rec: Record) -> list[Event]:
        value: dict[str, Any] = rec.value
        if value["kind"] == "start":
            m = _START.match(value["lines"][0])
            assert m is not None  # a "start" block is such a line
            current[0] = f"{m.group(1)} {folder}"
            return [Break()]
        return block_events(value, current[0], tool_lines)

    yield from group(_blocks(path, start, before, hold), events, session, start, hold=hold)


def _started(key: str) -> str | None:
    """The session's start in UTC (aider writes the local time of the machine it ran on)."""
    try:
        local = datetime.strptime(key[:19], "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None  # lines before any start line
    return local.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="seconds")


class _Before(NamedTuple):
    """What the lines before a point say about it: the key of the session it falls in (the
    last start line before it), whether that session has had no ``#### `` line yet (its
    opening), and the kind of the line just before it."""

    key: str
    opening: bool = False
    last: str = "blank"


def _before(path: Path, offset: int, folder: str) -> _Before:
    key = f"0000-00-00 00:00:00 {folder}"  # lines before any start line (a history cut at its head)
    opening, last = False, "blank"
    if offset == 0:
        return _Before(key)
    try:
        with path.open("rb") as fh:
            read = 0
            for raw, size in bounded_lines(fh, TURN_RECORD_BYTES):
                read += size
                if read > offset:
                    break
                text = "" if raw is None else raw.decode("utf-8", "replace").rstrip("\r\n")
                last = "text" if raw is None else _kind(text)
                m = _START.match(text)
                if m:
                    key, opening = f"{m.group(1)} {folder}", True
                elif last == "user":
                    opening = False
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    return _Before(key, opening, last)


def _kind(text: str) -> str:
    if not text.strip():
        return "blank"
    if _START.match(text):
        return "start"
    if text.startswith(_USER) and text.endswith("  "):
        return "user"
    if (text.startswith("> ") and text.endswith("  ")) or text.rstrip() == ">":
        return "tool"
    return "text"


def _blocks(path: Path, start: Cursor, before: _Before, hold: bool = False) -> Iterator[Record]:
    """The file from ``start`` as records, one a block of lines of one kind (module docstring):
    ``{"kind": "start" | "user" | "tool" | "text", "lines": [...], "line": N}``. A last line
    without its newline (still being written) is left for the next read, and with ``hold``
    the last block too (a reader may catch aider between two lines of one write: the
    person's input of several lines); ``before`` is what the lines before ``start`` say
    about it."""
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    with fh:
        fh.seek(start.offset)
        offset, n, index = start.offset, start.line, start.index
        kind: str | None = None
        opening, last = before.opening, before.last
        lines: list[str] = []
        first = end = 0  # the open block's first line, and the offset after its last

        def flush() -> Iterator[Record]:
            nonlocal kind, lines, index
            if kind is not None:
                index += 1
                value = {"kind": kind, "lines": lines, "line": first}
                yield Record(index - 1, f"line {first}", value, Cursor(end, index, first + len(lines)))
            kind, lines = None, []

        try:
            for raw, size in bounded_lines(fh, TURN_RECORD_BYTES):
                at = n
                if raw is None:
                    yield from flush()
                    err = InputError(f"a line of {size:,} bytes; not read", path=str(path), where=f"line {at}")
                    index += 1
                    yield Record(index - 1, f"line {at}", None, Cursor(offset + size, index, at + 1), err)
                    offset, n = offset + size, n + 1
                    continue
                if not raw.endswith(b"\n"):
                    break  # being written: the next read takes it
                offset, n = offset + size, n + 1
                try:
                    text = raw.decode("utf-8-sig" if offset == size else "utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    yield from flush()
                    index += 1
                    err = InputError(f"not UTF-8: {exc.reason}", path=str(path), where=f"line {at}")
                    yield Record(index - 1, f"line {at}", None, Cursor(offset, index, n), err)
                    continue
                k = _kind(text)
                if k == "text" and (opening or last == "user"):
                    k = "tool"  # no reply starts here (module docstring): aider's own output
                opening, last = (opening or k == "start") and k != "user", k
                if k == "blank":
                    if kind == "text":
                        lines.append(text)
                        end = offset
                    else:
                        yield from flush()
                    continue
                if k == "text" and kind in ("text", "tool"):
                    pass  # a reply's next line, or a tool message's line without its "> "
                elif k != kind or k == "start":
                    yield from flush()
                    kind, first = k, at
                lines.append(text)
                end = offset
        except OSError as exc:
            raise InputError(f"cannot read file: {exc}", path=str(path), where=f"line {n}") from exc
        if not hold:
            yield from flush()


def block_events(value: dict[str, Any], key: str, tool_lines: str) -> list[Event]:
    lines: list[str] = value["lines"]
    native = str(value["line"])
    if value["kind"] == "tool":
        return [Skip("tool output")]
    if value["kind"] == "user":
        text = "\n".join(line[len(_USER) :].rstrip() for line in lines).strip()
        if not text or text == "<blank>":
            return [Skip("empty message")]
        if _CONFIRM.search(text):
            return [Skip("confirmation")]
        if text.startswith(("/", "!")):
            return [Skip("command")]
        return [Said(key, "user", "user", text, None, native)]
    text, thought = _without_thinking("\n".join(lines))
    text = _edits(text, tool_lines).strip()
    out: list[Event] = [Said(key, "assistant", "assistant", text, None, native)] if text else []
    if thought:
        out.append(Skip("thinking"))
    return out or [Skip("empty message")]


def _without_thinking(text: str) -> tuple[str, bool]:
    cut = _THINKING.sub("", text)
    if "</think" in cut:  # the reasoning's end without its start: all before it was reasoning
        cut = _THINKING_END.sub("", cut, count=1)
    return cut, cut != text


def _edits(text: str, tool_lines: str) -> str:
    """The reply with each SEARCH/REPLACE block as ``edited: FILE`` (or nothing)."""
    if "SEARCH" not in text:
        return text
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        if not _SEARCH.match(lines[i]):
            out.append(lines[i])
            i += 1
            continue
        fenced = bool(out) and out[-1].lstrip().startswith("```")
        if fenced:
            out.pop()
        name = _filename(out.pop()) if out and out[-1].strip() else ""
        j = i + 1
        while j < len(lines) and not _REPLACE.match(lines[j]):
            j += 1
        if fenced and j + 1 < len(lines) and lines[j + 1].lstrip().startswith("```"):
            j += 1
        if tool_lines == "compact":
            out.append(f"edited: {name or '(a file)'}")
        i = j + 1
    return "\n".join(out)


def _filename(line: str) -> str:
    return line.strip().rstrip(":").lstrip("#").strip().strip("`").strip("*").strip()
