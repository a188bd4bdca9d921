"""What every MCP tool module shares: the context type, the lifespan state accessor, the
argument types with their documented limits (:func:`annotation` turns a toolkit catalog
argument into one), and the check each call's arguments pass before a tool runs
(:class:`CheckedTool`).

Invariants:
- every limit a client can hit is a constant here (or a setting) and is stated in the
  argument's schema, so the client's model can read it before it calls;
- a bad argument is a tool error of one or a few short lines naming the argument
  (``turns[3].text: ...``), never a validation dump with URLs or the rejected value;
- strings SQLite or a reader cannot hold faithfully (a NUL character, a lone UTF-16
  surrogate) are refused before anything runs, so nothing is half stored;
- an argument the tool does not have is an error, not silently ignored.
"""

# No ``from __future__ import annotations``: the SDK reads these annotations at
# registration to build schemas and to find the Context parameter.

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import Field, ValidationError

from localmem.toolkit import catalog
from localmem.toolkit.catalog import MAX_ID as MAX_ID  # the catalog's limits, for the other tools too
from localmem.toolkit.catalog import MAX_LABEL_CHARS as MAX_LABEL_CHARS
from mcp_server.state import AppState

Ctx = Context[AppState, Any]

MAX_TURNS_PER_CALL = 500  # turns in one remember call
MAX_CHARS_PER_CALL = 1_000_000  # characters of text in one remember call, all turns together
MAX_QUERY_CHARS = 2000
ERRORS_SHOWN = 3


def annotation(arg: catalog.Arg) -> Any:
    """The type a tool parameter declares for ``arg``: its kind (null allowed when it is
    optional without a default), with its limits and description as the schema states them."""
    base: Any
    if arg.choices is not None:
        base = Literal[arg.choices]
    elif arg.kind == "strs":
        base = list[Annotated[str, Field(max_length=arg.item_max_length)]]
    else:
        base = int if arg.kind == "int" else str
    limits: dict[str, Any] = {"ge": arg.ge, "le": arg.le, "min_length": arg.min_length, "max_length": arg.max_length}
    meta = Field(description=arg.doc, **{k: v for k, v in limits.items() if v is not None})
    return Annotated[base | None if arg.nullable else base, meta]


Scope = annotation(catalog.SCOPE)
ProjectArg = annotation(catalog.PROJECT)
When = annotation(catalog.when("as_of"))


def state(ctx: Ctx) -> AppState:
    return ctx.request_context.lifespan_context


def where(loc: tuple[int | str, ...]) -> str:
    """A validation error's location as a path: ``turns[3].text``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "arguments"


def brief(exc: ValidationError) -> str:
    """A validation error in a few short lines: where and what, never the value or a URL."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    lines = [f"{where(e['loc'])}: {e['msg']}" for e in errors[:ERRORS_SHOWN]]
    if len(errors) > ERRORS_SHOWN:
        lines.append(f"(and {len(errors) - ERRORS_SHOWN} more problems)")
    return "; ".join(lines)


def unstorable(value: Any, path: str = "") -> str | None:
    """The first string inside ``value`` that cannot be stored as it is, as an error."""
    if isinstance(value, str):
        if "\x00" in value:
            return f"{path or 'argument'}: contains a NUL character"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{path or 'argument'}: is not valid Unicode (a lone surrogate)"
        return None
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        key_problem = unstorable(key, path) if isinstance(key, str) else None
        if key_problem:
            return key_problem
        sub = f"{path}[{key}]" if isinstance(key, int) else (f"{path}.{key}" if path else str(key))
        problem = unstorable(item, sub)
        if problem:
            return problem
    return None


class CheckedTool(Tool):
    """A tool whose arguments are checked as this module says before the SDK validates
    and runs it; validation errors come back short."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        known = [f.alias or name for name, f in self.fn_metadata.arg_model.model_fields.items()]
        unknown = sorted(set(arguments) - set(known))
        problem = (
            f"unknown argument(s) {', '.join(map(repr, unknown))}; this tool takes {', '.join(known) or 'none'}"
            if unknown
            else unstorable(arguments)
        )
        if problem:
            raise ToolError(f"Error executing tool {self.name}: {problem}")
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {self.name}: {brief(exc.__cause__)}") from None
