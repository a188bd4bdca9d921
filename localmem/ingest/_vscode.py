"""What the fields of a VS Code chat session say, one at a time (``localmem.ingest.vscode``
reads the session with them): a log entry applied to the session (VS Code's
``ObjectMutationLog``), a request's state and times, a response part's text or tool line,
a serialized URI as a path, the workspace's folder and git state as the project.

Invariants: nothing here writes a file; an entry that does not fit the session is an
``InputError`` naming its path, never another exception.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from localmem.errors import InputError
from localmem.ingest._agent import tool_line
from localmem.ingest._json import loads
from localmem.ingest._units import timestamp
from localmem.records import Project

COMPLETE, CANCELLED, FAILED = 1, 2, 3  # ResponseModelState (0 pending, 4 needs input)


def has_line(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            while chunk := fh.read(1 << 16):
                if b"\n" in chunk:
                    return True
    except OSError as exc:
        raise InputError(f"cannot read file: {exc}", path=str(path)) from exc
    return False


def patch(state: dict[str, Any], entry: dict[str, Any], path: Path, where: str) -> None:
    """Apply one log entry (set, push, delete) to ``state``, as VS Code's ObjectMutationLog reads it."""
    keys = entry["k"]
    if not keys:
        raise InputError("a change with an empty path", path=str(path), where=where)
    target: Any = state
    try:
        for k in keys[:-1]:
            target = target[k]
        last = keys[-1]
        if entry["kind"] == 2:
            arr = target.get(last) if isinstance(target, dict) else target[last]
            arr = arr if isinstance(arr, list) else []
            if isinstance(entry.get("i"), int):
                del arr[entry["i"] :]
            arr.extend(entry.get("v") or [])
            target[last] = arr
        elif entry["kind"] == 1:
            target[last] = entry.get("v")
        elif isinstance(target, dict):
            target.pop(last, None)
        else:
            target[last] = None
    except (KeyError, IndexError, TypeError) as exc:
        raise InputError(
            f"a change to {keys!r} that the session does not have ({exc})", path=str(path), where=where
        ) from exc


