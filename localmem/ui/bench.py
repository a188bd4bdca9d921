"""``localmem bench ui``: the memory browser's targets measured against a store, through the
real server (the app behind its gate, uvicorn on a loopback port, HTTP from this process).

- **first page**: the Timeline as the page loads it (``/``, ``/api/facets``, ``/api/months``,
  ``/api/timeline``) and Find without words (``/api/find``), cold (the first requests of a
  fresh server, store opening included) and warm (p50 / p95 of ``repeats``);
- **search**: ``/api/find`` for ``queries`` queries made from the store's own turns (a few
  words of a random turn, and a question around them), without and with filters (a role and
  the middle third of the store's dates); the first query, which loads the embedder, is
  timed on its own and left out of the percentiles;
- **every session reachable**: the Timeline paged to its end as the page pages it (50 a page),
  every session id seen once and the months' counts adding up to the store's sessions;
- a session opened at a turn and a turn's page, p95 over a sample.

Read-only: no request writes (the forget preview is a read, and is not timed here).
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import secrets
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from localmem.config import Settings
from localmem.errors import InputError
from localmem.memory import open_store
from localmem.storage.reads import browse as reads
from localmem.ui.app import bind, build_app
from localmem.ui.security import COOKIE

PAGE = 50  # the Timeline's page, as the page asks for it
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{3,}")
_TIMING = re.compile(r"(\w+);dur=([\d.]+)")


class Client:
    """HTTP to the server as the page talks to it (the token cookie)."""

    def __init__(self, port: int, token: str) -> None:
        self.port, self.cookie = port, f"{COOKIE}_{port}={token}"
        self.view: list[float] = []  # per API response: the store thread's wall ms (Server-Timing)
        self.cpu: list[float] = []  # and its CPU ms

    def get(self, path: str) -> tuple[float, Any]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            t0 = time.perf_counter()
            conn.request("GET", path, headers={"Cookie": self.cookie})
            resp = conn.getresponse()
            body = resp.read()
            ms = 1000 * (time.perf_counter() - t0)
        finally:
            conn.close()
        if resp.status != 200:
            raise InputError(f"GET {path}: HTTP {resp.status}: {body[:200]!r}")
        timing = dict(_TIMING.findall(resp.getheader("server-timing") or ""))
        if timing:
            self.view.append(float(timing["view"]))
            self.cpu.append(float(timing["cpu"]))
        return ms, json.loads(body) if path.startswith("/api/") else None

    def searches(self, paths: list[str]) -> dict[str, Any]:
        """Each path's time end to end, with the store thread's wall and CPU time of each."""
        self.view, self.cpu = [], []
        ms = [self.get(p)[0] for p in paths]
        return {**_stats(ms), "view": _stats(self.view), "cpu": _stats(self.cpu)}

    def time(self, *paths: str) -> float:
        return sum(self.get(p)[0] for p in paths)


def _stats(ms: list[float]) -> dict[str, float]:
    s = sorted(ms)
    return {
        "n": len(s),
        "p50_ms": round(statistics.median(s), 1),
        "p95_ms": round(s[min(len(s) - 1, int(0.95 * len(s)))], 1),
        "max_ms": round(s[-1], 1),
    }


def _queries(settings: Settings, n: int, seed: int) -> tuple[list[str], dict[str, str], list[int]]:
    """``n`` queries from random turns (every other one a question), a filter over the middle
    third of the store's dates with the most common role, and a sample of turn ids."""
    rng = random.Random(seed)
    with open_store(settings) as store:
        ids = reads.turn_ids(store.conn, {})
        if not ids:
            raise InputError(f"{settings.db} holds no turns to measure")
        picked = rng.sample(ids, min(len(ids), 4 * n))
        rows = reads.turn_rows(store.conn, picked)
        dated = sorted(r.ts for r in rows.values() if r.ts)
        roles = reads.facets(store.conn, 5).roles
    out: list[str] = []
    for tid in picked:
        words = _WORD.findall(rows[tid].text)
        if len(words) < 3:
            continue
        at = rng.randrange(0, len(words) - 2)
        some = " ".join(words[at : at + rng.choice((2, 3))])
        out.append(some if len(out) % 2 == 0 else f"what did we say about {some}?")
        if len(out) == n:
            break
    flt = {"role": roles[0][0]} if roles else {}
    if dated:
        flt |= {"start": dated[len(dated) // 3][:10], "end": dated[2 * len(dated) // 3][:10]}
    return out, flt, picked[:n]


def run(
    settings: Settings, queries: int = 100, repeats: int = 20, seed: int = 7, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Serve ``settings.db`` and measure (see the module docstring)."""
    import uvicorn  # the web view's server: imported only when it runs, as `localmem ui` does

    load_before = os.getloadavg()[0]
    qs, flt, sample = _queries(settings, queries, seed)
    token = secrets.token_urlsafe(24)
    app = build_app(lambda: open_store(settings), token)
    sock = bind(0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    c = Client(int(sock.getsockname()[1]), token)
    timeline = ("/", "/api/facets", "/api/months", f"/api/timeline?limit={PAGE}")
    try:
        cold = c.time(*timeline)
        cold_find = c.time("/api/find")
        warm = [c.time(*timeline) for _ in range(repeats)]
        warm_find = [c.time("/api/find") for _ in range(repeats)]
        log(f"first page: cold {cold:.0f} ms, warm p95 {_stats(warm)['p95_ms']} ms")
        first_search = c.get("/api/find?" + urlencode({"q": qs[0]}))[0]
        plain = c.searches(["/api/find?" + urlencode({"q": q}) for q in qs])
        filtered = c.searches(["/api/find?" + urlencode({"q": q, **flt}) for q in qs])
        later = c.searches(["/api/find?" + urlencode({"q": q, "page": 4}) for q in qs[: max(1, len(qs) // 4)]])
        log(f"search: p95 {plain['p95_ms']} ms, filtered p95 {filtered['p95_ms']} ms")
        walk = _walk(c)
        log(f"timeline walk: {walk['seen']} of {walk['sessions']} sessions in {walk['pages']} pages")
        session_ms, turn_ms = [], []
        for tid in sample[: min(len(sample), 50)]:
            ms, t = c.get(f"/api/turn/{tid}")
            turn_ms.append(ms)
            session_ms.append(c.get(f"/api/session/{t['session_id']}?turn={tid}")[0])
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()
    return {
        "benchmark": "ui",
        "db": str(settings.db),
        "cpus": os.cpu_count(),
        "load_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "turns": walk["turns"],
        "sessions": walk["sessions"],
        "first_page": {
            "cold_ms": round(cold, 1),
            "warm": _stats(warm),
            "find_cold_ms": round(cold_find, 1),
            "find_warm": _stats(warm_find),
        },
        "search": {
            "first_ms": round(first_search, 1),
            "plain": plain,
            "filtered": filtered,
            "filter": flt,
            "page_5": later,
        },
        "reachable": walk,
        "session_at_turn": _stats(session_ms),
        "turn_page": _stats(turn_ms),
    }


def _walk(c: Client) -> dict[str, Any]:
    """The Timeline paged to its end: every session once, months adding up."""
    t0 = time.perf_counter()
    seen: list[int] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        _ms, t = c.get(f"/api/timeline?limit={PAGE}&offset={offset}")
        seen += [s["session_id"] for d in t["days"] for s in d["sessions"]]
        offset, total, pages = t["next"], t["total"], pages + 1
    _ms, m = c.get("/api/months")
    firsts_ok = all(
        (c.get(f"/api/timeline?limit=1&offset={x['offset']}")[1]["days"][0]["day"][:7] == x["month"][:7])
        for x in m["months"]
    )
    return {
        "sessions": total,
        "turns": m["turns"],
        "seen": len(seen),
        "distinct": len(set(seen)),
        "all_reached": len(seen) == len(set(seen)) == total == m["sessions"],
        "month_offsets_ok": firsts_ok,
        "months": len(m["months"]),
        "pages": pages,
        "walk_s": round(time.perf_counter() - t0, 2),
    }


def _three(x: dict[str, Any]) -> str:
    return f"{x['p50_ms']} / {x['p95_ms']} / {x['max_ms']} ms"


def _inner(x: dict[str, Any]) -> str:
    v, c = x["view"], x["cpu"]
    return f"{v['p50_ms']} / {v['p95_ms']} ms, {c['p50_ms']} / {c['p95_ms']} ms"


def table(r: dict[str, Any]) -> str:
    """The result as a markdown table."""
    fp, s, w = r["first_page"], r["search"], r["reachable"]
    rows = [
        ("store", f"{r['turns']:,} turns, {r['sessions']:,} sessions ({r['db']})"),
        (
            "machine: CPUs, 1-minute load average before / after",
            f"{r['cpus']}, {r['load_1min'][0]} / {r['load_1min'][1]}",
        ),
        ("first page, Timeline (/, facets, months, timeline): cold", f"{fp['cold_ms']} ms"),
        ("first page, Timeline: warm p50 / p95", f"{fp['warm']['p50_ms']} / {fp['warm']['p95_ms']} ms"),
        ("Find without words: cold / warm p95", f"{fp['find_cold_ms']} / {fp['find_warm']['p95_ms']} ms"),
        ("search, first query (loads the embedder)", f"{s['first_ms']} ms"),
        (f"search p50 / p95 / max ({s['plain']['n']} queries)", _three(s["plain"])),
        ("  of which the store's thread: wall p50 / p95, CPU p50 / p95", _inner(s["plain"])),
        (f"search with filters {s['filter']} p50 / p95 / max", _three(s["filtered"])),
        ("  of which the store's thread: wall p50 / p95, CPU p50 / p95", _inner(s["filtered"])),
        ("search, page 5, p50 / p95 / max", _three(s["page_5"])),
        (
            "every session reachable (Timeline paged to its end)",
            f"{'yes' if w['all_reached'] else 'NO'}: {w['distinct']:,} of {w['sessions']:,} in {w['pages']} pages, {w['walk_s']} s",
        ),
        (
            "months: each offset opens at its month",
            f"{'yes' if w['month_offsets_ok'] else 'NO'} ({w['months']} months)",
        ),
        ("a session opened at a turn, p95", f"{r['session_at_turn']['p95_ms']} ms"),
        ("a turn's page, p95", f"{r['turn_page']['p95_ms']} ms"),
    ]
    return "\n".join(["| measure | value |", "|---|---|", *(f"| {a} | {b} |" for a, b in rows)])
