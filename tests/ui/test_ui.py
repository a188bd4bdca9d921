"""``localmem ui``: the web view against a real server on a real store, driven by a real
headless Chromium (Debian's ``chromium`` + ``chromium-driver``, through Selenium).

The store is built the way a user's is: turns written, the worker run with a scripted
model (extraction, topic labels, CABLE's queries and verdicts: the model boundary is the
one thing faked), embeddings from the HashEmbedder. The server is uvicorn on a real
loopback socket. The browser tests are skipped only when /usr/bin/chromium (or its
driver) is absent, and fail instead when ``LOCALMEM_REQUIRE_BROWSER`` is set (CI);
``LOCALMEM_UI_SHOTS=docs`` makes them save the README's screenshots there.
"""

from __future__ import annotations

import http.client
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.retrieval.reconstruct import reconstruct
from localmem.retrieval.scorer import FEATURES
from localmem.retrieval.trace import trace
from localmem.storage.write.store import Store
from localmem.ui.app import bind
from localmem.ui.security import loopback_host, port_of
from tests.helpers.fakes import HashEmbedder
from tests.helpers.ui import (
    QUESTION,
    TOKEN,
    Server,
    console_errors,
    cookie,
    count,
    login,
    shot,
    story,
    turn_id,
    until,
    wait_for,
)

# -- the trace and the views, without a browser ------------------------------------


def test_trace_is_reconstruct_plus_every_candidate(built: Settings) -> None:
    with Store(built.db, embedder=HashEmbedder(), settings=built) as s:
        for budget in (60, 150, 2000):
            t = trace(s, QUESTION, budget)
            ctx = reconstruct(s, QUESTION, budget)
            assert t.context.to_dict() == ctx.to_dict()
            placed = {e.turn_id: e.reason for e in ctx.turns}
            assert {x.turn_id: x.reason for x in t.turns if x.status in ("packed", "antecedent")} == placed
            assert len({x.turn_id for x in t.turns}) == len(t.turns)  # each turn once
            assert {x.reason for x in t.turns} <= {"anchor", "temporal", "semantic", "extracted", "antecedent"}
            ranked = [x for x in t.turns if x.rank]
            assert (
                [x.rank for x in ranked]
                == list(range(1, len(ranked) + 1))
                == list(range(1, t.context.stats["candidates"] + 1))
            )
            assert all(len(x.features) == len(FEATURES) for x in ranked)
            assert t.used_words <= t.cap_words
            tomas = next(x for x in t.turns if "friend Tomas" in x.text)
            assert tomas.status == "packed" and tomas.reason == "anchor" and tomas.rank == 1
        assert any(x.status == "not packed" for x in trace(s, QUESTION, 60).turns)
        # at 150 tokens CABLE replaces two packed turns with linked ones: both fates are shown
        t = trace(s, QUESTION, 150)
        evicted = [x for x in t.turns if x.status == "evicted"]
        linked = [x for x in t.turns if x.status == "antecedent"]
        assert evicted and linked and not {x.turn_id for x in evicted} & {e.turn_id for e in t.context.turns}
        assert all("sets up the Lisbon trip" in x.why for x in linked)


def test_loopback_hosts() -> None:
    for ok in ("127.0.0.1:8000", "localhost:1", "[::1]:80", "127.0.0.1", "localhost"):
        assert loopback_host(ok), ok
    for bad in ("evil.com:8000", "127.0.0.1.evil.com", "10.0.0.1:80", "localhost:80@evil", "[::1]x", ""):
        assert not loopback_host(bad), bad
    assert [port_of(h) for h in ("127.0.0.1:8000", "[::1]:81", "localhost", "[::1]")] == ["8000", "81", "80", "80"]


