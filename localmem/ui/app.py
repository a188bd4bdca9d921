"""The web view's routes and JSON API, and ``serve`` (``localmem ui``).

Routes: ``/`` is the one page (``static/index.html`` with the session's token written
into it, for the page's own POSTs), ``/static/*`` its scripts and style, ``GET /api/*``
the JSON each page reads (``views``, ``browse``, ``injected``), each in one snapshot, and
the writes, each a ``POST`` with a JSON body: ``/api/forget/preview`` (reads, but a
selection can be long), ``/api/forget``, ``/api/redact`` and ``/api/recalls/clear``. Every
request passes ``security.Guard`` first: a POST needs the token header as well as the
cookie.

One thread owns the store: apsw connections and the vector mirrors are per thread, so
every view runs on a single worker thread (opened on first use, closed at shutdown)
while the event loop stays free to answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import socket
import sys
import threading
import time
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import apsw

from localmem.config import Settings
from localmem.errors import InputError, LocalmemError, NotFound
from localmem.memory import open_store
from localmem.storage.reads.browse import FILTERS
from localmem.storage.write.store import Store
from localmem.ui import browse, forgetting, injected, views
from localmem.ui.forgetting import Changed
from localmem.ui.security import HEADER, ASGIApp, Guard

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

T = TypeVar("T")
HOST = "127.0.0.1"
STATIC = Path(str(resources.files("localmem.ui") / "static"))
TOKEN_MARK = "__LOCALMEM_TOKEN__"


class StoreThread:
    """The store, opened by ``opener`` on a single worker thread and used only there."""

    def __init__(self, opener: Callable[[], Store]) -> None:
        self._opener = opener
        self._store: Store | None = None
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="localmem-ui")

    def _call(self, fn: Callable[[Store], T], read: bool) -> tuple[T, float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        if self._store is None:
            self._store = self._opener()
        if not read:
            out = fn(self._store)
        else:
            with self._store.snapshot():  # a page's queries see one commit, whoever writes meanwhile
                out = fn(self._store)
        return out, 1000 * (time.perf_counter() - wall), 1000 * (time.process_time() - cpu)

    async def timed(self, fn: Callable[[Store], T], *, read: bool = True) -> tuple[T, float, float]:
        """``fn(store)`` on the store's thread (``read``: inside one snapshot), with the
        milliseconds it took there: wall clock, and the process's CPU time meanwhile (the
        embedder's threads included)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, fn, read)

    async def run(self, fn: Callable[[Store], T], *, read: bool = True) -> T:
        """``fn(store)`` on the store's thread; ``read``: inside one snapshot."""
        return (await self.timed(fn, read=read))[0]

    def close(self) -> None:
        def shut() -> None:
            if self._store is not None:
                self._store.close()
                self._store = None

        self._pool.submit(shut).result()
        self._pool.shutdown()


