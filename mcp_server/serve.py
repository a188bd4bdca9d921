"""Run the server: stdio for desktop clients, streamable HTTP on 127.0.0.1, an optional
folder watcher beside it. ``localmem serve`` and the ``localmem-mcp`` script land here.

stdout is the protocol wire on stdio: everything else (logs, watcher events, errors)
goes to stderr. HTTP binds to loopback by default with Host/Origin checks (DNS-rebinding
protection); binding any other address requires a bearer token, compared in constant
time on every request.
"""

from __future__ import annotations

import argparse
import hmac
import ipaddress
import logging
import os
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import apsw

from localmem.config import Settings, load_settings
from localmem.errors import ConfigError, LocalmemError
from localmem.ingest.watch import Watcher
from localmem.memory import generator, open_store

log = logging.getLogger("localmem.mcp")
TOKEN_ENV = "LOCALMEM_MCP_TOKEN"
DEFAULT_PORT = 8765
LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: HTTP requests need ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            got = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(got, self.expected):
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                return
        await self.app(scope, receive, send)


def http_app(server: Any, host: str, port: int, token: str | None, origins: Sequence[str] = ()) -> Any:
    """The streamable HTTP ASGI app: Host/Origin checked always, the token when given."""
    # lazy: the MCP SDK takes ~0.5 s to import; `localmem --help` imports this module
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*"]
    allowed_origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*", *origins]
    if not is_loopback(host):
        hosts.append(f"{host}:*")
        allowed_origins.append(f"http://{host}:*")
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=allowed_origins
    )
    app = server.streamable_http_app(transport_security=security, host=host)
    return BearerAuth(app, token) if token else app


def serve(
    settings: Settings,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    origins: Sequence[str] = (),
    watch: Path | None = None,
    worker: bool = True,
) -> int:
    """Run until the client disconnects (stdio) or the process is stopped (HTTP)."""
    token = token or os.environ.get(TOKEN_ENV) or None
    if transport not in ("stdio", "http"):
        raise ConfigError(f"unknown transport {transport!r}: stdio or http")
    if transport == "http" and not is_loopback(host) and not token:
        raise ConfigError(f"binding to {host} (not loopback) needs a bearer token: pass --token or set {TOKEN_ENV}")
    # lazy: the MCP SDK takes ~0.5 s to import; `localmem --help` imports this module
    from mcp_server.server import build_server

    model = generator(settings) if settings.model else None
    stop = threading.Event()
    with open_store(settings) as store:
        watcher = _start_watcher(settings, watch, stop) if watch else None
        server = build_server(store, generator=model, worker=worker)
        log.info("localmem MCP server on %s (%s)", settings.db, transport)
        try:
            if transport == "stdio":
                server.run("stdio")
            else:
                # lazy: the HTTP transport's runtime, only for --transport http
                import uvicorn

                app = http_app(server, host, port, token, origins)
                config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
                anyio.run(uvicorn.Server(config).serve)
        finally:
            stop.set()
            if watcher is not None:
                watcher.join(timeout=15)
    return 0


def _start_watcher(settings: Settings, folder: Path, stop: threading.Event) -> threading.Thread:
    """The folder watcher in a thread with its own store (ingest only: the server's
    worker, when a model is configured, enriches what it ingests)."""
    folder = folder.expanduser()
    if not folder.is_dir():
        raise ConfigError(f"--watch: not a folder: {folder}")

    def run() -> None:
        try:
            with open_store(settings) as own:
                w = Watcher(own, folder, on_event=lambda e: log.warning("watch: %s", e["message"]))
                w.run(stop)
        except (LocalmemError, apsw.Error) as exc:
            log.error("watcher stopped: %s", exc)

    t = threading.Thread(target=run, name="localmem-watch", daemon=True)
    t.start()
    return t


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``localmem serve`` and ``localmem-mcp``."""
    p.add_argument("--transport", choices=["stdio", "http"], default="stdio", help="stdio (default) or http")
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP: port (default {DEFAULT_PORT})")
    p.add_argument(
        "--token", help=f"HTTP: bearer token clients must send (default ${TOKEN_ENV}); required off loopback"
    )
    p.add_argument("--allow-origin", action="append", default=[], help="HTTP: a browser origin to accept (repeatable)")
    p.add_argument("--watch", type=Path, help="also ingest chat logs that appear in this folder")
    p.add_argument("--model", help="GGUF chat model for enrichment and the answer tool (default: $LOCALMEM_MODEL)")
    p.add_argument("--no-worker", action="store_true", help="do not enrich in the background")
    p.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level"
    )


def run_from_args(args: argparse.Namespace, settings: Settings) -> int:
    logging.basicConfig(stream=sys.stderr, level=args.log_level, format="localmem-mcp: %(levelname)s %(message)s")
    logging.getLogger("localmem").setLevel(args.log_level)
    settings = settings.with_overrides(model=args.model)
    return serve(
        settings,
        transport=args.transport,
        host=args.host,
        port=args.port,
        token=args.token,
        origins=args.allow_origin,
        watch=args.watch,
        worker=not args.no_worker,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``localmem-mcp``: the server for MCP clients (stdio unless --transport http)."""
    p = argparse.ArgumentParser(prog="localmem-mcp", description="localmem's MCP server (stdio or streamable HTTP).")
    p.add_argument("--db", help="database file (default: $LOCALMEM_DB or the user data dir)")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        return run_from_args(args, load_settings(db=args.db))
    except LocalmemError as exc:
        print(f"localmem-mcp: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