def test_token_cookie_host_and_origin(server: Server) -> None:
    assert server.request("GET", "/")[0] == 403
    assert server.request("GET", "/api/health")[0] == 403
    assert server.request("GET", "/?token=wrong")[0] == 403
    assert server.request("GET", "/static/app.js")[0] == 403
    status, headers, _ = server.request("GET", f"/?token={TOKEN}")
    assert status == 303 and headers["location"] == "/"
    set_cookie = headers["set-cookie"]
    assert set_cookie.startswith(f"localmem_ui_{server.port}={TOKEN};")
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
    assert server.request("GET", "/api/health", {"Cookie": f"localmem_ui_1={TOKEN}"})[0] == 403  # another port's
    status, headers, body = server.request("GET", "/", cookie(server))
    assert status == 200 and TOKEN.encode() in body and "default-src 'self'" in headers["content-security-policy"]
    assert server.request("GET", "/api/health", cookie(server))[0] == 200
    assert server.request("GET", "/api/health", cookie(server, "wrong"))[0] == 403
    assert server.request("GET", "/api/health", {**cookie(server), "Host": "evil.example:80"})[0] == 421
    assert server.request("GET", "/api/health", {**cookie(server), "Host": f"127.0.0.1.nip.io:{server.port}"})[0] == 421
    assert server.request("GET", "/api/health", {**cookie(server), "Origin": "http://evil.example"})[0] == 403
    assert server.request("GET", "/api/health", {**cookie(server), "Origin": "http://127.0.0.1:1"})[0] == 403
    assert server.request("GET", "/api/health", {**cookie(server), "Origin": server.base})[0] == 200


def test_forget_needs_post_and_the_token_header(server: Server, built: Settings) -> None:
    tid = turn_id(built, "balcony:1")
    body = json.dumps({"turn_id": tid}).encode()
    json_ct = {"Content-Type": "application/json"}
    assert server.request("GET", "/api/forget", cookie(server))[0] == 405
    assert server.request("POST", "/api/forget", {**cookie(server), **json_ct}, body)[0] == 403  # cookie alone
    bad_origin = {**cookie(server), **json_ct, "X-Localmem-Token": TOKEN, "Origin": "http://localhost:9"}
    assert server.request("POST", "/api/forget", bad_origin, body)[0] == 403
    assert count(built, "SELECT count(*) FROM turns WHERE id = ?", tid) == 1
    status, _, out = server.request("POST", "/api/forget", {**json_ct, "X-Localmem-Token": TOKEN}, b"{}")
    assert status == 403  # the header without the cookie or the URL token is not enough either
    status, _, out = server.request(
        "POST", "/api/forget", {**cookie(server), **json_ct, "X-Localmem-Token": TOKEN}, b"[1]"
    )
    assert status == 400 and b"JSON object" in out
    missing = json.dumps({"turn_id": 999999}).encode()
    assert server.request("POST", "/api/forget", {**cookie(server), "X-Localmem-Token": TOKEN}, missing)[0] == 404


def test_api_errors_are_json(server: Server) -> None:
    status, _, body = server.request("GET", "/api/ask?q=", cookie(server))
    assert status == 400 and json.loads(body)["error"] == "query is empty"
    status, _, body = server.request("GET", "/api/ask?q=x&budget=lots", cookie(server))
    assert status == 400 and "budget" in json.loads(body)["error"]
    status, _, body = server.request("GET", "/api/turn/999999", cookie(server))
    assert status == 404 and "999999" in json.loads(body)["error"]


