"""Run the server: stdio for desktop clients, streamable HTTP on 127.0.0.1, an optional
folder watcher beside it, and the store's resident socket (``localmem.resident``: CLI
queries and hooks read through this process instead of loading the store and the model
themselves; a hook's raw command line is planned by ``localmem.hooks.served``, a CLI
query's by the planner ``localmem serve`` passes); ``--transport socket`` serves the
socket alone, without MCP.
``localmem serve`` and the ``localmem-mcp`` script land here.

stdout is the protocol wire on stdio: everything else (logs, watcher events, errors)
goes to stderr. HTTP binds to loopback by default behind the gate of ``guard.py`` (Host
and Origin checks against DNS rebinding and other local pages); binding any other
address requires a bearer token (``$LOCALMEM_MCP_TOKEN``), checked on every request.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import apsw

from localmem.config import Settings, load_settings
from localmem.errors import ConfigError, LocalmemError
from localmem.hooks.served import HookPlanner
from localmem.ingest.watch import Watcher
from localmem.memory import generator, open_store
from localmem.resident.backups import rolling
from localmem.resident.daemon import WARM_LINE
from localmem.resident.listen import answers
from localmem.resident.server import ResidentServer
from localmem.resident.wire import CliCall, Plan, socket_path
from localmem.storage.engine.keys import KEY_FILE_ENV, read_key_file
from localmem.sync.background import syncing
from localmem.sync.keys import Keyring, add_sync_flags, keyring
from mcp_server.guard import Gate, is_loopback, policy

log = logging.getLogger("localmem.mcp")
TOKEN_ENV = "LOCALMEM_MCP_TOKEN"
TRANSPORTS = ("stdio", "http", "socket")
DEFAULT_PORT = 8765


def http_app(
    server: Any,
    host: str,
    port: int,
    token: str | None,
    origins: Sequence[str] = (),
    hosts: Sequence[str] = (),
) -> Any:
    """The streamable HTTP ASGI app behind the gate (Host, Origin, token; see guard.py)."""
    from mcp.server.transport_security import TransportSecuritySettings  # lazy: the SDK is slow to import

    # The gate checks Host and Origin; the SDK's own check (fixed lists) is turned off.
    app = server.streamable_http_app(
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False), host=host
    )
    return Gate(app, policy(host, port, token, allow_hosts=hosts, allow_origins=origins))


def serve(
    settings: Settings,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    token: str | None = None,
    origins: Sequence[str] = (),
    hosts: Sequence[str] = (),
    watch: Path | None = None,
    worker: bool = True,
    sync: SyncArgs | None = None,
    refuse: str | None = None,
    resident: bool = True,
    idle_exit: float | None = None,
    cli: Callable[[CliCall], Plan] | None = None,
) -> int:
    """Run until the client disconnects (stdio) or the process is stopped (HTTP, socket). A
    store that cannot be opened (no key, a wrong key, not a database) still gets a server:
    its tools are listed and every call is a tool error naming the cause
    (``refusing_server``), so a client shows why instead of "connection closed".
    ``resident``: also answer CLI queries and hooks on the store's socket; ``cli``: what
    makes the plan of a raw command line there (``localmem serve`` passes the CLI's;
    without it the socket refuses op ``cli`` and the caller loads its own settings first).
    ``idle_exit`` (socket transport only): exit after that many seconds without a request."""
    token = token or os.environ.get(TOKEN_ENV) or None
    if transport not in TRANSPORTS:
        raise ConfigError(f"unknown transport {transport!r}: {', '.join(TRANSPORTS)}")
    if transport == "http" and not is_loopback(host) and not token:
        raise ConfigError(f"binding to {host} (not loopback) needs a bearer token: set {TOKEN_ENV} (or pass --token)")
    if idle_exit is not None and (transport != "socket" or idle_exit <= 0):
        raise ConfigError("--idle-exit: a number of seconds above 0, with --transport socket")
    if transport == "socket":
        if refuse is not None:
            raise ConfigError(refuse)
        return _serve_socket(settings, watch, sync, idle_exit, cli)
    # lazy: the MCP SDK takes ~0.5 s to import; `localmem --help` imports this module
    from mcp_server.server import build_server, refusing_server

    model = generator(settings) if settings.model else None
    stop = threading.Event()
    try:
        if refuse is not None:
            raise ConfigError(refuse)
        store = open_store(settings)
    except LocalmemError as exc:  # no key, a wrong one, not a database...: every tool call says so
        log.error("%s", exc)
        _run(refusing_server(settings, str(exc)), transport, host, port, token, origins, hosts)
        return 0
    with store, _syncing(settings, sync), rolling(settings, _said):  # rolling backups: resident/backups.py
        watcher = _start_watcher(settings, watch, stop) if watch else None
        lock = threading.Lock()  # one store call at a time: MCP tools, resources and socket queries
        server = build_server(store, generator=model, worker=worker, lock=lock)
        sock = ResidentServer(store, lock, cli, HookPlanner())  # hooks' raw lines: whoever started the server
        if resident:
            sock.start()
        log.info("localmem MCP server on %s (%s)", settings.db, transport)
        try:
            _run(server, transport, host, port, token, origins, hosts)
        finally:
            sock.stop()
            stop.set()
            if watcher is not None:
                watcher.join(timeout=15)
    return 0


def _run(
    server: Any, transport: str, host: str, port: int, token: str | None, origins: Sequence[str], hosts: Sequence[str]
) -> None:
    if transport == "stdio":
        server.run("stdio")
        return
    import uvicorn  # lazy: the HTTP transport's runtime, only for --transport http

    app = http_app(server, host, port, token, origins, hosts)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    anyio.run(uvicorn.Server(config).serve)


@contextmanager
def _syncing(settings: Settings, sync: SyncArgs | None) -> Iterator[None]:
    """``--sync DIR``: sync in the background while the server runs (its log: stderr)."""
    if sync is None:
        yield
        return
    with syncing(
        lambda: open_store(settings), sync.root, sync.keys, sync.interval, lambda m: log.warning("sync: %s", m)
    ):
        yield


def _said(message: str) -> None:
    log.warning("%s", message)  # the process log: a daemon's `.log`, an MCP client's server log


def _serve_socket(
    settings: Settings,
    watch: Path | None,
    sync: SyncArgs | None = None,
    idle_exit: float | None = None,
    cli: Callable[[CliCall], Plan] | None = None,
) -> int:
    """The resident socket alone (no MCP SDK, no worker) until SIGINT or SIGTERM, or until
    ``idle_exit`` seconds pass without a request: the small daemon for hooks and CLI
    queries when no MCP client keeps a server running (``localmem.resident.daemon``); that
    daemon also exits at its next idle check once its store file is deleted or replaced
    (another file at the path: every caller is refused, ``store``)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    path = socket_path(settings.db)
    if idle_exit is not None and path is not None and answers(path):
        log.warning("localmem resident socket for %s is served by another process: not started", settings.db)
        return 0  # a daemon a hook started is not needed: nothing to report
    try:
        with open_store(settings) as store, _syncing(settings, sync), rolling(settings, _said):
            store.embedder.embed(["warm-up"])  # the model loaded now, not by the first caller
            watcher = _start_watcher(settings, watch, stop) if watch else None
            sock = ResidentServer(store, cli=cli, hooks=HookPlanner())
            if not sock.start(standby=False):
                raise ConfigError(
                    f"cannot serve {settings.db}'s socket: another process serves it, or no private folder"
                )
            log.warning("localmem resident socket for %s at %s", settings.db, sock.path)
            if idle_exit is not None:  # a daemon a query or hook started: its next caller is on the way
                t0 = time.perf_counter()
                sock.warm()
                log.warning(
                    "localmem resident socket for %s: %s %.0f ms",
                    settings.db,
                    WARM_LINE,
                    1000 * (time.perf_counter() - t0),
                )
            try:
                while not stop.wait(_idle_check(idle_exit)):
                    if idle_exit is not None and sock.idle_for() >= idle_exit:
                        log.warning("localmem resident socket for %s: idle for %g s, exiting", settings.db, idle_exit)
                        break
                    if idle_exit is not None and sock.store_gone():  # no caller can reach it any more
                        log.warning(
                            "localmem resident socket for %s: the store was deleted or replaced, exiting", settings.db
                        )
                        break
            finally:
                sock.stop()
                stop.set()
                if watcher is not None:
                    watcher.join(timeout=15)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def _idle_check(idle_exit: float | None) -> float | None:
    """How often the socket daemon looks at its idle time (None: it only waits for a signal)."""
    return None if idle_exit is None else min(5.0, max(0.1, idle_exit / 4))


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
    p.add_argument(
        "--transport",
        choices=TRANSPORTS,
        default="stdio",
        help="stdio (default), http, or socket: only the resident socket CLI queries and hooks use (no MCP)",
    )
    p.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"HTTP: port (default {DEFAULT_PORT})")
    p.add_argument(
        "--token",
        help=f"HTTP: bearer token clients must send; required off loopback. "
        f"Prefer ${TOKEN_ENV}: a flag shows in the process list",
    )
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="HTTP: also accept this Host name or address (repeatable; the bind address is always accepted)",
    )
    p.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="HTTP: also accept this browser origin, e.g. http://localhost:3000 (repeatable)",
    )
    p.add_argument("--watch", type=Path, help="also ingest chat logs that appear in this folder")
    add_sync_flags(p)
    p.add_argument("--model", help="GGUF chat model for enrichment and the answer tool (default: $LOCALMEM_MODEL)")
    p.add_argument("--no-worker", action="store_true", help="do not enrich in the background")
    p.add_argument(
        "--no-socket",
        action="store_true",
        help="do not answer CLI queries and hooks on the store's local socket (docs/architecture.md)",
    )
    p.add_argument(
        "--idle-exit",
        type=float,
        metavar="SECONDS",
        help="--transport socket: exit after this many seconds without a request (what a hook or a query starts: "
        "hooks.daemon_idle, query.daemon_idle), or once the store file is deleted or replaced; then also exit at "
        "once if another process already serves the store's socket",
    )
    p.add_argument(
        "--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="stderr log level"
    )


