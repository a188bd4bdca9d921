"""The traversal tools (MRAgent-style) as MCP tools: the client's model walks the memory
step by step (cues -> tags -> turns -> context, time, people, topics). Each tool is one
entry of the toolkit's catalog (:data:`localmem.toolkit.catalog.TOOLS`, the list the
explore loop reads too); this module declares none: it turns an entry into a function
the SDK can register. Every list is paged and capped by the toolkit; results are the
toolkit's records (typed, so each tool's output schema names its fields).

Invariants:
- a tool's parameters, their types, limits, defaults and descriptions are the catalog
  entry's arguments (:func:`mcp_server.args.annotation`), in its order;
- a result is the toolkit's record inside a :class:`~mcp_server.outputs.Page` when the
  entry is paged, or the model of :data:`OUTPUTS` for a plain dict (one turn in full).
"""

import inspect
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from localmem.toolkit import catalog
from mcp_server.args import Ctx, annotation, state
from mcp_server.outputs import FullTurn, Page

OUTPUTS: dict[str, type[BaseModel]] = {"get_turn": FullTurn}  # entries whose toolkit function returns a dict


def as_function(spec: catalog.ToolSpec) -> Callable[..., Any]:
    """An async function named after the entry, whose signature is the entry's arguments
    (with the SDK's context), returning its typed result."""
    model = OUTPUTS.get(spec.name)
    result: Any = Page[spec.result] if spec.paged else (model or spec.result)  # type: ignore[name-defined]

    async def tool(ctx: Ctx, **kwargs: Any) -> Any:
        st = state(ctx)
        out = await st.call(spec.call, st.store, **kwargs)
        if spec.paged:
            return result.of(out)
        return model.model_validate(out) if model is not None else out

    params = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Ctx)]
    for arg in spec.args:
        default = inspect.Parameter.empty if arg.required else arg.default
        params.append(
            inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation(arg))
        )
    tool.__name__ = tool.__qualname__ = spec.name
    tool.__signature__ = inspect.Signature(params, return_annotation=result)  # type: ignore[attr-defined]
    tool.__annotations__ = {p.name: p.annotation for p in params} | {"return": result}
    return tool


TOOLS: list[tuple[Callable[..., Any], str]] = [(as_function(spec), spec.description) for spec in catalog.TOOLS]