def test_cli_ui_serves_with_a_token(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    exe = Path(sys.executable).with_name("localmem")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "localmem"]
    proc = subprocess.Popen(
        [*cmd, "--db", str(db), "ui", "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        url = ""
        deadline = time.monotonic() + 60
        while not url and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"no URL printed; stderr: {proc.stderr.read() if proc.stderr else ''}"
            url = line.strip() if line.startswith("http://127.0.0.1:") else ""
        m = re.fullmatch(r"http://127\.0\.0\.1:(\d+)/\?token=([\w-]{20,})", url)
        assert m, url
        port, token = int(m.group(1)), m.group(2)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/api/health")
        refused = conn.getresponse()
        assert refused.status == 403 and b"token" in refused.read()
        conn.request("GET", "/api/health", headers={"Cookie": f"localmem_ui_{port}={token}"})
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["db"] == str(db)
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_cli_ui_port_in_use_is_one_clear_line(tmp_path: Path) -> None:
    sock = bind(0)
    try:
        port = sock.getsockname()[1]
        exe = Path(sys.executable).with_name("localmem")
        proc = subprocess.run(
            [str(exe), "--db", str(tmp_path / "x.db"), "ui", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        sock.close()
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"--port {port}" in proc.stderr and proc.stderr.count("\n") == 1


# -- in the browser ------------------------------------------------------------------
def test_browser_without_the_token_is_refused(browser: Any, server: Server) -> None:
    browser.delete_all_cookies()
    browser.get(f"{server.base}/")
    assert "Missing or wrong token" in browser.find_element("css selector", "body").text
    browser.get(f"{server.base}/?token=not-the-token")
    assert "Missing or wrong token" in browser.find_element("css selector", "body").text


def test_ask_shows_the_turn_with_its_reason(browser: Any, server: Server, built: Settings, tmp_path: Path) -> None:
    login(browser, server)
    tomas = turn_id(built, "trip-plans:2")
    box = wait_for(browser, "#ask-q")
    box.clear()
    box.send_keys(QUESTION)
    budget = browser.find_element("css selector", "#ask-budget")
    budget.clear()
    budget.send_keys("150")  # too small for the whole pool: the trace shows what did not fit
    browser.find_element("css selector", "#ask-go").click()
    row = wait_for(browser, f'#trace tr[data-turn="{tomas}"]')
    assert row.get_attribute("data-reason") == "anchor" and row.get_attribute("data-status") == "packed"
    assert "anchor" in row.text and "packed" in row.text and "friend Tomas" in row.text
    context = browser.find_element("css selector", "#context-text").text
    assert f"[{tomas}] Maya: I'll go with my friend Tomas" in context
    statuses = {r.get_attribute("data-status") for r in browser.find_elements("css selector", "#trace tr.trace-row")}
    assert {"packed", "not packed"} <= statuses
    assert "budget used" in browser.find_element("css selector", "#trace-panel").text
    shot(browser, "ask", tmp_path)
    assert console_errors(browser) == []
    row.click()  # a trace row opens its turn
    until(browser, lambda d: d.current_url.endswith(f"#/turn/{tomas}"))
    wait_for(browser, "#turn-text")


def test_timeline_lists_sessions_with_topics(browser: Any, server: Server, tmp_path: Path) -> None:
    login(browser, server)
    browser.find_element("css selector", 'header nav a[data-page="timeline"]').click()
    card = wait_for(browser, 'a.session-card[data-session="trip-plans"]')
    assert "Lisbon trip" in card.text and "3 turns" in card.text
    days = [d.text.split("\n")[0] for d in browser.find_elements("css selector", "section.day")]
    assert days == sorted(days, reverse=True) and "2024-03-02" in days
    shot(browser, "timeline", tmp_path)
    assert console_errors(browser) == []
    card.click()
    turns = wait_for(browser, "#session-turns")
    assert "I booked flights to Lisbon" in turns.text and "I'll go with my friend Tomas" in turns.text


def test_turn_shows_cues_tags_and_links(browser: Any, server: Server, built: Settings, tmp_path: Path) -> None:
    login(browser, server)
    tomas = turn_id(built, "trip-plans:2")
    browser.get(f"{server.base}/#/turn/{tomas}")
    text = wait_for(browser, "#turn-text")
    marks = {m.text for m in text.find_elements("css selector", "mark")}
    assert {"Tomas", "Portuguese"} <= marks  # keyword spans highlighted in the text
    cues = browser.find_element("css selector", "#cues").text
    assert "Tomas" in cues and "friend" in cues and "Tomas speaks Portuguese" in cues
    assert "friend" in browser.find_element("css selector", "#tags").text
    assert "Tomas" in browser.find_element("css selector", "#facts").text
    # antecedent links both ways, with the verifier's reason, drawn in the graph too
    links = browser.find_element("css selector", "#links").text
    assert "antecedent" in links and "sets up the Lisbon trip" in links
    assert browser.find_elements("css selector", "svg.graph a.kind-antecedent")
    shot(browser, "turn", tmp_path)
    assert console_errors(browser) == []
    # one node per linked turn and side, however many kinds of link join them
    back = turn_id(built, "back-home:0")
    browser.get(f"{server.base}/#/turn/{back}")
    until(browser, lambda d: d.find_element("css selector", "h1").text.startswith(f"Turn #{back} "))
    nodes = until(browser, lambda d: d.find_elements("css selector", "svg.graph a"))
    hrefs = [(n.get_dom_attribute("data-turn"), n.get_dom_attribute("data-side")) for n in nodes]
    assert len(hrefs) == len(set(hrefs)) >= 3


def test_health_shows_coverage_and_jobs(browser: Any, server: Server, tmp_path: Path) -> None:
    login(browser, server)
    browser.find_element("css selector", 'header nav a[data-page="health"]').click()
    cover = wait_for(browser, "#coverage")
    n = len([t for s in story() for t in s.turns])
    assert f"{n} / {n}" in cover.text  # every turn enriched
    jobs = browser.find_element("css selector", "#jobs").text
    assert "extract" in jobs and "antecedent" in jobs and "None: no job gave up." in jobs
    assert "test-hash-64" in browser.find_element("css selector", ".cards").text
    shot(browser, "health", tmp_path)
    assert console_errors(browser) == []
