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
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from localmem.config import CableParams, RetrievalParams, Settings
from localmem.enrichment.worker import run_topics, run_worker
from localmem.models.llm import Generation
from localmem.retrieval.reconstruct import reconstruct
from localmem.retrieval.scorer import FEATURES
from localmem.retrieval.trace import trace
from localmem.storage.write.store import Store
from localmem.ui.app import bind, build_app
from localmem.ui.security import loopback_host, port_of
from tests.helpers.fakes import HashEmbedder, session

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
TOKEN = "test-token-0123456789abcdef"
TOPICS = [("Lisbon", "Lisbon trip"), ("bike", "Bike repairs"), ("basil", "Balcony garden"), ("report", "Work deadline")]
QUESTION = "Who is going to Lisbon with Maya?"
TAGS = {"Lisbon": "travel", "Tomas": "friend", "Portuguese": "identity", "Alfama": "place", "Belem": "place"}


def story() -> list[Any]:
    return [
        session(
            "trip-plans",
            "2024-03-02T19:00:00",
            ("Maya", "I booked flights to Lisbon for the second week of May."),
            ("Sam", "Exciting! Who is going with you?"),
            ("Maya", "I'll go with my friend Tomas, he speaks Portuguese."),
        ),
        session(
            "apartment",
            "2024-03-20T12:30:00",
            ("Maya", "Tomas found a small apartment in Alfama for our Lisbon trip."),
            ("Sam", "Alfama in Lisbon has lovely views, and the tram passes by."),
            ("Maya", "We also want to take the old tram out to Belem."),
        ),
        session(
            "balcony",
            "2024-04-11T08:15:00",
            ("Sam", "I planted tomatoes and basil on the balcony this weekend."),
            ("Maya", "Water the basil every morning once it gets warm."),
            ("Sam", "The tomatoes already have little yellow flowers."),
        ),
        session(
            "bike",
            "2024-04-28T17:40:00",
            ("Sam", "My bike chain snapped on the way to work this morning."),
            ("Maya", "Did you fix the chain yourself or take the bike to the shop?"),
            ("Sam", "I took it to the repair shop on Main Street, they fixed it in an hour."),
        ),
        session(
            "deadline",
            "2024-05-06T10:05:00",
            ("Maya", "My manager moved the report deadline to Friday, so I am working late."),
            ("Sam", "Ugh, does that clash with anything?"),
            ("Maya", "No, I finish the report before I leave, the office closes for a week anyway."),
        ),
        session(
            "bike-again",
            "2024-05-14T18:20:00",
            ("Sam", "The bike chain snapped again on my way to work."),
            ("Maya", "Take the bike back to the repair shop on Main Street?"),
            ("Sam", "Yes, the repair shop on Main Street fixed the chain again, for free."),
        ),
        session(
            "back-home",
            "2024-05-20T21:00:00",
            ("Maya", "Back home! The pastries in Belem were the best part of Lisbon."),
            ("Sam", "Did Tomas enjoy the Lisbon trip as much as you did?"),
            ("Maya", "Tomas loved the tram rides in Lisbon and wants to go back next year."),
        ),
    ]


class StoryModel:
    """The worker's model for this story: keywords (capitalised words, tagged),
    one triple and one fact where the text states them, topic labels by content, and
    CABLE links between turns about Lisbon, with a readable verifier's reason."""

    model_id = "test-story"

    def generate_json(self, messages: Sequence[dict[str, str]], schema: dict[str, Any], **kw: Any) -> Generation:
        user = messages[-1]["content"]
        props = schema.get("properties", {})
        if "m1" in props:
            reply: dict[str, Any] = {}
            for i, _who, text in re.findall(r"^m(\d+)\. ([^:]*): (.*)$", user, flags=re.MULTILINE):
                words = [w.strip(".,!?") for w in text.split()[1:]]
                caps = [w for w in words if w[:1].isupper() and w != "I"]
                entry: dict[str, Any] = {"type": "plan" if "want" in text or "booked" in text else "event"}
                entry["keywords"] = [{"k": c, "tag": TAGS.get(c, "thing")} for c in caps]
                entry["triples"] = [{"s": "Tomas", "r": "speaks", "o": "Portuguese"}] if "speaks" in text else []
                entry["facts"] = (
                    [{"person": "Tomas", "aspect": "identity", "value": "Portuguese"}] if "Portuguese" in text else []
                )
                reply[f"m{i}"] = entry
        elif "label" in props:
            topic = next((t for w, t in TOPICS if w in user), "Small talk")
            reply = {"label": topic, "summary": f"Maya and Sam talk about {topic.lower()}."}
        elif "CURRENT turn:" in user:
            current = user.split("CURRENT turn:\n", 1)[1].split("\n", 1)[0]
            earlier = re.findall(r"^h(\d+)\. (.*)$", user, flags=re.MULTILINE)
            ok = "Lisbon" in current or "Tomas" in current
            reply = {
                f"h{i}": {
                    "valid": ok and ("Lisbon" in t or "Tomas" in t),
                    "confidence": 0.8,
                    "reason": "The earlier turn sets up the Lisbon trip this turn refers to.",
                }
                for i, t in earlier
            }
        else:
            reply = {"queries": ["Lisbon trip with Tomas"]}
        text = json.dumps(reply)
        return Generation(text, len(user.split()), len(text.split()))


def build_store(path: Path) -> Settings:
    """The story written, extracted, linked (CABLE on) and grouped into topics and themes."""
    # few anchors per list and semantic expansion on: a pool with every kind of reason
    retrieval = RetrievalParams(candidates=3, semantic_seeds=2)
    settings = Settings(db=path, cable=CableParams(enabled=True, kb=1), retrieval=retrieval)
    with Store(path, embedder=HashEmbedder(), settings=settings) as store:
        store.write_sessions(story())
        run_worker(store, StoryModel(), until_empty=True)  # type: ignore[arg-type]
        run_topics(store, StoryModel())  # type: ignore[arg-type]
    return settings


