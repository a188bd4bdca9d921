"""The MCP adapter for localmem: ``build_server(store)`` returns a server whose tools call
into ``localmem``; no SQL or model code lives here. ``serve`` runs it (stdio or HTTP)."""

from mcp_server.server import build_server

__all__ = ["build_server"]
