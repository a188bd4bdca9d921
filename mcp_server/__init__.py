"""The MCP adapter for localmem: ``build_server(store)`` returns a server whose tools call
into ``localmem``; no SQL or model code lives here. ``serve`` runs it (stdio or HTTP).

The SDK is imported on first use of ``build_server``, so ``localmem --help`` stays fast."""

from typing import Any

__all__ = ["build_server"]


def __getattr__(name: str) -> Any:
    if name == "build_server":
        # lazy: the MCP SDK takes ~0.5 s to import
        from mcp_server.server import build_server

        return build_server
    raise AttributeError(name)
