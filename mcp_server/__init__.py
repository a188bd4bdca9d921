"""The MCP adapter for localmem (filled by the MCP server issue): ``build_server(store)``
returns a server whose tools call into ``localmem``; no SQL or model code lives here."""
