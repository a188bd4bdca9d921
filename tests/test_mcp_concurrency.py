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
from localmem.storage.store import Store
from mcp_server import build_server

pytestmark = pytest.mark.anyio
SLEEP_S = 2.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SlowModel:
    """Answers after ``SLEEP_S`` seconds; records when it started and finished."""

    model_id = "test-slow"

    def __init__(self) -> None:
        self.started = threading.Event()
        self.spans: list[tuple[float, float]] = []

    def generate_json(
        self, messages: Sequence[dict[str, str]], schema: dict[str, Any], *, max_tokens: int, temperature: float
    ) -> Generation:
        t0 = time.monotonic()
        self.started.set()
        time.sleep(SLEEP_S)
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
            await anyio.to_thread.run_sync(model.started.wait, 10.0)
            for query in ("tomatoes", "bike chain", "basil and mint"):
                t0 = time.monotonic()
                res = await c.call_tool("reconstruct", {"query": query, "budget_tokens": 200})
                latencies.append(time.monotonic() - t0)
                assert not res.is_error, res.content
            t0 = time.monotonic()
            res = await c.call_tool("remember", {"turns": [{"text": "Ana bought a watering can."}]})
            latencies.append(time.monotonic() - t0)
            assert not res.is_error, res.content

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            tg.start_soon(meanwhile)
    assert answers and answers[0]["answer"] == "Tomatoes."
    (start, end) = model.spans[0]
    assert end - start >= SLEEP_S
    # every call made during generation finished well before the model did
    assert len(latencies) == 4 and sum(latencies) < SLEEP_S / 2, latencies
