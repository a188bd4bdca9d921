"""What the web view's tests share: the story store (turns written, the worker run with a
scripted model), a uvicorn server on a loopback port, HTTP requests with any headers, and
the Selenium helpers (waits, screenshots, console errors, logging in with the token)."""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import uvicorn

from localmem.config import CableParams, RetrievalParams, Settings
from localmem.enrichment.worker import run_topics, run_worker
from localmem.models.llm import Generation
from localmem.records import SessionIn
from localmem.storage.write.store import Store
from localmem.ui.app import bind, build_app
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

    def __init__(self, settings: Settings, opener: Callable[[], Store] | None = None) -> None:
        self.settings = settings
        app = build_app(opener or (lambda: Store(settings.db, embedder=HashEmbedder(), settings=settings)), TOKEN)
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


def cookie(srv: Server, token: str = TOKEN) -> dict[str, str]:
    return {"Cookie": f"localmem_ui_{srv.port}={token}"}


def call(srv: Server, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A request as the page makes it (cookie, and on a POST the token header): status, JSON."""
    headers = {**cookie(srv), "Content-Type": "application/json"}
    if method == "POST":
        headers["X-Localmem-Token"] = TOKEN
    status, _, out = srv.request(method, path, headers, None if body is None else json.dumps(body).encode())
    return status, json.loads(out) if out else None


HOSTILE = (
    '<img src=x onerror="window.__pwned=1"> look at this',
    "<script>window.__pwned=2</script> and this",
    '"><svg onload="window.__pwned=3"> the end',
)


def lifetime(sessions: int = 130) -> list[SessionIn]:
    """Sessions over 14 months (a few a week), two or three turns each, two speakers and the
    assistant, three sources; the hostile texts in the last one."""
    out = []
    for i in range(sessions):
        month, day = 1 + (i * 14) // sessions, 1 + (i * 7) % 27
        year, month = 2023 + (month - 1) // 12, 1 + (month - 1) % 12
        lines = [
            ("Maya", f"Session {i}: the garden log, week {i}, tomatoes and basil number {i}."),
            ("assistant", f"Noted entry {i} about the garden."),
        ]
        if i % 4 == 0:
            lines.append(("Sam", f"I repaired bike wheel {i} at the shop."))
        out.append(
            session(
                f"life-{i:03d}",
                f"{year}-{month:02d}-{day:02d}T08:00:00",
                *lines,
                source=("chatgpt", "claude", "locomo:conv-7")[i % 3],
            )
        )
    out.append(session("hostile", "2024-03-05T12:00:00", *(("Mallory", t) for t in HOSTILE), source="chatgpt"))
    return out


def build_lifetime(path: Path) -> Settings:
    settings = Settings(db=path)
    with Store(path, embedder=HashEmbedder(), settings=settings) as store:
        store.write_sessions(lifetime())
    return settings


def select_text(driver: Any, css: str, text: str) -> bool:
    """Select ``text`` inside the element ``css`` as a person would with the mouse (it must
    lie in one text node)."""
    return bool(
        driver.execute_script(
            "const el = document.querySelector(arguments[0]);"
            "const w = document.createTreeWalker(el, NodeFilter.SHOW_TEXT); let n;"
            "while ((n = w.nextNode())) { const i = n.data.indexOf(arguments[1]); if (i >= 0) {"
            "  const r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + arguments[1].length);"
            "  const s = window.getSelection(); s.removeAllRanges(); s.addRange(r); return true; } }"
            "return false;",
            css,
            text,
        )
    )


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
