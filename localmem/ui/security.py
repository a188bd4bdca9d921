"""The web view's gate: loopback Host, same-origin Origin, and a secret token.

An ASGI middleware (no framework needed) in front of every HTTP request:

1. ``Host`` must name a loopback address (``127.0.0.1``, ``localhost``, ``[::1]``),
   else 421, as the HTTP MCP transport answers (DNS rebinding);
2. an ``Origin``, when the browser sends one, must be ``http://`` + that same Host,
   else 403 (another site's page, even one on another local port, is foreign);
3. the token, as notebook servers do: the printed URL carries ``?token=…``; a GET with
   the right token gets an ``HttpOnly; SameSite=Strict`` cookie (named for the port:
   two servers on one machine keep theirs apart) and is redirected to
   the same path without it; later requests need that cookie or the token, else 403;
4. requests that change something (POST) also need the token in the
   ``X-Localmem-Token`` header, which only the page itself can send (it is written
   into the HTML served behind the gate), compared in constant time like the others.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import CookieError, SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "localmem_ui"  # + "_PORT": browsers keep cookies per host, not per port
HEADER = "x-localmem-token"
SAFE_METHODS = ("GET", "HEAD")
# Every response: scripts, styles and fetches from this origin only, never framed, no
# Referer (the first URL carries the token).
HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


def loopback_host(host: str) -> bool:
    """``host`` (a Host header: a name and an optional port) names this machine's loopback."""
    if host.startswith("["):
        end = host.find("]")
        name, port = (host[1:end], host[end + 1 :]) if end > 0 else ("", "")
        if port and not (port.startswith(":") and port[1:].isdigit()):
            return False
    else:
        name, colon, port = host.partition(":")
        if colon and not port.isdigit():
            return False
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def port_of(host: str) -> str:
    """The port a (loopback) Host header names; 80 when it names none."""
    tail = host.rsplit("]", 1)[-1] if host.startswith("[") else host
    _, colon, port = tail.rpartition(":")
    return port if colon and port.isdigit() else "80"


class Guard:
    """ASGI middleware enforcing the checks of the module docstring."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()

    def _ok(self, value: str | bytes | None) -> bool:
        if not value:
            return False
        got = value.encode() if isinstance(value, str) else value
        return hmac.compare_digest(got, self.token)

    async def __call__(self, scope: Scope, receive: Receive, send_raw: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send_raw)
            return

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send_raw(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        host = headers.get("host", "")
        if not loopback_host(host):
            await _plain(send, 421, "Invalid Host header: this page is served on 127.0.0.1 only")
            return
        origin = headers.get("origin")
        if origin is not None and origin != f"http://{host}":
            await _plain(send, 403, "Invalid Origin header: requests from other pages are refused")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        cookie = SimpleCookie()
        try:
            cookie.load(headers.get("cookie", ""))
        except CookieError:  # a malformed Cookie header counts as none
            cookie = SimpleCookie()
        by_query = self._ok(query.get("token"))
        name = f"{COOKIE}_{port_of(host)}"
        by_cookie = name in cookie and self._ok(cookie[name].value)
        if not (by_query or by_cookie):
            await _plain(send, 403, "Missing or wrong token: open the URL `localmem ui` printed")
            return
        method = scope.get("method", "GET")
        if method not in SAFE_METHODS and not self._ok(headers.get(HEADER)):
            await _plain(send, 403, "Missing or wrong X-Localmem-Token header")
            return
        if by_query and method in SAFE_METHODS:
            rest = urlencode([(k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode()) if k != "token"])
            location = scope.get("path", "/") + (f"?{rest}" if rest else "")
            set_cookie = f"{name}={self.token.decode()}; HttpOnly; SameSite=Strict; Path=/"
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [
                        (b"location", location.encode()),
                        (b"set-cookie", set_cookie.encode()),
                        (b"cache-control", b"no-store"),
                        (b"content-length", b"0"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