class Server:
    """uvicorn serving the web view in a thread on a free loopback port."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        app = build_app(lambda: Store(settings.db, embedder=HashEmbedder(), settings=settings), TOKEN)
        self.sock = bind(0)
        self.port = int(self.sock.getsockname()[1])
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.05)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None, body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.putrequest(method, path, skip_host=True)
            hdrs = {"Host": f"127.0.0.1:{self.port}", **(headers or {})}
            if body is not None:
                hdrs["Content-Length"] = str(len(body))
            for k, v in hdrs.items():
                conn.putheader(k, v)
            conn.endheaders(body)
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()


def turn_id(settings: Settings, source_id: str) -> int:
    with Store(settings.db, embedder=HashEmbedder(), settings=settings) as s:
        return int(s.conn.execute("SELECT id FROM turns WHERE source_id = ?", (source_id,)).fetchone()[0])


def count(settings: Settings, sql: str, *args: Any) -> int:
    with Store(settings.db, embedder=HashEmbedder(), settings=settings) as s:
        return int(s.conn.execute(sql, args).fetchone()[0])


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_store(tmp_path_factory.mktemp("ui") / "mem.db")


@pytest.fixture(scope="module")
def server(built: Settings) -> Iterator[Server]:
    srv = Server(built)
    yield srv
    srv.stop()


def cookie(srv: Server, token: str = TOKEN) -> dict[str, str]:
    return {"Cookie": f"localmem_ui_{srv.port}={token}"}


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

NO_BROWSER = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        if os.environ.get("LOCALMEM_REQUIRE_BROWSER"):  # CI: a missing browser is a failure, not a skip
            pytest.fail(f"LOCALMEM_REQUIRE_BROWSER is set but {CHROMIUM} or {CHROMEDRIVER} is absent: {NO_BROWSER}")
        pytest.skip(NO_BROWSER)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--force-device-scale-factor=1",
        "--window-size=1440,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console errors, CSP violations
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def wait_for(driver: Any, css: str, timeout: float = 30) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def until(driver: Any, check: Any, timeout: float = 30) -> Any:
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    # the page re-renders as it goes: an element that vanished under the check is retried
    ignored = (NoSuchElementException, StaleElementReferenceException)
    return WebDriverWait(driver, timeout, ignored_exceptions=ignored).until(lambda d: check(d))


def shot(driver: Any, name: str, tmp_path: Path) -> Path:
    """A screenshot of the whole page (the window grown to its height), into tmp_path and,
    when ``LOCALMEM_UI_SHOTS`` names a folder (``docs``), there too."""
    height, chrome = driver.execute_script(
        "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]"
    )
    driver.set_window_size(1440, max(900, min(int(height) + int(chrome), 2400)))
    path = tmp_path / f"ui-{name}.png"
    assert driver.save_screenshot(str(path)) and path.stat().st_size > 10_000
    if dest := os.environ.get("LOCALMEM_UI_SHOTS"):
        Path(dest).mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, Path(dest) / path.name)
    driver.set_window_size(1440, 900)
    return path


def console_errors(driver: Any) -> list[str]:
    """Script errors and Content-Security-Policy violations logged since the last call
    (a refused request's own "Failed to load resource" line is the server's answer)."""
    return [
        e["message"]
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]
    ]


def login(driver: Any, srv: Server) -> None:
    driver.get(f"{srv.base}/?token={TOKEN}")
    wait_for(driver, "#ask-q")
    assert "token" not in driver.current_url  # the redirect dropped it; the cookie carries it


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


def test_forget_asks_first(browser: Any, tmp_path: Path) -> None:
    settings = build_store(tmp_path / "forget.db")
    srv = Server(settings)
    try:
        login(browser, srv)
        target = turn_id(settings, "balcony:1")
        sessions = "SELECT count(*) FROM sessions WHERE key = 'balcony'"
        browser.get(f"{srv.base}/#/turn/{target}")
        wait_for(browser, "#forget-turn").click()
        wait_for(browser, "#confirm")
        assert f"#{target}" in browser.find_element("css selector", "#confirm-text").text
        browser.find_element("css selector", "#confirm-cancel").click()
        until(browser, lambda d: not d.find_element("css selector", "#confirm").is_displayed())
        assert count(settings, "SELECT count(*) FROM turns WHERE id = ?", target) == 1
        assert browser.current_url.endswith(f"#/turn/{target}")

        browser.find_element("css selector", "#forget-turn").click()
        wait_for(browser, "#confirm-ok").click()
        until(browser, lambda d: "#/session/" in d.current_url)
        wait_for(browser, "#session-turns")
        assert count(settings, "SELECT count(*) FROM turns WHERE id = ?", target) == 0
        assert count(settings, "SELECT count(*) FROM cues WHERE turn_id = ?", target) == 0
        assert not browser.find_elements("css selector", f'#session-turns [data-turn="{target}"]')

        browser.find_element("css selector", "#forget-session").click()
        wait_for(browser, "#confirm-cancel").click()
        assert count(settings, sessions) == 1
        browser.find_element("css selector", "#forget-session").click()
        wait_for(browser, "#confirm-ok").click()
        wait_for(browser, 'a.session-card[data-session="trip-plans"]')
        assert count(settings, sessions) == 0
        assert not browser.find_elements("css selector", 'a.session-card[data-session="balcony"]')
    finally:
        srv.stop()
