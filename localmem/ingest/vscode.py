"""VS Code chat sessions (GitHub Copilot Chat and the other chat participants):
``<user data>/User/workspaceStorage/<workspace id>/chatSessions/<sessionId>.json(l)`` and,
for a window with no folder, ``User/globalStorage/emptyWindowChatSessions/``.

Two shapes, both of VS Code's ``ISerializableChatData`` (version 3; versions 1 and 2 read
the same way): ``<id>.json`` is the whole session, rewritten on every save
(``JSON.stringify(session, undefined, 2)``); ``<id>.jsonl`` (newer VS Code) is an append-only
mutation log: a first line ``{"kind": 0, "v": <the session>}``, then ``{"kind": 1, "k":
<path>, "v": …}`` (set), ``{"kind": 2, "k": <path>, "v": [items], "i": n}`` (cut the array at
``i``, then push) and ``{"kind": 3, "k": <path>}`` (delete); VS Code replaces the file with a
new first line when the log grows long. The session: ``sessionId``, ``creationDate`` (ms),
``customTitle``, ``requests``; a request: ``requestId``, ``timestamp`` (ms), ``message``
(``{text, parts}``, or a string in old files), ``response`` (parts: markdown strings
``{value}``, ``inlineReference``, ``toolInvocationSerialized``, ``textEditGroup``,
``thinking``, progress and UI parts), ``responseId``, ``result`` (set when the agent
finished; ``errorDetails`` when it failed) and ``modelState.value`` (0 pending, 1
complete, 2 cancelled, 3 failed, 4 needs input).

Kept: what the person typed (``message.text``), and each response once it is finished as
one turn: its markdown text (inline references as their names), with its tool calls as
compact lines (``ran: pytest -q`` from a terminal call, ``edited: src/x.py`` from an edit
group, ``used: TOOL`` otherwise; setting ``ingest.tool_lines``). Left out: thinking, tool
results, progress, confirmations and other UI parts, failed responses with no text, and a
response not finished yet. A turn's native id is the request id (the person) or the
response id (the agent), its time the request's. Source = ``vscode``; session =
``sessionId``; project = the workspace's folder (``workspace.json`` beside
``chatSessions``, a ``file://`` URI), with the git remote, branch and commit of the
session's ``repoData`` where VS Code recorded it.

Invariants:
- a response is stored once, finished: in the log, when its ``modelState`` says complete,
  cancelled or failed (so a read while it streams stores nothing of it); in a ``.json``,
  where VS Code writes a streaming response as cancelled, the last request's response
  without a ``result`` is held back while the file is read with ``hold`` (recently
  written), and the unit's resume point stays at the file's start so the next read takes
  it;
- the log is replayed from its first line on every read (each entry only makes sense
  against the state before it); the turns that entries before the resume point finished
  were stored by an earlier read and are not yielded again. A file VS Code rewrote (a
  ``.json`` saved again, a log compacted) is read from its start, and the turns already
  stored are found by their content hash, so each is stored once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from localmem.errors import InputError
from localmem.ingest._agent import tool_line
from localmem.ingest._json import Cursor, Record, records
from localmem.ingest._units import Unit, bad
from localmem.ingest._vscode import (
    CANCELLED,
    COMPLETE,
    FAILED,
    has_line,
    message,
    ms,
    patch,
    reference,
    response_state,
    tool,
    uri_path,
    value,
    with_repo,
    workspace_project,
)
from localmem.records import Project, SessionIn, TurnIn

SOURCE = CLIENT = "vscode"
# Response parts that are the UI's, not something the agent said: left out without a count.
_QUIET = frozenset(
    {
        "progressMessage", "progressTask", "progressTaskSerialized", "undoStop", "codeblockUri", "command",
        "confirmation", "warning", "treeData", "extensions", "pullRequest", "elicitation",
        "elicitationSerialized", "multiDiffData", "mcpServersStarting", "hook", "questionCarousel",
        "clearToPreviousToolInvocation", "notebookEditGroup", "workspaceEdit", "disabledClaudeHooks",
        "references", "usedContext", "codeCitation",
    }
)  # fmt: skip


def units(path: Path, start: Cursor | None = None, tool_lines: str = "compact", hold: bool = False) -> Iterator[Unit]:
    start = start or Cursor()
    if path.suffix == ".jsonl" and not has_line(path):
        return  # the log's first entry is still being written: the next read takes it
    reader = _Reader(path, tool_lines)
    last_after = Cursor()
    last_index = 0
    for rec in records(path, Cursor()):
        last_index = rec.index
        if rec.error is not None and rec.after.offset <= last_after.offset:
            return  # a last line still being written: the next read takes it
        try:
            if rec.error is not None:
                raise rec.error
            turns, held = reader.apply(rec, hold)
            sessions = (reader.session(turns),) if turns else ()
        except InputError as exc:
            if rec.after.offset > start.offset:
                yield bad(rec.index, rec.where, rec.after, exc)
            last_after = rec.after
            continue
        last_after = rec.after
        skipped, reader.skipped = reader.skipped, Counter()
        if rec.after.offset <= start.offset:
            continue  # finished before the resume point: stored by an earlier read
        yield Unit(rec.index, rec.where, sessions, Cursor() if held else rec.after, skipped)
    if reader.state is not None and not reader.state.get("requests") and start == Cursor():
        # A chat opened and left without a word: nothing to store, and nothing wrong.
        yield Unit(last_index, "end", (), last_after, Counter({"empty session": 1}))


class _Reader:
    """The session as the entries so far make it, and the turns already taken from it."""

    def __init__(self, path: Path, tool_lines: str) -> None:
        self.path = path
        self.tool_lines = tool_lines
        self.state: dict[str, Any] | None = None
        self.flat = True  # a whole session per record (.json), not a log
        self.taken: set[str] = set()  # request ids, and "<request id>/response", already turned into turns
        self.skipped: Counter[str] = Counter()
        self.project: Project | bool | None = False  # False: not looked up yet

    def apply(self, rec: Record, hold: bool) -> tuple[list[TurnIn], bool]:
        """Apply one record; the turns it finished, and whether a response was held back."""
        obj = rec.value
        if not isinstance(obj, dict):
            raise InputError("expected a JSON object", path=str(self.path), where=rec.where)
        if "requests" in obj and "kind" not in obj:
            self.state, self.flat = obj, True
        elif obj.get("kind") == 0:
            if not isinstance(obj.get("v"), dict):
                raise InputError(
                    "the first entry's 'v' should be the session object", path=str(self.path), where=rec.where
                )
            self.state, self.flat = obj["v"], False
        elif obj.get("kind") in (1, 2, 3) and isinstance(obj.get("k"), list):
            if self.state is None:
                raise InputError("a change before the log's first entry", path=str(self.path), where=rec.where)
            patch(self.state, obj, self.path, rec.where)
        else:
            raise InputError(
                "not a VS Code chat session or one of its log entries", path=str(self.path), where=rec.where
            )
        return self._finished(rec.where, hold)

    def _finished(self, where: str, hold: bool) -> tuple[list[TurnIn], bool]:
        assert self.state is not None
        requests = self.state.get("requests")
        if not isinstance(requests, list):
            raise InputError("'requests' should be a list", path=str(self.path), where=where)
        out: list[TurnIn] = []
        held = False
        for i, req in enumerate(requests):
            at = f"{where}.requests[{i}]"
            if not isinstance(req, dict) or not isinstance(req.get("requestId"), str):
                raise InputError("a request needs a string 'requestId'", path=str(self.path), where=at)
            rid = req["requestId"]
            if rid not in self.taken:
                self.taken.add(rid)  # first: a bad request is reported once, not at every entry after it
                text = message(req.get("message"))
                if text:
                    out.append(
                        TurnIn(text, "user", "user", ms(req.get("timestamp"), self.path, f"{at}.timestamp"), rid)
                    )
                else:
                    self.skipped["empty message"] += 1
            key = rid + "/response"
            if key in self.taken:
                continue
            state = response_state(req)
            if self.flat and not (state in (COMPLETE, FAILED) or isinstance(req.get("result"), dict)):
                if hold and i == len(requests) - 1:
                    held = True  # maybe still streaming (module docstring)
                    continue
            elif not self.flat and state not in (COMPLETE, CANCELLED, FAILED):
                continue  # still streaming, or waiting for the person: a later entry finishes it
            self.taken.add(key)
            reply = self._response(req)
            if reply:
                native = req["responseId"] if isinstance(req.get("responseId"), str) else key
                out.append(
                    TurnIn(
                        reply, "assistant", "assistant", ms(req.get("timestamp"), self.path, f"{at}.timestamp"), native
                    )
                )
            else:
                failed = isinstance(req.get("result"), dict) and req["result"].get("errorDetails")
                self.skipped["failed response" if failed or state == FAILED else "empty response"] += 1
        return out, held

    def _response(self, req: dict[str, Any]) -> str:
        parts = req.get("response")
        if isinstance(parts, str):
            parts = [parts]
        paragraphs: list[str] = []
        text = ""
        edited: set[str] = set()
        for part in parts if isinstance(parts, list) else []:
            said, line = self._part(part, edited)
            text += said
            if line is not None:
                paragraphs.extend([text, line])
                text = ""
        paragraphs.append(text)
        return "\n".join(p.strip() for p in paragraphs if p.strip())

    def _part(self, part: Any, edited: set[str]) -> tuple[str, str | None]:
        """(text the agent said, a tool line) of one response part."""
        if isinstance(part, str):
            return part, None
        if not isinstance(part, dict):
            return "", None
        kind = part.get("kind")
        if kind is None and isinstance(part.get("value"), str):
            return part["value"], None  # a markdown string
        if not isinstance(kind, str):
            return "", None
        if kind in ("markdownContent", "markdownVuln"):
            return value(part.get("content")), None
        if kind == "inlineReference":
            return reference(part), None
        if kind == "thinking":
            self.skipped["thinking"] += 1
        elif kind in ("toolInvocationSerialized", "textEditGroup"):
            # A tool call ends a paragraph even when it leaves no line ("" then).
            return "", self._tool_line(part, edited) if self.tool_lines == "compact" else ""
        elif kind not in _QUIET:
            self.skipped[f"{kind} part"] += 1
        return "", None

    @staticmethod
    def _tool_line(part: dict[str, Any], edited: set[str]) -> str:
        """A tool call's line; a file's edit once per response (an edit tool's call and the
        edit group it makes name the same file)."""
        if part.get("kind") == "toolInvocationSerialized":
            line = tool(part) or ""
        else:
            path = uri_path(part.get("uri"))
            line = (tool_line("edit", {"path": path}) or "") if path else ""
        if line.startswith("edited: "):
            if line in edited:
                return ""
            edited.add(line)
        return line

    def session(self, turns: list[TurnIn]) -> SessionIn:
        assert self.state is not None
        sid = self.state.get("sessionId")
        if not isinstance(sid, str) or not sid:
            raise InputError("missing field 'sessionId'", path=str(self.path))
        started = ms(self.state.get("creationDate"), self.path, "creationDate")
        title = self.state.get("customTitle") or self.state.get("computedTitle") or ""
        if self.project is False:
            self.project = workspace_project(self.path)
        project = with_repo(self.project if isinstance(self.project, Project) else None, self.state.get("repoData"))
        return SessionIn(sid, tuple(turns), started, SOURCE, str(title), CLIENT, project)
