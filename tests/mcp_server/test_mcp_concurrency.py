"""The MCP server stays responsive while the local model generates: ``answer`` holds the
store lock only to reconstruct, so other tools run during generation. Through the SDK's
client on a real server, with a slow fake model (the model is the only thing faked)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from mcp import Client

from localmem.models.llm import Generation
from localmem.records import SessionIn
from localmem.storage.write.store import Store
from mcp_server import build_server

pytestmark = pytest.mark.anyio
SLEEP_S = 2.0
HOLD_S = 120.0  # a call that waited for the model would hold it this long


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SlowModel:
    """Generates for at least ``SLEEP_S`` seconds and until the test releases it (at most
    ``HOLD_S``); records when it started and finished, and whether it was released."""

    model_id = "test-slow"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.released: list[bool] = []
        self.spans: list[tuple[float, float]] = []

    def generate_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        t0 = time.monotonic()
        self.started.set()
        time.sleep(SLEEP_S)
        self.released.append(self.release.wait(HOLD_S))
        self.spans.append((t0, time.monotonic()))
        return Generation(json.dumps({"answer": "Tomatoes."}), 10, 2)


async def test_other_tools_answer_while_the_model_generates(store: Store, garden_sessions: list[SessionIn]) -> None:
    store.write_sessions(garden_sessions)
    model = SlowModel()
    latencies: list[float] = []
    answers: list[dict[str, Any]] = []
    async with Client(build_server(store, generator=model, worker=False)) as c:

        async def ask() -> None:
            res = await c.call_tool("answer", {"question": "What did Ana plant?"})
            assert not res.is_error, res.content
            assert res.structured_content is not None
            answers.append(res.structured_content)

        async def meanwhile() -> None:
            assert await anyio.to_thread.run_sync(model.started.wait, 60.0)  # the calls below run during it
            for query in ("tomatoes", "bike chain", "basil and mint"):
                t0 = time.monotonic()
                res = await c.call_tool("reconstruct", {"query": query, "budget_tokens": 200})
                latencies.append(time.monotonic() - t0)
                assert not res.is_error, res.content
            t0 = time.monotonic()
            res = await c.call_tool("remember", {"turns": [{"text": "Ana bought a watering can."}]})
            latencies.append(time.monotonic() - t0)
            assert not res.is_error, res.content
            model.release.set()  # only now may the model finish: every call above ran during generation

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            tg.start_soon(meanwhile)
    assert answers and answers[0]["answer"] == "Tomatoes."
    (start, end) = model.spans[0]
    assert end - start >= SLEEP_S
    # every call made during generation finished before the model did: the model was
    # released by the test after the last call, not by its own time-out (had a call waited
    # for the model, both would have waited HOLD_S). No wall-clock bound on the calls, so a
    # slow or busy machine cannot fail it.
    assert len(latencies) == 4 and model.released == [True], latencies
