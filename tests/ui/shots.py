"""docs/ui.md's screenshots of the memory browser, taken on a real store (the merged dev60
bench store: 29k turns) in Debian's headless Chromium:

    .venv/bin/python -m tests.ui.shots --db STORE --out docs

First it makes real recall-log rows to show: ``localmem query`` (client ``cli``) and MCP
``reconstruct`` over stdio (``localmem serve``; client ``mcp:localmem-shots``), with the
questions below. Then it serves the store with the web view's app and visits each page.
Nothing is forgotten or redacted: the forget and redact dialogs are opened, shot and
cancelled. Selenium is a test dependency, so this lives with the browser tests.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.memory import open_store
from tests.helpers.ui import TOKEN, Server, select_text, until, wait_for

QUESTIONS = (
    "How much RAM did I upgrade my laptop to?",
    "What is the name of the playlist I created on Spotify?",
    "How much did I save on the Jimmy Choo heels?",
)
SEARCH = "laptop RAM upgrade"
WIDTH, HEIGHT = 1440, 1000


def recall_rows(db: Path) -> None:
    for q in QUESTIONS[:2]:
        subprocess.run([sys.executable, "-m", "localmem", "--db", str(db), "query", q], check=True, capture_output=True)

    async def mcp() -> None:
        from mcp import Client, StdioServerParameters
        from mcp.types import Implementation

        params = StdioServerParameters(command=sys.executable, args=["-m", "localmem", "--db", str(db), "serve"])
        async with Client(params, client_info=Implementation(name="localmem-shots", version="1")) as c:
            for q in QUESTIONS:
                await c.call_tool("reconstruct", {"query": q, "budget_tokens": 1200})

    asyncio.run(mcp())


def driver() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--force-device-scale-factor=1",
    ):
        opts.add_argument(flag)
    opts.add_argument(f"--window-size={WIDTH},{HEIGHT}")
    d = webdriver.Chrome(options=opts, service=Service(executable_path="/usr/bin/chromedriver"))
    d.set_page_load_timeout(120)
    return d


def save(d: Any, out: Path, name: str, *, whole: bool = False) -> None:
    """The window (``whole``: the page, up to 2,400 px high) as ``out/ui-NAME.png``."""
    d.execute_script("document.getElementById('toast').hidden = true")
    if whole:
        height = d.execute_script("return document.documentElement.scrollHeight")
        d.set_window_size(WIDTH, min(2400, int(height) + 150))
    time.sleep(0.4)  # fonts and the last paint
    path = out / f"ui-{name}.png"
    d.save_screenshot(str(path))
    if whole:
        d.set_window_size(WIDTH, HEIGHT)
    print(f"{path}: {path.stat().st_size // 1024} KB", file=sys.stderr)


def shoot(db: Path, out: Path) -> None:
    settings = Settings(db=db)
    srv = Server(settings, opener=lambda: open_store(settings))
    d = driver()
    try:
        d.get(f"{srv.base}/?token={TOKEN}")
        wait_for(d, "#ask-q", 120)
        d.get(f"{srv.base}/#/find?q={SEARCH.replace(' ', '%20')}")
        wait_for(d, "#results .result", 120)
        save(d, out, "find")
        first = d.find_element("css selector", "#results .result")
        first.find_element("css selector", "a.result-text").click()
        wait_for(d, "#session-turns .turn.focus", 60)
        save(d, out, "session")
        d.get(f"{srv.base}/#/timeline")
        wait_for(d, "#months a[data-month]", 60)
        save(d, out, "timeline")
        d.get(f"{srv.base}/#/injected")
        rows = wait_for(d, "#calls tr.call-row", 60)
        save(d, out, "injected")
        rows.click()
        handed = wait_for(d, "#handed tbody tr", 60)
        save(d, out, "injected-call")
        tid = int(handed.get_attribute("data-turn"))  # a turn a client was handed: it has a recall history
        d.get(f"{srv.base}/#/turn/{tid}")
        wait_for(d, "#recalls", 60)
        save(d, out, "turn", whole=True)
        d.find_element("css selector", "#forget-turn").click()
        wait_for(d, "#preview-counts", 60)
        save(d, out, "forget")
        d.find_element("css selector", "#forget-cancel").click()
        until(d, lambda x: not x.find_element("css selector", "#forget-dialog").is_displayed())
        words = d.find_element("css selector", "#turn-text").text.split()
        assert select_text(d, "#turn-text", " ".join(words[2:5]))
        d.find_element("css selector", "#redact").click()
        wait_for(d, "#confirm-text", 30)
        save(d, out, "redact")
        d.find_element("css selector", "#confirm-cancel").click()
        d.get(f"{srv.base}/#/find?start=2023-05-01&end=2023-05-31&role=user")
        wait_for(d, "#forget-filter", 120).click()
        wait_for(d, "#preview-counts", 120)
        save(d, out, "forget-range")
        d.find_element("css selector", "#forget-cancel").click()
        d.get(f"{srv.base}/#/ask?q={QUESTIONS[0].replace(' ', '%20')}&budget=600")
        wait_for(d, "#trace", 120)
        save(d, out, "ask")
        d.get(f"{srv.base}/#/health")
        wait_for(d, "#coverage", 120)
        save(d, out, "health")
    finally:
        d.quit()
        srv.stop()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--db", type=Path, required=True)
    p.add_argument("--out", type=Path, default=Path("docs"))
    p.add_argument("--no-calls", action="store_true", help="do not make recall-log rows first")
    a = p.parse_args()
    if not a.no_calls:
        recall_rows(a.db)
    shoot(a.db, a.out)


if __name__ == "__main__":
    main()
