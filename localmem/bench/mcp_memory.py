"""Resident memory of an idle MCP server on a store: the figure a desktop client's
server holds between questions.

A fresh ``python -m mcp_server --db FILE --no-worker`` is started over stdio by the MCP
SDK's own client, answers ``reconstruct`` for each query (the first loads the model and
the vector mirrors), then is left idle for ``settle_s`` seconds (the server hands freed
heap back after a second without calls). Its memory is read from ``/proc/PID/status``
of the server process, found as this process's child running ``mcp_server``.

Invariants: the server is this run's own child and is gone when the function returns;
a tool call that fails raises (a figure from a server that could not answer would be
a lie); Linux only (``/proc``), like the rest of ``bench scale``'s memory columns.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio

from localmem.bench import procmem
from localmem.bench.preamble import child_env, mcp_server_cmd


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"mcp_server" in cmd:
            out.append(int(entry.name))
    return out


def idle_server_mb(path: Path, queries: list[str], settle_s: float = 3.0) -> dict[str, Any]:
    """``mcp_idle_mb`` (resident after ``settle_s`` idle), ``mcp_peak_mb`` (its peak) and
    ``mcp_anon_mb`` (private) of a fresh MCP server that answered ``queries``."""
    return anyio.run(_measure, path, queries, settle_s)


async def _measure(path: Path, queries: list[str], settle_s: float) -> dict[str, Any]:
    # lazy: the MCP SDK takes ~0.5 s to import; `localmem --help` imports the bench package
    from mcp import Client, StdioServerParameters

    cmd = mcp_server_cmd(path)
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=child_env())
    async with Client(params, read_timeout_seconds=600) as client:
        for q in queries:
            result = await client.call_tool("reconstruct", {"query": q})
            if result.is_error:
                raise RuntimeError(f"the MCP server failed a reconstruct call: {result.content}")
        await anyio.sleep(settle_s)
        pids = _children(os.getpid())
        if len(pids) != 1:
            raise RuntimeError(f"expected one mcp_server child process, found {pids}")
        st = procmem.status_mb(pids[0])
    return {"mcp_idle_mb": int(st["VmRSS"]), "mcp_peak_mb": int(st["VmHWM"]), "mcp_anon_mb": int(st["RssAnon"])}
