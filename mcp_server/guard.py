"""The HTTP transport's gate: which Host and Origin headers are accepted, and the bearer
token. One ASGI middleware in front of the SDK's streamable HTTP app.

Invariants:
- Host (DNS-rebinding protection, 421 otherwise): bound to loopback, only loopback names
  (127.0.0.1, localhost, [::1]); bound to one other address, that address; bound to
  every interface (0.0.0.0, ::), which needs a token, any Host, since remote clients
  reach the machine by names the server cannot know. ``--allow-host`` adds names. Ports
  are not compared (a proxy may forward another one).
- Origin (browser pages, 403 otherwise): absent (not a browser), the server's own origin
  (an allowed host name at the server's port; in any-Host mode, the request's own Host
  at the server's port), or one given with ``--allow-origin``. A page of another local
  web app (``http://127.0.0.1:<other port>``) is refused.
- Authorization (when a token is set, 401 otherwise): ``Bearer <token>``, the scheme in
  any case, the token compared in constant time.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_every_interface(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def split_host(value: str) -> tuple[str, int | None]:
    """``name[:port]`` (IPv6 in brackets) -> (lower-case name without brackets, port)."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, _, port = value.partition(":")
    else:
        name, port = value, ""
    return name, int(port) if port.isdigit() else None


@dataclass(frozen=True)
class Policy:
    """What the gate accepts; :func:`policy` builds it from the serve options."""

    port: int
    hosts: frozenset[str] | None  # None: any Host
    origins: frozenset[str] = field(default_factory=frozenset)
    token: str | None = None

    def host_ok(self, host: str) -> bool:
        return self.hosts is None or split_host(host)[0] in self.hosts

    def origin_ok(self, origin: str, host: str) -> bool:
        if origin.rstrip("/").lower() in self.origins:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False
        name, port = split_host(parts.netloc)
        port = port if port is not None else (443 if parts.scheme == "https" else 80)
        own = self.hosts if self.hosts is not None else {split_host(host)[0]}
        return name in own and port == self.port

    def token_ok(self, authorization: str) -> bool:
        if self.token is None:
            return True
        scheme, _, credentials = authorization.strip().partition(" ")
        got = credentials.strip().encode()
        return scheme.lower() == "bearer" and hmac.compare_digest(got, self.token.encode())


def policy(
    bind: str, port: int, token: str | None, *, allow_hosts: Sequence[str] = (), allow_origins: Sequence[str] = ()
) -> Policy:
    """The gate for a server bound to ``bind``:``port`` (see the module's invariants)."""
    hosts: frozenset[str] | None
    if is_every_interface(bind) and token:
        hosts = None
    else:
        names = set(LOOPBACK_NAMES) if is_loopback(bind) else {split_host(bind)[0]}
        hosts = frozenset(names | {split_host(h)[0] for h in allow_hosts})
    origins = frozenset(o.rstrip("/").lower() for o in allow_origins)
    return Policy(port=port, hosts=hosts, origins=origins, token=token)


class Gate:
    """ASGI middleware applying a :class:`Policy` to every HTTP request."""

    def __init__(self, app: Any, rules: Policy) -> None:
        self.app = app
        self.rules = rules

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
            host = headers.get("host", "")
            refusal: tuple[int, str, list[tuple[bytes, bytes]]] | None = None
            if not self.rules.host_ok(host):
                name = split_host(host)[0]
                refusal = (421, f"Host {host!r} is not allowed; start the server with --allow-host {name}", [])
            elif "origin" in headers and not self.rules.origin_ok(headers["origin"], host):
                origin = headers["origin"]
                refusal = (403, f"Origin {origin!r} is not allowed; start the server with --allow-origin {origin}", [])
            elif not self.rules.token_ok(headers.get("authorization", "")):
                refusal = (401, "missing or wrong bearer token", [(b"www-authenticate", b"Bearer")])
            if refusal is not None:
                status, message, extra = refusal
                await send(
                    {
                        "type": "http.response.start",
                        "status": status,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"x-content-type-options", b"nosniff"),
                            *extra,
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": message.encode()})
                return
        await self.app(scope, receive, send)
