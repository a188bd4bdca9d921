"""What every benchmark does before it measures: its working folder, its log lines, its
stores (a fresh file, or one with a benchmark's sessions written), and for the benches
that run real processes on one file, the store made first and the command and
environment those processes get.

Invariants:
- a folder the user names (``--workdir``) is made if missing and kept, so a re-run
  reuses its stores; without one a bench works in a fresh temporary folder that is
  removed when it ends, whatever the outcome;
- the processes a bench starts never load a chat model (``LOCALMEM_MODEL`` is dropped
  from their environment): the load measured is on the store, not on a background model;
- log lines go to stderr, flushed, so stdout keeps only the table and the ``--json`` line;
- a store a bench writes sessions into is closed again when the write fails, so a
  failed run leaves no connection (nor lock) behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from localmem.config import Settings
from localmem.models.embedding import Embedder
from localmem.records import SessionIn
from localmem.storage.write.store import Store

Log = Callable[[str], None]


@contextmanager
def working_folder(given: Path | None, name: str) -> Iterator[Path]:
    """``given`` (made if missing, kept), else a temporary folder removed on exit."""
    if given is not None:
        given.mkdir(parents=True, exist_ok=True)
        yield given
        return
    # a process the bench started may still be closing its files as the folder goes
    with tempfile.TemporaryDirectory(prefix=f"localmem-bench-{name}-", ignore_cleanup_errors=True) as tmp:
        yield Path(tmp)


def fresh_file(path: Path) -> Path:
    """``path`` with no store in it: the file and its ``-wal`` and ``-shm`` removed."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path


def store_with(path: Path, embedder: Embedder, settings: Settings, sessions: Sequence[SessionIn]) -> Store:
    """The store at ``path`` with ``sessions`` written (turns it holds already embed
    nothing again, so a kept store is only re-read); closed again if the write fails."""
    store = Store(path, embedder=embedder, settings=settings)
    try:
        store.write_sessions(list(sessions))
    except BaseException:
        store.close()
        raise
    return store


def stderr_log(name: str) -> Log:
    """A bench's log: ``[bench NAME] message`` lines on stderr."""
    return lambda msg: print(f"[bench {name}] {msg}", file=sys.stderr, flush=True)


def child_env() -> dict[str, str]:
    """This process's environment for the processes a bench starts, without a chat model."""
    env = dict(os.environ)
    env.pop("LOCALMEM_MODEL", None)
    return env


def localmem_cmd(dbfile: Path, *args: str) -> list[str]:
    """The ``localmem`` command on ``dbfile``, run by this Python."""
    return [sys.executable, "-m", "localmem", "--db", str(dbfile), *args]


def mcp_server_cmd(dbfile: Path) -> list[str]:
    """The MCP server (stdio) on ``dbfile`` without its enrichment worker."""
    return [sys.executable, "-m", "mcp_server", "--db", str(dbfile), "--no-worker"]


def create_store(dbfile: Path) -> None:
    """Create and migrate ``dbfile`` in a process of its own, as a user's first command
    would, before the processes under test open it."""
    create = "import localmem, sys; localmem.open(sys.argv[1]).close()"
    subprocess.run([sys.executable, "-c", create, str(dbfile)], env=child_env(), check=True, capture_output=True)
