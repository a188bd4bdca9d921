"""The tools the exploring model may call, and running one call safely.

The tools are the traversal catalog's (:data:`localmem.toolkit.catalog.TOOLS`, the same
list the MCP server offers), each seen through its ``Local`` view: the arguments a model
may give, the small per-call limits fixed for it and a one-line doc for the prompt.
:func:`run_call` validates a call the model wrote, runs it and shows the model a compact,
cut result.

Invariants:
- a call never raises: unknown tools, bad arguments and toolkit errors (no such cue,
  bad date) come back as ``(False, "error: ...", [])`` for the model to read;
- what the model sees of one result is at most :data:`RESULT_CHARS` characters, with
  at most :data:`RESULT_ITEMS` items and turn texts cut to :data:`SNIPPET_CHARS`;
- with ``as_of`` / ``scope``, the turn ids a result names are filtered the way the
  toolkit filters its own results, so later turns never become evidence.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass
from typing import Any

from localmem.errors import InputError, LocalmemError
from localmem.storage.write.store import Store
from localmem.toolkit import catalog
from localmem.toolkit.common import _time, _visible

RESULT_CHARS = 700  # one call's result as the model sees it
RESULT_ITEMS = catalog.LOCAL_ITEMS  # items per call (the toolkit's limit, clamped)
SNIPPET_CHARS = 160  # a turn's text inside a result


@dataclass(frozen=True)
class Param:
    type: str  # "str" / "int"
    required: bool = False


@dataclass(frozen=True)
class Tool:
    """A catalog tool as the local model sees it."""

    name: str
    doc: str
    params: dict[str, Param]
    spec: catalog.ToolSpec
    fixed: Mapping[str, Any]
    scoped: bool = False  # takes as_of / scope

    def run(self, store: Store, **args: Any) -> Any:
        return self.spec.call(store, **args, **self.fixed)


def _param(spec: catalog.ToolSpec, name: str) -> Param:
    arg = spec.arg(name)
    if arg.kind not in ("int", "str"):
        raise TypeError(f"{spec.name}.{name}: the local model gives only int and str arguments")
    # Of a thing named by its text or its id, the one argument offered is required.
    pair = spec.text_or_id or ()
    required = arg.required or (name in pair and not any(n in spec.local.args for n in pair if n != name))
    return Param(arg.kind, required)


def _tool(spec: catalog.ToolSpec) -> Tool:
    view = spec.local
    params = {name: _param(spec, name) for name in view.args}
    return Tool(view.name or spec.name, view.brief, params, spec, view.fixed, view.scoped)


TOOLS = {t.name: t for t in map(_tool, catalog.TOOLS)}


def validate(tool_name: Any, args: Any) -> tuple[Tool, dict[str, Any]]:
    """The tool and its checked arguments; ``InputError`` says what is wrong."""
    if not isinstance(tool_name, str) or tool_name not in TOOLS:
        raise InputError(f"unknown tool {tool_name!r}; tools are {', '.join(TOOLS)}")
    tool = TOOLS[tool_name]
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InputError(f"{tool.name}: args must be an object")
    unknown = [k for k in args if k not in tool.params]
    if unknown:
        raise InputError(f"{tool.name}: unknown argument(s) {unknown}; it takes {list(tool.params)}")
    out: dict[str, Any] = {}
    for name, p in tool.params.items():
        v = args.get(name)
        if v is None or v == "":
            if p.required:
                raise InputError(f"{tool.name}: missing argument {name!r}")
            continue
        if p.type == "int":
            if isinstance(v, str) and v.strip().lstrip("-").isdigit():
                v = int(v.strip())
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(f"{tool.name}: {name} must be an integer; got {v!r}")
        elif not isinstance(v, str):
            if isinstance(v, int | float) and not isinstance(v, bool):
                v = str(v)
            else:
                raise InputError(f"{tool.name}: {name} must be a string; got {v!r}")
        out[name] = v
    return tool, out


def _plain(obj: Any) -> Any:
    if hasattr(obj, "to_dict") and callable(obj.to_dict):
        return obj.to_dict()
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    return obj


def _turn_ids(obj: Any) -> list[int]:
    """Every turn id a result names, in order (keys ``turn_id``)."""
    found: list[int] = []

    def walk(x: Any) -> None:
        if isinstance(x, dict):
            tid = x.get("turn_id")
            if isinstance(tid, int) and not isinstance(tid, bool) and tid not in found:
                found.append(tid)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(obj)
    return found


_DROP = {"clipped", "source_id", "cue_ids", "offset", "limit", "next_offset"}


def compact(obj: Any) -> str:
    """A result as short JSON: no null/empty fields, bookkeeping keys dropped, turn
    texts cut to SNIPPET_CHARS, the whole cut to RESULT_CHARS."""

    def slim(x: Any) -> Any:
        if isinstance(x, dict):
            out = {}
            for k, v in x.items():
                if k in _DROP or v is None or v == [] or v == "":
                    continue
                if k == "text" and isinstance(v, str) and len(v) > SNIPPET_CHARS:
                    v = v[:SNIPPET_CHARS].rstrip() + "…"
                out[k] = slim(v)
            return out
        if isinstance(x, list):
            return [slim(v) for v in x]
        return x

    text = json.dumps(slim(obj), ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= RESULT_CHARS else text[: RESULT_CHARS - 12] + " …(cut)"


def run_call(
    store: Store, tool_name: Any, args: Any, *, as_of: str | None = None, scope: str | None = None
) -> tuple[bool, str, list[int]]:
    """Validate and run one call: (ok, compact result or error, turn ids named)."""
    try:
        tool, checked = validate(tool_name, args)
        if tool.scoped:
            checked = {**checked, "as_of": as_of, "scope": scope}
        result = _plain(tool.run(store, **checked))
    except LocalmemError as exc:
        return False, f"error: {exc}"[:RESULT_CHARS], []
    except (TypeError, ValueError) as exc:  # a toolkit function refusing odd input
        return False, f"error: {exc}"[:RESULT_CHARS], []
    ids = _turn_ids(result)
    if as_of is not None:
        ids = [t for t in ids if t in _visible(store, ids, _time(as_of, "as_of"), scope)]
    return True, compact(result), ids
