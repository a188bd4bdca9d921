"""Markdown / plain-text transcripts -> one session per heading.

A line ``Name: text`` starts a turn (also ``**Name:** text``, ``- Name: text`` and
``[10:32] Name: text``); the name is one to three capitalised words, or one of
user / assistant / human / ai / system in any case. Lines that follow belong to the
same turn. A Markdown heading (``# ...`` to ``###### ...``) or, in plain text, a line
that is only a date starts a new session; its text is the session key, and a date in
it (``## 2024-05-01``, ``## Session 3 — 8 May, 2023``) is the session's date. A
``[HH:MM]`` prefix on a turn is combined with that date. Speakers called assistant /
ai / bot / chatgpt / claude get role ``assistant``, everyone else ``user``; ``System``
lines are skipped, as is text before the first turn of a session (counted). Source =
``transcript:<hash of the first line>`` (the log's content, not its file name: a copy or
a rename writes nothing new); native turn id = ``<session key>:<turn index>``. One unit
per session; the last session is read again on the next ingest, since a live
transcript grows at its end.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from localmem.errors import InputError
from localmem.ingest._json import Cursor, bounded_lines, first_line_id
from localmem.ingest._units import TURN_RECORD_BYTES, Unit, bad
from localmem.records import MAX_TURN_CHARS, SessionIn, TurnIn
from localmem.util.text import parse_time

_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)[\s#]*$")
_NAME = r"(?:[A-Z][\w.'’-]*(?: [A-Z][\w.'’-]*){0,2}|(?i:user|assistant|human|ai|system))"
_SPEAKER = re.compile(
    r"^\s*(?:[-*>]\s+)?(?:\[(?P<time>[0-9][0-9:/\-T .,apmAPM]{0,30})\]\s*)?"
    rf"(?:\*\*|__)?(?P<name>{_NAME})(?:\*\*|__)?:(?:\*\*|__)?(?:\s+(?P<text>.*))?$"
)
_DATE_IN = re.compile(
    r"\d{4}[-/]\d{2}[-/]\d{2}(?:[ T]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2} [A-Z][a-z]+,? \d{4}|[A-Z][a-z]+ \d{1,2}, \d{4}"
)
_CLOCK = re.compile(r"^\d{1,2}:\d{2}(?::\d{2})?$")
ASSISTANTS = {"assistant", "ai", "bot", "chatgpt", "claude", "gpt", "model"}


def session_date(text: str) -> str | None:
    """The date a heading names, if any (the whole heading, or an ISO-like date in it)."""
    candidates = [text.strip(" -=*_#")]
    candidates += [m.group(0) for m in _DATE_IN.finditer(text)]
    for c in candidates:
        if not c or not any(ch.isdigit() for ch in c) or len(c) > 60:
            continue
        try:
            return parse_time(c)
        except (ValueError, OverflowError, OSError):
            continue
    return None


@dataclass
class _Section:
    index: int
    start: Cursor
    key: str
    date: str | None
    source: str
    turns: list[TurnIn] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)  # the turn being read
    size: int = 0  # its characters so far
    line: int = 0  # where it began
    speaker: str = ""
    ts: str | None = None
    skipped: Counter[str] = field(default_factory=Counter)
    error: InputError | None = None

    def begin(self, speaker: str, ts: str | None, text: str, line: int) -> None:
        self.end_turn()
        self.speaker, self.ts, self.lines, self.size, self.line = speaker, ts, [text], len(text), line

    def add(self, text: str, path: Path) -> None:
        """A line more of the turn being read; past ``MAX_TURN_CHARS`` the section is bad
        and the turn's lines are no longer kept (memory stays bounded)."""
        self.size += len(text) + 1
        if self.size > MAX_TURN_CHARS:
            if self.error is None:
                self.error = InputError(
                    f"the turn of {self.speaker} has more than {MAX_TURN_CHARS:,} characters (split it or leave it out)",
                    path=str(path),
                    where=f"line {self.line}",
                )
            self.lines = []
            return
        self.lines.append(text)

    def end_turn(self) -> None:
        if not self.speaker:
            return
        text = "\n".join(self.lines).strip()
        if self.speaker.lower() == "system":
            self.skipped["system message"] += 1
        elif not text:
            self.skipped["empty message"] += 1
        else:
            role = "assistant" if self.speaker.lower() in ASSISTANTS else "user"
            native = f"{self.key}:{len(self.turns)}"
            self.turns.append(TurnIn(text=text, speaker=self.speaker, role=role, timestamp=self.ts, source_id=native))
        self.speaker, self.ts, self.lines = "", None, []

    def unit(self, after: Cursor) -> Unit:
        self.end_turn()
        where = f"session {self.key!r} (line {self.start.line})"
        if self.error is not None:
            return bad(self.index, where, after, self.error)
        sessions = (SessionIn(key=self.key, turns=tuple(self.turns), started_at=self.date, source=self.source),)
        return Unit(self.index, where, sessions if self.turns else (), after, self.skipped)


def units(path: Path, start: Cursor | None = None) -> Iterator[Unit]:
    start = start or Cursor()
    source = f"transcript:{first_line_id(path)}"
    try:
        fh = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    with fh:
        fh.seek(start.offset)
        offset, line, index = start.offset, start.line, start.index
        sec = _Section(index, start, "default", None, source)
        fresh = True  # nothing but blank lines in sec so far
        try:
            for raw, size in bounded_lines(fh, TURN_RECORD_BYTES):
                begin, n = offset, line
                offset += size
                line += 1
                if raw is None:
                    too_long = InputError(f"a line of {size:,} bytes; not read", path=str(path), where=f"line {n}")
                    sec.error = sec.error or too_long
                    continue
                try:
                    text = raw.decode("utf-8-sig" if begin == 0 else "utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    sec.error = sec.error or InputError(f"not UTF-8: {exc.reason}", path=str(path), where=f"line {n}")
                    continue
                heading = _heading(text)
                if heading is not None:
                    if not fresh:  # close the session before (none yet if only blank lines)
                        yield sec.unit(after=Cursor(begin, index + 1, n))
                        index += 1
                    sec = _Section(index, Cursor(begin, index, n), heading, session_date(heading), source)
                    fresh = False
                    continue
                if text.strip():
                    fresh = False
                _line(sec, text, path, n)
        except OSError as exc:
            raise InputError(f"cannot read file: {exc}", path=str(path), where=f"line {line}") from exc
        yield sec.unit(after=sec.start)


def _heading(text: str) -> str | None:
    m = _HEADING.match(text)
    if m and m.group(1).strip():
        return m.group(1).strip()
    stripped = text.strip()
    if stripped and not _SPEAKER.match(text) and session_date(stripped) and len(stripped) <= 40:
        return stripped.strip(" -=*_")
    return None


def _line(sec: _Section, text: str, path: Path, n: int) -> None:
    m = _SPEAKER.match(text)
    if m is None:
        if sec.speaker:
            sec.add(text, path)
        elif text.strip():
            sec.skipped["text outside a turn (lines)"] += 1
        return
    ts = sec.date
    clock = m.group("time")
    if clock:
        clock = clock.strip()
        try:
            if _CLOCK.match(clock):
                ts = parse_time(f"{sec.date[:10]}T{clock}") if sec.date else None
            else:
                ts = parse_time(clock)
        except (ValueError, OverflowError, OSError) as exc:
            sec.error = sec.error or InputError(f"unusable time [{clock}]: {exc}", path=str(path), where=f"line {n}")
    sec.begin(m.group("name"), ts, m.group("text") or "", n)
