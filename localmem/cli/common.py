"""Helpers every command module of the CLI shares: opening the store, printing JSON.

Invariant: commands open the store only through ``open_store``, so every command gets the
configured embedder and settings the same way; the embedder is looked up when the store is
opened (not imported here), which keeps ``--help`` fast and lets tests swap it.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from localmem.config import Settings
from localmem.store import Store

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]


def open_store(settings: Settings) -> Store:
    from localmem.models import default_embedder

    return Store(settings.db, embedder=default_embedder(settings.embedder), settings=settings)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, ensure_ascii=False))
