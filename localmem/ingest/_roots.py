"""What ``localmem watch`` watches: its folders (``Root``), which files in them it reads
(``eligible``), a file's state as last seen (``signature``), and the agents' folders that do
not exist yet (``Absent``: looked for every ``LOOK_EVERY`` seconds and watched from the
moment they appear; ``localmem.ingest.watch``).

Invariants: a folder that appears is watched before it is searched for files, so a file
written meanwhile is found one way or the other (and the resume point makes a second
find harmless).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LOOK_EVERY = 0.5  # seconds between looks for an agent's folder that does not exist yet

EXTENSIONS = {".json", ".jsonl", ".ndjson", ".md", ".markdown", ".txt"}
TEMP_SUFFIXES = (".tmp", ".temp", ".part", ".partial", ".crdownload", ".download", ".swp", ".swx", ".bak", "~")

Event = dict[str, Any]
Signature = tuple[int, int] | None  # (size, mtime_ns); None when the file is gone


def eligible(path: Path, root: Path) -> bool:
    """Whether the watcher reads ``path``: a chat-log extension, not hidden, not temporary."""
    try:
        rel = path.relative_to(root)
    except ValueError:
        return False
    if any(part.startswith((".", "~$", "#")) for part in rel.parts):
        return False
    name = path.name.lower()
    return not name.endswith(TEMP_SUFFIXES) and path.suffix.lower() in EXTENSIONS


def signature(path: Path) -> Signature:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class Root:
    """A folder watched: recursively or not; its files read as ``format`` (None: detected)
    and accepted by ``accept`` (default: ``eligible``); ``append``: an agent's folder,
    whose JSON Lines logs only grow (module docstring)."""

    path: Path
    recursive: bool = False
    format: str | None = None
    accept: Callable[[Path], bool] | None = None
    append: bool = False

    def takes(self, path: Path) -> bool:
        return self.accept(path) if self.accept is not None else eligible(path, self.path)


class Absent:
    """Agents' folders that did not exist when the watcher started, and when to look again."""

    def __init__(self, roots: list[Root]) -> None:
        self.roots = roots
        self._next = 0.0

    def appeared(self) -> list[Root]:
        """The folders among them that exist now (no longer absent); at most one look per ``LOOK_EVERY``."""
        now = time.monotonic()
        if not self.roots or now < self._next:
            return []
        self._next = now + LOOK_EVERY
        found = [r for r in self.roots if r.path.is_dir()]
        self.roots = [r for r in self.roots if r not in found]
        return found
