"""What every MCP tool module shares: the context type, the lifespan state accessor and
the argument types (paging, turn ids, scope, times)."""

# No ``from __future__ import annotations``: the SDK reads these annotations at
# registration to build schemas and to find the Context parameter.

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from localmem import toolkit
from mcp_server.state import AppState

Ctx = Context[AppState, Any]
Limit = Annotated[int, Field(ge=1, le=toolkit.MAX_LIMIT, description=f"page size (at most {toolkit.MAX_LIMIT})")]
Offset = Annotated[int, Field(ge=0, le=toolkit.MAX_OFFSET, description="items to skip (the previous next_offset)")]
TurnId = Annotated[int, Field(ge=1, description="a turn id from an earlier result")]
Scope = Annotated[str | None, Field(description="only this session key or source (e.g. 'mcp')")]
When = Annotated[str | None, Field(description="ISO 8601 date or time, e.g. 2024-05-01 or 2024-05-01T14:30")]


def _state(ctx: Ctx) -> AppState:
    return ctx.request_context.lifespan_context
