"""The hook tests' processes start no resident daemon unless a test asks for one
(``tests/hooks/test_resident.py``): a daemon outlives its hook, and the other tests are
about the in-process path."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _no_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCALMEM_HOOKS_DAEMON_IDLE", "0")