def _int(value: Any, name: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InputError(f"{name} must be an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise InputError(f"{name} must be an integer, got {value!r}") from exc


def _filters(q: Mapping[str, str]) -> dict[str, str]:
    """The browser's filters among the query parameters (``browse.FILTERS``)."""
    return {k: q[k] for k in FILTERS if q.get(k)}


async def _body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"{}")
    except json.JSONDecodeError as exc:
        raise InputError(f"body is not JSON: {exc.msg}") from exc
    if not isinstance(body, dict):
        raise InputError("body must be a JSON object")
    return body


def build_app(opener: Callable[[], Store], token: str) -> ASGIApp:
    """The guarded ASGI app over the store ``opener`` opens."""
    # starlette: imported only when the web view runs, so `localmem --help` stays fast
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    db = StoreThread(opener)
    page = (STATIC / "index.html").read_text("utf-8").replace(TOKEN_MARK, token)

    async def answer(fn: Callable[[Store], Any], *, read: bool = True) -> Response:
        try:
            out, wall, cpu = await db.timed(fn, read=read)
            # Server-Timing: what the store's thread spent (devtools show it; bench ui reads it)
            return JSONResponse(out, headers={"server-timing": f"view;dur={wall:.2f}, cpu;dur={cpu:.2f}"})
        except NotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except Changed as exc:
            return JSONResponse({"error": str(exc)}, status_code=409)
        except LocalmemError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except apsw.BusyError:
            return JSONResponse({"error": "the database is busy; try again"}, status_code=503)

    def get(fn: Callable[[Mapping[str, str], Store], Any]) -> Callable[[Request], Awaitable[Response]]:
        """A read: ``fn(query parameters, store)`` in one snapshot."""

        async def route(request: Request) -> Response:
            q = {**request.query_params, **{k: str(v) for k, v in request.path_params.items()}}
            return await answer(lambda s: fn(q, s))

        return route

    def post(
        fn: Callable[[dict[str, Any], Store], Any], *, read: bool = False
    ) -> Callable[[Request], Awaitable[Response]]:
        """A POST: ``fn(JSON body, store)`` (``read``: in one snapshot, for the preview); the
        gate has checked the token header."""

        async def route(request: Request) -> Response:
            try:
                body = await _body(request)
            except InputError as exc:
                return JSONResponse({"error": str(exc)}, status_code=400)
            return await answer(lambda s: fn(body, s), read=read)

        return route

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers={"cache-control": "no-store"})

    def ask(q: Mapping[str, str], s: Store) -> Any:
        return views.ask(s, q.get("q", ""), _int(q.get("budget"), "budget"), q.get("as_of"), q.get("scope"))

    def find(q: Mapping[str, str], s: Store) -> Any:
        page, per = _int(q.get("page"), "page") or 0, _int(q.get("per_page"), "per_page") or browse.PAGE
        return browse.find(s, q.get("q", ""), _filters(q), page, per, q.get("match") or "all")

    def timeline(q: Mapping[str, str], s: Store) -> Any:
        limit, offset = _int(q.get("limit"), "limit") or 50, _int(q.get("offset"), "offset") or 0
        return browse.timeline(s, _filters(q), limit, offset)

    def session(q: Mapping[str, str], s: Store) -> Any:
        sid = int(q["session_id"])
        return browse.session(s, sid, _int(q.get("turn"), "turn"), _int(q.get("offset"), "offset"))

    def recall_calls(q: Mapping[str, str], s: Store) -> Any:
        limit, offset = _int(q.get("limit"), "limit") or 50, _int(q.get("offset"), "offset") or 0
        return injected.calls(s, limit, offset, q.get("client"))

    def forget(b: dict[str, Any], s: Store) -> Any:
        if "turn_id" in b or "session_id" in b:  # the short forms
            sel: dict[str, Any] = {"turns": [b["turn_id"]]} if "turn_id" in b else {"session": b["session_id"]}
        else:
            sel = b.get("selection") or {}
        return forgetting.forget(s, sel, b.get("digest") or "")

    def redact(b: dict[str, Any], s: Store) -> Any:
        args = [_int(b.get(k), k) for k in ("turn_id", "start", "end")]
        if None in args:
            raise InputError("redact needs turn_id, start and end")
        tid, start, end = (int(x) for x in args if x is not None)
        return forgetting.redact(s, tid, start, end, b.get("hash"), b.get("text"))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        db.close()

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/api/ask", get(ask)),
            Route("/api/facets", get(lambda q, s: browse.facets(s))),
            Route("/api/months", get(lambda q, s: browse.months(s, _filters(q)))),
            Route("/api/find", get(find)),
            Route("/api/timeline", get(timeline)),
            Route("/api/session/{session_id:int}", get(session)),
            Route("/api/turn/{turn_id:int}", get(lambda q, s: views.turn(s, int(q["turn_id"])))),
            Route("/api/health", get(lambda q, s: views.health(s))),
            Route("/api/recalls", get(recall_calls)),
            Route("/api/recalls/{call_id:int}", get(lambda q, s: injected.call(s, int(q["call_id"])))),
            Route("/api/recalls/clear", post(lambda b, s: injected.clear(s)), methods=["POST"]),
            Route(
                "/api/forget/preview",
                post(lambda b, s: forgetting.preview(s, b.get("selection") or {}), read=True),
                methods=["POST"],
            ),
            Route("/api/forget", post(forget), methods=["POST"]),
            Route("/api/redact", post(redact), methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        lifespan=lifespan,
    )
    return Guard(app, token)


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:``port`` (0: any free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise InputError(f"--port {port}: cannot listen on {HOST}:{port}: {exc.strerror}") from exc
    sock.listen(128)
    return sock


def serve(settings: Settings, port: int = 0, open_browser: bool = False) -> int:
    """Serve the web view on 127.0.0.1 until interrupted; prints the URL with its token."""
    # uvicorn: imported only when the web view runs, so `localmem --help` stays fast
    import uvicorn

    with open_store(settings):  # fail here, before printing a URL, if the store cannot open
        pass
    token = secrets.token_urlsafe(32)
    app = build_app(lambda: open_store(settings), token)
    sock = bind(port)
    url = f"http://{HOST}:{sock.getsockname()[1]}/?token={token}"
    print(f"localmem web view of {settings.db}\n{url}\n(Ctrl-C to stop)", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    print("localmem ui: stopped", file=sys.stderr)
    return 0


__all__ = ["HEADER", "build_app", "serve"]
