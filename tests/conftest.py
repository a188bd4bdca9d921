"""Shared fixtures: the fake embedder and chat model of ``tests/helpers/fakes.py`` (for
tests about other things), real stores in temp dirs, an autouse fixture that keeps
every test away from the user's real data, config, cache and runtime directories, and
one that keeps ``localmem query`` / ``recall`` from leaving resident daemons behind (a test
about them sets ``LOCALMEM_QUERY_DAEMON_IDLE`` itself: tests/cli/test_query_daemon.py).
A subprocess inherits both only through an environment built from ``os.environ``.

Every process of the run, this one and each it starts, has the open guard
(``storage.engine.openguard``): a Python open of a file one of its SQLite connections holds
is refused and logged, and the test that caused it fails (``_no_store_file_opened``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# before localmem's storage is imported below: the guard is installed on that import
OPEN_GUARD_LOG = Path(tempfile.mkdtemp(prefix="localmem-openguard-")) / "opened.log"
os.environ["LOCALMEM_OPEN_GUARD"] = str(OPEN_GUARD_LOG)

from localmem.config import Settings  # noqa: E402  (after the guard variable is set)
from localmem.records import SessionIn  # noqa: E402
from localmem.storage.engine import keys  # noqa: E402
from localmem.storage.write.store import Store  # noqa: E402
from tests.helpers.fakes import HashEmbedder, ScriptedGenerator, session  # noqa: E402


@pytest.fixture
def scripted() -> ScriptedGenerator:
    return ScriptedGenerator()


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    # resident sockets under XDG_DATA_HOME (a real runtime dir would collect the tests' ones)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    # one cache for the session: the embedding session built once (models/onnx_cache.py), not per test
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "cache"))
    monkeypatch.delenv("LOCALMEM_DB", raising=False)
    monkeypatch.delenv("LOCALMEM_CONFIG", raising=False)
    monkeypatch.delenv("LOCALMEM_EMBEDDER", raising=False)
    monkeypatch.delenv("LOCALMEM_MODEL", raising=False)


@pytest.fixture(autouse=True)
def _no_store_file_opened() -> Iterator[None]:
    # a daemon a test left may log after its test: the line is still this run's defect
    before = OPEN_GUARD_LOG.stat().st_size if OPEN_GUARD_LOG.exists() else 0
    yield
    if OPEN_GUARD_LOG.exists() and OPEN_GUARD_LOG.stat().st_size > before:
        with OPEN_GUARD_LOG.open("rb") as fh:
            fh.seek(before)
            found = fh.read().decode("utf-8", "replace")
        pytest.fail(f"a process opened a file its own SQLite connection holds (drops SQLite's locks):\n{found}")


@pytest.fixture(autouse=True, scope="session")
def _no_query_daemon() -> Iterator[None]:
    # the session's scope: set before any module-scoped fixture starts a process
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LOCALMEM_QUERY_DAEMON_IDLE", "0")
        yield


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def store(tmp_path: Path, embedder: HashEmbedder) -> Iterator[Store]:
    s = Store(tmp_path / "mem.db", embedder=embedder, settings=Settings(db=tmp_path / "mem.db"))
    yield s
    s.close()


@pytest.fixture
def garden_sessions() -> list[SessionIn]:
    return [
        session(
            "s1",
            "2024-01-05T10:00:00",
            ("Ana", "I planted tomatoes in the garden today. They need sun."),
            ("Ben", "Nice! Did you also plant basil next to them?"),
            ("Ana", "Yes, basil and some mint. The mint spreads a lot."),
        ),
        session(
            "s2",
            "2024-02-10T09:00:00",
            ("Ben", "My bike chain broke on the way to work."),
            ("Ana", "Did you fix the bike chain yourself?"),
            ("Ben", "I took the bike to the shop on Main Street."),
        ),
        session(
            "s3",
            "2024-03-15T18:30:00",
            ("Ana", "The tomatoes are growing fast, the first flowers appeared."),
            ("Ben", "Great, tomatoes love the warm weather."),
        ),
    ]


def pytest_sessionstart(session: pytest.Session) -> None:
    """CI's cipher venv (.ci/run) sets LOCALMEM_REQUIRE_CIPHER: there the encryption tests
    must run, so a plain apsw (they would skip) is an error, not a quiet skip."""
    if os.environ.get("LOCALMEM_REQUIRE_CIPHER") == "1" and not keys.encryption_available():
        raise pytest.UsageError("LOCALMEM_REQUIRE_CIPHER=1 but apsw is not the apsw-sqlite3mc build")
