"""The real server in subprocesses, with the real default embedder: stdio through the
SDK's stdio client, two servers writing one file at once, streamable HTTP on loopback
(Origin/Host checks, --allow-host, --allow-origin) and on every interface (bearer token,
any Host), the gate's policy, and the MCP Inspector's CLI as an independent client when
it is installed."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from mcp_server.guard import policy
from tests.helpers.servers import env, free_port, start_http

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stdio(db: Path) -> Client:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "mcp_server", "--db", str(db)], env=env(), cwd=str(ROOT)
    )
    return Client(params, read_timeout_seconds=60)


async def call(c: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    res = await c.call_tool(name, args)
    assert not res.is_error, res.content
    assert res.structured_content is not None
    return res.structured_content


async def test_stdio_subprocess_end_to_end(tmp_path: Path) -> None:
    async with stdio(tmp_path / "mem.db") as c:
        names = [t.name for t in (await c.list_tools()).tools]
        assert {"remember", "reconstruct", "forget", "search_cues", "memory_stats"} <= set(names)
        turns = [
            {"text": "I adopted a grey cat called Miso.", "speaker": "Ana", "timestamp": "2024-04-02T18:00"},
            {"text": "Miso hides under the sofa all day.", "speaker": "Ana", "timestamp": "2024-04-03T09:00"},
        ]
        out = await call(c, "remember", {"turns": turns, "session": "pets"})
        assert len(out["turn_ids"]) == 2
        ctx = await call(c, "reconstruct", {"query": "What is the name of Ana's cat?"})
        assert "Miso" in ctx["text"] and ctx["turns"]
        bad = await c.call_tool("reconstruct", {"query": "x", "as_of": "whenever"})
        assert bad.is_error
        gone = await call(c, "forget", {"session": "pets"})
        assert gone["deleted_turns"] == 2
        assert (await call(c, "memory_stats", {}))["turns"] == 0


async def test_two_servers_write_one_file_concurrently(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    calls, per_call = 12, 4

    async def writer(c: Client, who: str) -> None:
        for i in range(calls):
            turns = [{"text": f"{who} note {i}.{j}: the sky was colour {j}.", "speaker": who} for j in range(per_call)]
            await call(c, "remember", {"turns": turns, "session": f"{who}-{i}"})

    async with stdio(db) as a, stdio(db) as b:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer, a, "Ana")
            tg.start_soon(writer, b, "Ben")
        stats = await call(a, "memory_stats", {})
        assert stats["turns"] == 2 * calls * per_call
        assert stats["sessions"] == 2 * calls
        # each server sees the other's writes (its vector mirror follows the file)
        found = await call(b, "search_cues", {"text": "Ana note 3.0", "limit": 5})
        assert any("Ana note 3.0" in h["cue"]["text"] for h in found["items"])


@pytest.fixture
def stop_later() -> Iterator[list[subprocess.Popen[bytes]]]:
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def post(port: int, headers: dict[str, str]) -> int:
    """The HTTP status of an initialize request to the loopback interface with these extra
    headers (a ``host`` here replaces the one the connection would send)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest("POST", "/mcp", skip_host="host" in headers)
        body = json.dumps(INIT).encode()
        for k, v in {**HEADERS, **headers, "content-length": str(len(body))}.items():
            conn.putheader(k, v)
        conn.endheaders(body)
        return conn.getresponse().status
    finally:
        conn.close()


