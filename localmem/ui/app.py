"""The web view's routes and JSON API, and ``serve`` (``localmem ui``).

Routes: ``/`` is the one page (``static/index.html`` with the session's token written
into it, for the page's own POSTs), ``/static/*`` its script and style, ``/api/*`` the
JSON each page reads (``views``), ``POST /api/forget`` the one write. Every request
passes ``security.Guard`` first.

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
import webbrowser
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import apsw

from localmem.config import Settings
from localmem.errors import InputError, LocalmemError, NotFound
from localmem.memory import open_store
from localmem.storage.write.store import Store
from localmem.ui import views
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

    def _call(self, fn: Callable[[Store], T], read: bool) -> T:
        if self._store is None:
            self._store = self._opener()
        if not read:
            return fn(self._store)
        with self._store.snapshot():  # a page's queries see one commit, whoever writes meanwhile
            return fn(self._store)

    async def run(self, fn: Callable[[Store], T], *, read: bool = True) -> T:
        """``fn(store)`` on the store's thread; ``read``: inside one snapshot."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._call, fn, read)

    def close(self) -> None:
        def shut() -> None:
            if self._store is not None:
                self._store.close()
                self._store = None

        self._pool.submit(shut).result()
        self._pool.shutdown()


def _int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise InputError(f"{name} must be an integer, got {value!r}") from exc


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
            return JSONResponse(await db.run(fn, read=read))
        except NotFound as exc:
            return JSONResponse({"error": str(exc)}, status_code=404)
        except LocalmemError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        except apsw.BusyError:
            return JSONResponse({"error": "the database is busy; try again"}, status_code=503)

    async def index(request: Request) -> Response:
        return HTMLResponse(page, headers={"cache-control": "no-store"})

    async def ask(request: Request) -> Response:
        q = request.query_params
        try:
            budget = _int(q.get("budget"), "budget")
        except InputError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return await answer(lambda s: views.ask(s, q.get("q", ""), budget, q.get("as_of"), q.get("scope")))

    async def timeline(request: Request) -> Response:
        q = request.query_params
        try:
            limit, offset = _int(q.get("limit"), "limit") or 200, _int(q.get("offset"), "offset") or 0
        except InputError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return await answer(lambda s: views.timeline(s, limit, offset))

    async def session(request: Request) -> Response:
        sid = int(request.path_params["session_id"])
        return await answer(lambda s: views.session(s, sid))

    async def turn(request: Request) -> Response:
        tid = int(request.path_params["turn_id"])
        return await answer(lambda s: views.turn(s, tid))

    async def health(request: Request) -> Response:
        return await answer(views.health)

    async def forget(request: Request) -> Response:
        try:
            body = json.loads(await request.body() or b"{}")
        except json.JSONDecodeError as exc:
            return JSONResponse({"error": f"body is not JSON: {exc.msg}"}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "body must be a JSON object"}, status_code=400)
        try:
            tid, sid = _int(_str(body.get("turn_id")), "turn_id"), _int(_str(body.get("session_id")), "session_id")
        except InputError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        return await answer(lambda s: views.forget(s, tid, sid), read=False)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        db.close()

    app = Starlette(
        routes=[
            Route("/", index),
            Route("/api/ask", ask),
            Route("/api/timeline", timeline),
            Route("/api/session/{session_id:int}", session),
            Route("/api/turn/{turn_id:int}", turn),
            Route("/api/health", health),
            Route("/api/forget", forget, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ],
        lifespan=lifespan,
    )
    return Guard(app, token)


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


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
