"""Loopback stand-ins of the agents' model APIs, for the real CLIs in tests/agents/.

:class:`StandIn` is a ``ThreadingHTTPServer`` on 127.0.0.1 (a free port) that records every
request it gets (path and raw body, in arrival order) and answers each with one fixed
sentence (``reply``, which a test may change between sessions), in the shape the client's
API has:

- ``anthropic`` (Claude Code): ``POST /v1/messages``, a Message, or its SSE stream when the
  body asks ``"stream": true`` (message_start, content_block_start/delta/stop,
  message_delta, message_stop); ``/v1/messages/count_tokens`` gets a count.
- ``openai``: ``POST /v1/responses`` (Codex, ``wire_api = "responses"``; Copilot CLI), the
  SSE stream (response.created, response.output_item.added, response.output_text.delta,
  response.output_item.done, response.completed); and ``POST /v1/chat/completions`` (Aider,
  through litellm and the ``openai`` SDK), a ``chat.completion``, or when the body asks
  ``"stream": true`` its ``chat.completion.chunk`` events (the role and the reply, then the
  finish with the usage) and ``data: [DONE]``.
- ``gemini`` (Gemini CLI): ``POST /v1beta/models/<model>:generateContent``, and
  ``:streamGenerateContent?alt=sse`` (one ``data:`` event), ``:countTokens``. The CLI's
  side calls (the model routers, which ask for JSON under a ``responseSchema`` or
  ``responseJsonSchema``) get the least object their schema allows (:func:`filled`: the
  first enum value, the minimum). A side call is recorded like any other request, but only
  one that carries the conversation (``is_conversation``) is the model turn a test reads
  for what localmem injected.

Nothing here knows localmem: the stand-in is the model boundary, and what a request
carries is what the real client sent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

APIS = ("anthropic", "openai", "gemini")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


class StandIn:
    """One API's stand-in (module docstring); a context manager that serves in a thread."""

    def __init__(self, api: str, reply: str) -> None:
        if api not in APIS:
            raise ValueError(f"unknown API {api!r}: one of {', '.join(APIS)}")
        self.api = api
        self.reply = reply
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.stand_in = self  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, name=f"stand-in-{api}", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def record(self, req: Request) -> None:
        with self._lock:
            self.requests.append(req)

    def conversations(self) -> list[Request]:
        """The requests that carry the conversation (the model turn), in order."""
        with self._lock:
            return [r for r in self.requests if is_conversation(self.api, r)]