@dataclass(frozen=True)
class SyncArgs:
    root: Path
    keys: Keyring
    interval: float


def run_from_args(args: argparse.Namespace, settings: Settings, cli: Callable[[CliCall], Plan] | None = None) -> int:
    """``localmem serve`` / ``localmem-mcp``'s flags run; ``cli`` as :func:`serve` takes it."""
    logging.basicConfig(stream=sys.stderr, level=args.log_level, format="localmem-mcp: %(levelname)s %(message)s")
    logging.getLogger("localmem").setLevel(args.log_level)
    settings = settings.with_overrides(model=args.model)
    sync, unusable = None, getattr(args, "unusable", None)
    if args.sync is not None and unusable is None:
        try:
            sync = SyncArgs(args.sync, keyring(args, "sync-"), args.sync_interval)
        except LocalmemError as exc:  # a sync key file that cannot be used: the client is told, by tool errors
            unusable = f"--sync: {exc}"
    return serve(
        settings,
        transport=args.transport,
        host=args.host,
        port=args.port,
        token=args.token,
        origins=args.allow_origin,
        hosts=args.allow_host,
        watch=args.watch,
        worker=not args.no_worker,
        sync=sync,
        refuse=unusable,
        resident=not args.no_socket,
        idle_exit=args.idle_exit,
        cli=cli,
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``localmem-mcp``: the server for MCP clients (stdio unless --transport http)."""
    p = argparse.ArgumentParser(prog="localmem-mcp", description="localmem's MCP server (stdio or streamable HTTP).")
    p.add_argument("--db", help="database file (default: $LOCALMEM_DB or the user data dir)")
    p.add_argument(
        "--key-file",
        type=Path,
        metavar="FILE",
        help="file holding the store's encryption key (mode 600); else $LOCALMEM_KEY_FILE, $LOCALMEM_KEY or the OS keyring",
    )
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        if args.key_file is not None:
            os.environ[KEY_FILE_ENV] = str(args.key_file.resolve())  # what every connection reads the key from
            try:
                read_key_file(args.key_file)  # checked now (mode 600), as `localmem --key-file` does
            except ConfigError as exc:
                args.unusable = f"--key-file: {exc}"
        return run_from_args(args, load_settings(db=args.db))
    except LocalmemError as exc:
        print(f"localmem-mcp: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
