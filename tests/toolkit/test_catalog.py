"""The traversal tools are declared once (``localmem.toolkit.catalog``): the MCP server and
the explore loop both offer exactly the catalog's tools, in its order, with its names,
descriptions and arguments, and each one runs the catalog's binding to the toolkit."""

from __future__ import annotations

import inspect

import pytest

from localmem import toolkit
from localmem.answering.explore import TOOLS as LOCAL_TOOLS
from localmem.answering.explore import tool_list
from localmem.config import Settings
from localmem.errors import InputError
from localmem.records import SessionIn
from localmem.storage.write.store import Store
from localmem.toolkit import catalog
from mcp_server import traversal
from mcp_server.tools import build


def test_both_surfaces_offer_the_catalog_and_nothing_else() -> None:
    mcp = [(fn.__name__, description) for fn, description in build(Settings(), answering=False)]
    names = [fn.__name__ for fn, _ in traversal.TOOLS]
    assert names == [spec.name for spec in catalog.TOOLS]
    assert [m for m in mcp if m[0] in names] == [(spec.name, spec.description) for spec in catalog.TOOLS]
    assert list(LOCAL_TOOLS) == [spec.local.name or spec.name for spec in catalog.TOOLS]
    lines = tool_list().splitlines()
    for spec, line in zip(catalog.TOOLS, lines, strict=True):
        local = LOCAL_TOOLS[spec.local.name or spec.name]
        assert local.spec is spec and line.endswith(f": {spec.local.brief}")
        assert list(local.params) == list(spec.local.args)


def test_mcp_parameters_are_the_catalog_arguments() -> None:
    for fn, _ in traversal.TOOLS:
        spec = next(s for s in catalog.TOOLS if s.name == fn.__name__)
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "ctx"]
        assert [p.name for p in params] == [a.name for a in spec.args]
        for p, a in zip(params, spec.args, strict=True):
            assert (p.default is inspect.Parameter.empty) == a.required
            assert a.required or p.default == a.default


def test_every_argument_is_a_parameter_of_the_toolkit_function() -> None:
    for spec in catalog.TOOLS:
        takes = set(inspect.signature(spec.fn).parameters)
        pair = set(spec.text_or_id or ())
        assert {a.name for a in spec.args} - pair <= takes, spec.name
        assert set(spec.local.args) | set(spec.local.fixed) <= {a.name for a in spec.args}, spec.name


def test_a_thing_named_by_text_or_id_takes_exactly_one(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    spec = next(s for s in catalog.TOOLS if s.name == "cue_turns")
    hit = toolkit.search_cues(store, "bike chain").items[0].cue
    by_text = spec.call(store, cue=hit.text, cue_id=None)
    assert by_text.items and by_text == spec.call(store, cue_id=hit.cue_id)
    assert hit.turn_id in [t.turn_id for t in by_text.items]
    for bad in ({}, {"cue": "bike", "cue_id": 1}, {"cue": None, "cue_id": None}):
        with pytest.raises(InputError, match="exactly one of cue"):
            spec.call(store, **bad)
    assert LOCAL_TOOLS["cue_turns"].params["cue"].required  # the local model gets only the text