async def test_http_loopback_with_origin_and_host_checks(
    tmp_path: Path, stop_later: list[subprocess.Popen[bytes]]
) -> None:
    proc, port = start_http(tmp_path / "mem.db")
    stop_later.append(proc)
    url = f"http://127.0.0.1:{port}/mcp"
    async with Client(url) as c:
        out = await call(c, "remember", {"turns": [{"text": "The wifi password is on the fridge."}]})
        assert out["new_turns"] == 1
        ctx = await call(c, "reconstruct", {"query": "where is the wifi password"})
        assert "fridge" in ctx["text"]
    assert post(port, {"origin": f"http://localhost:{port}"}) == 200
    assert post(port, {"origin": f"http://127.0.0.1:{port}", "host": f"localhost:{port}"}) == 200
    assert post(port, {"origin": "http://evil.example"}) == 403
    assert post(port, {"origin": f"http://127.0.0.1:{port + 1}"}) == 403  # another local web app's page
    assert post(port, {"origin": "null"}) == 403
    assert post(port, {"host": "evil.example"}) == 421
    assert post(port, {"host": f"my-laptop.lan:{port}"}) == 421


async def test_http_allow_host_and_allow_origin(tmp_path: Path, stop_later: list[subprocess.Popen[bytes]]) -> None:
    proc, port = start_http(
        tmp_path / "mem.db", "--allow-host", "my-laptop.lan", "--allow-origin", "http://localhost:3000"
    )
    stop_later.append(proc)
    assert post(port, {"host": f"my-laptop.lan:{port}"}) == 200
    assert post(port, {"host": f"MY-LAPTOP.lan:{port}", "origin": f"http://my-laptop.lan:{port}"}) == 200
    assert post(port, {"origin": "http://localhost:3000"}) == 200
    assert post(port, {"origin": "http://localhost:3001"}) == 403
    assert post(port, {"host": "other.lan"}) == 421


async def test_http_off_loopback_needs_a_token(tmp_path: Path, stop_later: list[subprocess.Popen[bytes]]) -> None:
    args = ["--db", str(tmp_path / "mem.db"), "--transport", "http", "--host", "0.0.0.0", "--port", str(free_port())]
    refused = subprocess.run(
        [sys.executable, "-m", "mcp_server", *args],
        env={k: v for k, v in env().items() if k != "LOCALMEM_MCP_TOKEN"},
        cwd=str(ROOT),
        capture_output=True,
        timeout=60,
    )
    assert refused.returncode != 0 and b"bearer token" in refused.stderr
    proc, port = start_http(tmp_path / "mem.db", "--host", "0.0.0.0", token="s3cret")
    stop_later.append(proc)
    assert post(port, {}) == 401
    assert post(port, {"authorization": "Bearer nope"}) == 401
    assert post(port, {"authorization": "Basic s3cret"}) == 401
    assert post(port, {"authorization": "Bearer s3cret"}) == 200
    assert post(port, {"authorization": "bearer s3cret"}) == 200  # the scheme is case-insensitive
    # a remote client sends the machine's own LAN name or address as Host
    lan = {"authorization": "Bearer s3cret"}
    assert post(port, {**lan, "host": f"my-laptop.lan:{port}"}) == 200
    assert post(port, {**lan, "host": f"192.168.1.20:{port}", "origin": f"http://192.168.1.20:{port}"}) == 200
    assert post(port, {**lan, "host": f"192.168.1.20:{port}", "origin": f"http://192.168.1.20:{port + 1}"}) == 403
    assert post(port, {**lan, "host": f"my-laptop.lan:{port}", "origin": "http://evil.example"}) == 403
    http_client = httpx2.AsyncClient(headers={**lan, "host": f"my-laptop.lan:{port}"}, timeout=30)
    async with (
        http_client,
        Client(streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http_client)) as c,
    ):
        out = await call(c, "remember", {"turns": [{"text": "The spare key is under the mat."}]})
        assert out["new_turns"] == 1