def is_conversation(api: str, req: Request) -> bool:
    """Whether ``req`` is the client's model turn, not a count, a title or a routing call."""
    try:
        body = req.json() or {}
    except ValueError:  # not JSON: answered 400, never a model turn
        return False
    if req.method != "POST" or not isinstance(body, dict):
        return False
    if api == "anthropic":
        return req.path.split("?")[0] == "/v1/messages" and bool(body.get("tools"))
    if api == "openai":
        return req.path.split("?")[0].endswith(("/responses", "/chat/completions"))
    config = body.get("generationConfig") or {}
    side = "responseSchema" in config or "responseJsonSchema" in config
    return "Content" in req.path and not side


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    SSE: ClassVar[dict[str, str]] = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the test reads the record, not a log
        pass

    @property
    def stand_in(self) -> StandIn:
        return self.server.stand_in  # type: ignore[attr-defined, no-any-return]

    def do_GET(self) -> None:
        self.stand_in.record(Request("GET", self.path, b""))
        if self.path.split("?")[0].endswith("/models"):
            return self._json({"data": [], "models": []})
        self._json({"error": {"message": f"no {self.path} here"}}, status=404)

    def do_HEAD(self) -> None:
        self.stand_in.record(Request("HEAD", self.path, b""))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        req = Request("POST", self.path, body)
        self.stand_in.record(req)
        api, reply = self.stand_in.api, self.stand_in.reply
        try:
            obj = req.json() or {}
        except ValueError:
            return self._json({"error": {"message": "the body is not JSON"}}, status=400)
        if api == "anthropic":
            return self._anthropic(req.path.split("?")[0], obj, reply)
        if api == "openai" and req.path.split("?")[0].endswith("/chat/completions"):
            return self._chat(obj, reply)
        if api == "openai":
            return self._sse([(e["type"], e) for e in responses_events(obj, reply)])
        return self._gemini(req, obj, reply)

    def _anthropic(self, path: str, obj: dict[str, Any], reply: str) -> None:
        if path.endswith("/count_tokens"):
            return self._json({"input_tokens": 100})
        message = {
            "id": "msg_standin",
            "type": "message",
            "role": "assistant",
            "model": obj.get("model", "claude"),
            "content": [{"type": "text", "text": reply}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }
        if not obj.get("stream"):
            return self._json(message)
        start = {**message, "content": [], "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 1}}
        events = [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": reply}},
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 10},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._sse(events)

    def _chat(self, obj: dict[str, Any], reply: str) -> None:
        head = {"id": "chatcmpl-standin", "created": 1700000000, "model": obj.get("model", "gpt")}
        usage = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
        if not obj.get("stream"):
            message = {"role": "assistant", "content": reply}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return self._json({**head, "object": "chat.completion", "choices": [choice], "usage": usage})
        chunk = {**head, "object": "chat.completion.chunk"}
        deltas = [
            {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None},
            {"index": 0, "delta": {"content": reply}, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": "stop"},
        ]
        events: list[tuple[str | None, Any]] = [(None, {**chunk, "choices": [d]}) for d in deltas]
        self._sse([*events, (None, {**chunk, "choices": [], "usage": usage})], done=True)

    def _gemini(self, req: Request, obj: dict[str, Any], reply: str) -> None:
        path = req.path.split("?")[0]
        if path.endswith(":countTokens"):
            return self._json({"totalTokens": 100})
        config = obj.get("generationConfig") or {}
        schema = config.get("responseJsonSchema") or config.get("responseSchema")
        if schema is not None:  # a side call that wants JSON (the model router): the least the schema allows
            reply = json.dumps(filled(schema))
        answer = {
            "candidates": [
                {"content": {"role": "model", "parts": [{"text": reply}]}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 100, "candidatesTokenCount": 10, "totalTokenCount": 110},
            "modelVersion": path.rpartition("/")[2].partition(":")[0],
        }
        if path.endswith(":streamGenerateContent"):
            return self._sse([(None, answer)])
        self._json(answer)

    def _json(self, obj: Any, status: int = 200) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sse(self, events: Sequence[tuple[str | None, Any]], done: bool = False) -> None:
        text = "".join((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n" for name, data in events)
        data = (text + ("data: [DONE]\n\n" if done else "")).encode()  # Chat Completions ends its stream so
        self.send_response(200)
        for k, v in self.SSE.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def responses_events(obj: dict[str, Any], reply: str) -> list[dict[str, Any]]:
    """The OpenAI Responses stream of one assistant message saying ``reply``."""
    item = {
        "type": "message",
        "id": "msg_standin",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": reply, "annotations": []}],
    }
    response = {"id": "resp_standin", "object": "response", "model": obj.get("model", "gpt"), "output": []}
    usage = {
        "input_tokens": 100,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 110,
    }
    return [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {
            "type": "response.output_text.delta",
            "output_index": 0,
            "content_index": 0,
            "item_id": item["id"],
            "delta": reply,
        },
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": [item], "usage": usage},
        },
    ]


def filled(schema: dict[str, Any]) -> Any:
    """The least value ``schema`` (JSON Schema, or Gemini's with upper-case types) allows:
    an object with its required properties, the first enum value, the minimum number."""
    kind = str(schema.get("type", "object")).lower()
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: filled(props.get(k) or {}) for k in schema.get("required", list(props))}
    if kind in ("integer", "number"):
        return schema.get("minimum", 1)
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    return "a stand-in"
