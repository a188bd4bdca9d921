"""Chat-log ingest: one parser module per format, each turning a file into ``Unit``s
(a conversation, sample, line or section each) that carry ``SessionIn``s.

``detect(path)`` tells the format from the file's shape; ``load(path, fmt)`` parses a
whole file into sessions (the first bad unit raises ``InputError`` naming the file and
the JSON path or line); ``ingest_file`` (``localmem.ingest.runner``) writes a file in
batches with a resume point, for the CLI and the watcher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest import (
    aider,
    chatgpt,
    claude,
    claude_code,
    codex,
    copilot,
    cursor,
    export,
    gemini,
    jsonl,
    locomo,
    longmemeval,
    messages,
    transcript,
    vscode,
)
from localmem.ingest._detect import FORMAT_NAMES, detect
from localmem.ingest._json import Cursor
from localmem.ingest._units import Unit, checked, merge
from localmem.records import SessionIn

Units = Callable[..., Iterator[Unit]]

FORMATS: dict[str, Units] = {
    "chatgpt": chatgpt.units,
    "claude": claude.units,
    "messages": messages.units,
    "transcript": transcript.units,
    "jsonl": jsonl.units,
    "locomo": locomo.units,
    "longmemeval": longmemeval.units,
    "localmem": export.units,  # what `localmem export` writes
    "claude-code": claude_code.units,
    "codex": codex.units,
    "gemini": gemini.units,
    "vscode": vscode.units,
    "copilot": copilot.units,
    "cursor": cursor.units,
    "aider": aider.units,
}
# Coding agents' logs: their tool calls are kept as compact lines or not (``ingest.tool_lines``).
AGENT_FORMATS = frozenset({"claude-code", "codex", "gemini", "vscode", "copilot", "cursor", "aider"})
OPTIONS: dict[str, frozenset[str]] = {
    "locomo": frozenset({"sample"}),
    "longmemeval": frozenset({"question"}),
    **{f: frozenset({"tool_lines", "hold"}) for f in AGENT_FORMATS},
}
OPTIONS["cursor"] = OPTIONS["cursor"] | {"project"}  # its hooks know the project its log does not say
# Options that change how a file is read but not which units it has: not part of its resume
# state (``hold``: a step still open at the end of an agent's log waits for the next read;
# ``project``: a session's project, which a stored session without one takes).
READ_ONLY_OPTIONS = frozenset({"tool_lines", "hold", "project"})


def units(path: Path, fmt: str, start: Cursor | None = None, **options: Any) -> Iterator[Unit]:
    """The units of ``path`` read as ``fmt``, from ``start``; options are checked."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}", path=str(path))
    given = {k: v for k, v in options.items() if v is not None}
    extra = set(given) - OPTIONS.get(fmt, frozenset())
    if extra:
        raise InputError(f"format {fmt} takes no option {', '.join(sorted(extra))}", path=str(path))
    return (checked(u, path) for u in FORMATS[fmt](path, start, **given))


def load(path: Path, fmt: str | None = None, **options: Any) -> list[SessionIn]:
    """Every session of a file (sessions of one key merged); the first bad unit raises."""
    sessions: list[SessionIn] = []
    for u in units(path, fmt or detect(path), **options):
        if u.error is not None:
            raise u.error
        sessions.extend(u.sessions)
    return merge(sessions)


__all__ = ["AGENT_FORMATS", "FORMATS", "FORMAT_NAMES", "READ_ONLY_OPTIONS", "Cursor", "Unit", "detect", "load", "units"]