def test_gate_policy() -> None:
    lan = policy("192.168.1.5", 8765, "t")
    assert lan.host_ok("192.168.1.5:8765") and not lan.host_ok("127.0.0.1:8765") and not lan.host_ok("x.lan")
    assert lan.origin_ok("http://192.168.1.5:8765", "192.168.1.5:8765")
    assert not lan.origin_ok("http://192.168.1.5:8000", "192.168.1.5:8765")
    loop = policy("127.0.0.1", 80, None, allow_origins=["https://app.example/"])
    assert loop.host_ok("[::1]:80") and loop.host_ok("LOCALHOST") and not loop.host_ok("[::2]:80")
    assert loop.origin_ok("http://localhost", "localhost") and loop.origin_ok("https://APP.example", "localhost")
    assert not loop.origin_ok("https://localhost", "localhost")  # https defaults to port 443
    assert not loop.origin_ok("file://", "localhost") and loop.token_ok("")
    v6 = policy("::", 8765, "t")
    assert v6.hosts is None and v6.host_ok("anything:1") and v6.token_ok("BEARER t") and not v6.token_ok("Bearer  ")
    assert policy("0.0.0.0", 1, None).hosts == {"0.0.0.0"}  # refused at start; never any-Host without a token


def inspector() -> str | None:
    """The Inspector's CLI: $LOCALMEM_INSPECTOR, else where .ci/run installs it
    (`npm install --prefix .ci/node @modelcontextprotocol/inspector`), else on PATH."""
    local = ROOT / ".ci" / "node" / "node_modules" / ".bin" / "mcp-inspector-cli"
    found = os.environ.get("LOCALMEM_INSPECTOR") or (
        str(local) if local.exists() else shutil.which("mcp-inspector-cli")
    )
    return found if found and Path(found).exists() else None


@pytest.mark.skipif(
    inspector() is None and not os.environ.get("CI"),
    reason="@modelcontextprotocol/inspector not installed (npm install --prefix .ci/node, or set LOCALMEM_INSPECTOR)",
)
def test_inspector_cli_as_an_independent_client(tmp_path: Path) -> None:
    """Lists the tools, remembers a turn and reconstructs it, through the Inspector's CLI
    (a client that is not ours) talking stdio to `python -m mcp_server`. In CI it must run."""
    found = inspector()
    assert found is not None, "CI must install @modelcontextprotocol/inspector into .ci/node (see .ci/run)"
    base = [found, "--cli", "-e", f"PYTHONPATH={ROOT}", sys.executable, "-m", "mcp_server"]
    base += ["--db", str(tmp_path / "mem.db")]

    def run(*args: str) -> dict[str, Any]:
        out = subprocess.run([*base, *args], capture_output=True, timeout=240, cwd=str(ROOT))
        assert out.returncode == 0, out.stderr.decode()
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    names = [t["name"] for t in run("--method", "tools/list")["tools"]]
    assert {"remember", "reconstruct", "forget", "memory_stats"} <= set(names)
    turn = {"text": "I will go to Lisbon with my friend Tomas.", "speaker": "Maya", "timestamp": "2024-05-01T10:00:00"}
    wrote = run(
        "--method", "tools/call", "--tool-name", "remember",
        "--tool-arg", f"turns={json.dumps([turn])}", "--tool-arg", "session=trip",
    )  # fmt: skip
    assert not wrote["isError"] and wrote["structuredContent"]["new_turns"] == 1
    [turn_id] = wrote["structuredContent"]["turn_ids"]
    got = run(
        "--method", "tools/call", "--tool-name", "reconstruct",
        "--tool-arg", "query=Who is going to Lisbon with Maya?", "--tool-arg", "budget_tokens=200",
    )  # fmt: skip
    ctx = got["structuredContent"]
    assert not got["isError"] and "my friend Tomas" in ctx["text"]
    assert [t["turn_id"] for t in ctx["turns"]] == [turn_id] and ctx["turns"][0]["session"] == "trip"
    again = run(
        "--method", "tools/call", "--tool-name", "remember",
        "--tool-arg", f"turns={json.dumps([turn])}", "--tool-arg", "session=trip",
    )  # fmt: skip
    assert again["structuredContent"]["new_turns"] == 0 and again["structuredContent"]["turn_ids"] == [turn_id]
