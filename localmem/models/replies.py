"""One parser for every model reply: the JSON object asked for, or a named failure.

Every caller of a chat model (extraction, CABLE's queries and verdicts, topic and theme
labels, answer, explore) reads the reply through :func:`parse_reply` (one object) or
:func:`parse_entries` (one entry per item, extraction's ``m1``, ``m2``, ...). A reply
that is not what was asked for raises :class:`ReplyError`, whose ``reason`` is short and
stable; it is the parse status of the call log (``localmem/storage/layers/calls.py``):

- ``empty``: no text, or only white space;
- ``truncated``: a JSON object or array that never closes (the token cap cut it);
- ``not JSON``: anything else that does not parse;
- ``not an object``: valid JSON, but not the ``{...}`` asked for;
- ``missing required key 'x'``: the schema requires ``x`` and the reply has none;
- ``empty 'x'``: a required string is empty (or null): a label, an answer.
  Required lists may be empty: "no cues", "no queries" is an answer.

A Markdown code fence around the JSON (unconstrained models write one) is accepted.
The shape is checked here; the content (are the phrases in the turn, is the type one
of four) is the caller's, which counts what it rejects.

What is a failure for extraction (``parse_entries``; the job of a failed turn is a
failed attempt: back-off, retry, parked after ``job_attempts``):
- the whole reply fails (every turn of the call) when it is empty, not JSON, not an
  object, or cut before any entry closed;
- one turn fails when its key (``mN``) is missing (a reply cut after the entries
  before it reports ``truncated``), when its entry is not an object, or when the
  entry holds none of the fields its schema requires (``{}`` says nothing);
- a turn succeeds when its entry is an object holding at least one required field,
  even with every list empty: a model saying "nothing to index here" is an answer.
  Low-information turns never reach the model, so they cannot fail.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from localmem.errors import LocalmemError

PURPOSES = ("extract", "antecedent-queries", "antecedent-verify", "topic-label", "theme-label", "answer", "explore")
OK = "ok"
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```\s*$", re.DOTALL)


class ReplyError(LocalmemError):
    """A model reply that is not the JSON asked for; ``reason`` says why in a few words."""

    exit_code = 6

    def __init__(self, reason: str, text: str = "") -> None:
        self.reason = reason
        shown = " ".join(text.split())[:80]
        super().__init__(f"model reply {reason}" + (f": {shown!r}" if shown else ""))


@dataclass(frozen=True)
class CallRecord:
    """One model call as the call log stores it."""

    purpose: str
    model: str
    prompt_hash: str
    reply: str
    status: str  # OK or a ReplyError reason
    prompt_tokens: int = 0
    generated_tokens: int = 0


def prompt_hash(messages: Sequence[Mapping[str, str]]) -> str:
    blob = json.dumps([dict(m) for m in messages], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def record(
    purpose: str, model: str, messages: Sequence[Mapping[str, str]], reply: str, status: str, tokens: tuple[int, int]
) -> CallRecord:
    return CallRecord(purpose, model, prompt_hash(messages), reply, status, tokens[0], tokens[1])


def _unfence(text: str) -> str:
    text = text.strip()
    m = _FENCE.match(text)
    return m.group(1).strip() if m else text


def _load(text: str) -> Any:
    """The JSON value of ``text``, or ReplyError (empty / truncated / not JSON)."""
    body = _unfence(text)
    if not body:
        raise ReplyError("empty")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, RecursionError):
        pass
    depth, in_str, _last = _scan(body)
    if body[0] in "{[" and (depth > 0 or in_str):
        raise ReplyError("truncated", text)
    raise ReplyError("not JSON", text)


def _scan(text: str) -> tuple[int, bool, int]:
    """Bracket depth and string state at the end of ``text``, and the index of the last
    ``}`` that closed a value directly inside the top-level object (-1: none)."""
    depth, in_str, esc, last = 0, False, False, -1
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
            if depth == 1 and ch == "}":
                last = i
    return depth, in_str, last


def _required(schema: Mapping[str, Any] | None) -> list[str]:
    req = schema.get("required", []) if schema else []
    return [str(k) for k in req] if isinstance(req, list) else []


def parse_reply(text: str, schema: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The reply's JSON object; every key ``schema`` requires must be present, and a
    required string must not be empty. Raises :class:`ReplyError`."""
    data = _load(text)
    if not isinstance(data, dict):
        raise ReplyError("not an object", text)
    props = schema.get("properties", {}) if schema else {}
    for key in _required(schema):
        if key not in data:
            raise ReplyError(f"missing required key {key!r}", text)
        value = data[key]
        wants_str = isinstance(props, dict) and isinstance(props.get(key), dict) and props[key].get("type") == "string"
        if value is None or (wants_str and isinstance(value, str) and not value.strip()):
            raise ReplyError(f"empty {key!r}", text)
    return data


def parse_entries(text: str, schema: Mapping[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """A reply with one entry per item (the keys ``schema`` requires): (entries that
    are answers, reason per failed key); see the module docstring for what fails.
    A reply cut short keeps the entries completed before the cut. Raises
    :class:`ReplyError` when the reply as a whole is unusable."""
    keys = _required(schema)
    cut = False
    try:
        data = _load(text)
    except ReplyError as exc:
        if exc.reason != "truncated":
            raise
        body = _unfence(text)
        _depth, _in_str, last = _scan(body)
        data = None
        if body.startswith("{") and last >= 0:
            try:
                data = json.loads(body[: last + 1] + "}")
            except (json.JSONDecodeError, RecursionError):
                data = None
        if not isinstance(data, dict):
            raise
        cut = True
    if not isinstance(data, dict):
        raise ReplyError("not an object", text)
    props = schema.get("properties", {})
    entries: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for key in keys:
        entry = data.get(key)
        fields = _required(props.get(key)) if isinstance(props, dict) else []
        if key not in data:
            failed[key] = "truncated" if cut else f"missing required key {key!r}"
        elif not isinstance(entry, dict):
            failed[key] = f"{key!r} is not an object"
        elif fields and not any(f in entry for f in fields):
            failed[key] = f"empty {key!r}"
        else:
            entries[key] = entry
    return entries, failed


def status_of(failed: Mapping[str, str]) -> str:
    """A call's parse status from its failed entries: OK, or the first reason."""
    return next(iter(failed.values()), OK)
