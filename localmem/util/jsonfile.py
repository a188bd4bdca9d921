"""A small JSON settings file read whole: an object, or a ``ConfigError`` naming the file.

For the files that sit beside a model (an embedder folder's ``embedder.json``, its
``scorer.json``); each caller then checks its own keys and names the one that is wrong.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localmem.errors import ConfigError


def read_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; a ``ConfigError`` naming the file when it cannot be
    read, is not JSON, or is JSON of another kind."""
    try:
        doc = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not readable JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return doc
