"""The web view's fixtures: the story store and its server (one per module), and a
headless Chromium (Debian's, through Selenium), skipped only when it is absent and
``LOCALMEM_REQUIRE_BROWSER`` is not set (CI sets it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from localmem.config import Settings
from tests.helpers.ui import CHROMEDRIVER, CHROMIUM, Server, build_store


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return build_store(tmp_path_factory.mktemp("ui") / "mem.db")


@pytest.fixture(scope="module")
def server(built: Settings) -> Iterator[Server]:
    srv = Server(built)
    yield srv
    srv.stop()


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