def response_state(req: dict[str, Any]) -> int | None:
    ms = req.get("modelState")
    value = ms.get("value") if isinstance(ms, dict) else None
    if value is None and "isCanceled" in req:  # files written before modelState
        return CANCELLED if req["isCanceled"] else COMPLETE
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def ms(value: Any, path: Path, where: str) -> str | None:
    """VS Code's times are milliseconds since the epoch."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return None if value <= 0 else timestamp(value / 1000, path, where)
    return timestamp(value, path, where)


def message(msg: Any) -> str:
    if isinstance(msg, str):
        return msg.strip()
    if isinstance(msg, dict) and isinstance(msg.get("text"), str):
        return str(msg["text"]).strip()
    return ""


def value(md: Any) -> str:
    if isinstance(md, str):
        return md
    return md["value"] if isinstance(md, dict) and isinstance(md.get("value"), str) else ""


def uri_path(uri: Any) -> str:
    """A serialized URI (``{scheme, path, …}`` or a ``Location``'s ``uri``) as a path."""
    if isinstance(uri, dict) and isinstance(uri.get("uri"), dict):
        uri = uri["uri"]
    if isinstance(uri, str):
        return unquote(urlsplit(uri).path) if "://" in uri else uri
    if isinstance(uri, dict):
        return str(uri.get("fsPath") or uri.get("path") or "")
    return ""


def reference(part: dict[str, Any]) -> str:
    if isinstance(part.get("name"), str) and part["name"]:
        return str(part["name"])
    ref = part.get("inlineReference")
    if isinstance(ref, dict) and isinstance(ref.get("name"), str):
        return str(ref["name"])  # a symbol
    return uri_path(ref).rstrip("/").rsplit("/", 1)[-1]


# GitHub Copilot Chat's tools as VS Code records them (``toolId``: the contributed id) and
# what each does, for its compact line (microsoft/vscode-copilot-chat,
# src/extension/tools/common/toolNames.ts at 00a45c7cd39b2a6b28dfd1e20b1e0a20f1814783;
# their inputs name the file ``filePath``). Any other tool is ``used: <toolId>``.
_DOES = {
    **dict.fromkeys(("copilot_readFile", "read_file", "copilot_listDirectory", "list_dir"), "read"),
    **dict.fromkeys(
        (
            "copilot_createFile", "create_file", "copilot_replaceString", "replace_string_in_file",
            "copilot_multiReplaceString", "multi_replace_string_in_file", "copilot_insertEdit",
            "insert_edit_into_file", "copilot_editNotebook", "edit_notebook_file",
        ),
        "edit",
    ),
    **dict.fromkeys(
        (
            "copilot_findTextInFiles", "grep_search", "copilot_findFiles", "file_search",
            "copilot_searchCodebase", "semantic_search",
        ),
        "grep",
    ),
    **dict.fromkeys(("copilot_fetchWebPage", "fetch_webpage"), "webfetch"),
    **dict.fromkeys(("runSubagent", "run_subagent"), "task"),
    **dict.fromkeys(("copilot_applyPatch", "apply_patch"), "apply_patch"),
    **dict.fromkeys(("manage_todo_list", "copilot_memory", "memory"), "todowrite"),
}  # fmt: skip
_LINK = re.compile(r"\]\((file://[^)\s]+)\)")
_CODE = re.compile(r"`([^`]+)`")


def tool(part: dict[str, Any]) -> str | None:
    """A tool call's compact line: ``ran: CMD`` from a terminal call, ``read:`` / ``edited:`` /
    ``searched:`` / ``fetched:`` / ``delegated:`` for the tools ``_DOES`` knows, from their
    input (``rawInput``) or, where VS Code kept none, from the message it showed (``Read
    [](file:///…)``, ``Searched text for `…```); None for the agent's to-do list."""
    data = part.get("toolSpecificData")
    data = data if isinstance(data, dict) else {}
    name = str(part.get("toolId") or "tool")
    if data.get("kind") == "terminal":
        line = data.get("commandLine")
        if isinstance(line, dict):
            cmd = line.get("userEdited") or line.get("toolEdited") or line.get("original")
        else:
            cmd = data.get("command")  # the older shape
        return tool_line("bash", {"command": str(cmd or "")})
    does = _DOES.get(name)
    if data.get("kind") == "todoList" or does == "todowrite":
        return None
    raw = data.get("rawInput") if data.get("kind") == "input" else None
    if isinstance(raw, str):
        try:
            raw = loads(raw)
        except ValueError:
            raw = {"input": raw}
    args: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    if does is None:
        return tool_line(name, args)
    shown = value(part.get("pastTenseMessage")) or value(part.get("invocationMessage"))
    link, code = _LINK.search(shown), _CODE.search(shown)
    urls = args.get("urls")
    args.setdefault("path", args.get("filePath") or (uri_path(link.group(1)) if link else ""))
    args.setdefault("query", args.get("pattern") or (code.group(1) if code else ""))
    args.setdefault("url", urls[0] if isinstance(urls, list) and urls else "")
    return tool_line(does, args)


def with_repo(project: Project | None, repo: Any) -> Project | None:
    """The workspace's folder, with the git remote, branch and commit VS Code recorded
    (``repoData``, newer versions; the write path takes credentials out of the remote)."""
    if not isinstance(repo, dict):
        return project
    got = {
        k: repo.get(f)
        for k, f in (("repository", "remoteUrl"), ("branch", "localBranch"), ("commit", "localHeadCommit"))
    }
    fields = {k: v for k, v in got.items() if isinstance(v, str) and v}
    if not fields:
        return project
    return replace(project or Project(), **fields)


def workspace_project(path: Path) -> Project | None:
    """The folder of the workspace a session belongs to (``workspace.json`` beside ``chatSessions``)."""
    marker = path.parent.parent / "workspace.json"
    try:
        info = loads(marker.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    folder = info.get("folder") if isinstance(info, dict) else None
    if not isinstance(folder, str) or not folder.startswith("file://"):
        return None  # a multi-root workspace file, or a remote folder: not a path on this machine
    parts = urlsplit(folder)
    local = unquote(parts.path)
    if len(local) > 2 and local[0] == "/" and local[2] == ":":
        local = local[1:]  # file:///c:/Users/... on Windows
    return Project(cwd=local)
