"""localmem.ingest.aider on what the real Aider writes: fixtures/aider/real is the history
file of tests/agents/test_aider.py's three sessions as Aider 0.86.2 wrote it (its paths and
port made up): a ``--message`` with a line break, which Aider echoes in its command line as a
``> `` line without the two closing spaces and a line without the ``> ``; a ``/ask``, which
Aider logs twice (the command, then the question as the person's input). Each prompt and
reply is stored once, whole or read as it grows; none of Aider's own lines are."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from localmem.config import IngestParams, Settings
from localmem.ingest import detect, load, runner
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

REAL = Path(__file__).resolve().parent / "fixtures" / "aider" / "real" / ".aider.chat.history.md"
SAID = [
    ("user", "We decided to keep the invoice cache in SQLite, not Redis.\nRedis stays for the sessions only."),
    ("assistant", "Noted: the invoice cache stays in SQLite, and Redis keeps only the sessions."),
    ("user", "The cart applies the gift card before the coupon. Apply the coupon first."),
    ("assistant", "I'll apply the coupon before the gift card.\n\nedited: cart.py\n\nThe coupon now applies first."),
    ("user", "Which database did we pick for the invoice cache?"),
    ("assistant", "SQLite, for the invoice cache."),
]
NEVER = ("--message", "--model", "Aider v", "Model:", "Added cart.py", "Tokens:", "Applied edit", "Repo-map", "/ask")


def new_store(tmp_path: Path, name: str) -> Store:
    db = tmp_path / f"{name}.db"
    return Store(db, embedder=HashEmbedder(), settings=Settings(db=db, ingest=IngestParams()))


def stored(store: Store) -> list[tuple[str, str]]:
    rows = store.conn.execute("SELECT speaker, text FROM turns ORDER BY id").fetchall()
    return [(str(a), str(b)) for a, b in rows]


def test_real_history_each_prompt_and_reply_once() -> None:
    assert detect(REAL) == "aider"
    sessions = load(REAL)
    assert [(t.speaker, t.text) for s in sessions for t in s.turns] == SAID
    assert [len(s.turns) for s in sessions] == [2, 2, 2]  # one session per launch of Aider
    assert not [t.text for s in sessions for t in s.turns if any(w in t.text for w in NEVER)]


def test_real_history_read_as_it_grows(tmp_path: Path) -> None:
    """Cut at every line end (a resumed read then starts inside a session's opening, inside the
    command line Aider echoes, between a ``#### `` line and what follows it), read with
    ``hold``, then grown to the whole: the same turns, each once."""
    data = REAL.read_bytes()
    ends = [i + 1 for i, b in enumerate(data) if b == ord("\n")]
    for n, cut in enumerate(ends[:-1]):
        log = tmp_path / f"cut{n}" / REAL.name
        log.parent.mkdir()
        log.write_bytes(data[:cut])
        with new_store(tmp_path, f"cut{n}") as store:
            try:
                runner.ingest_file(store, log, "aider", hold=True)
            except Exception as exc:  # a head with no turn yet is refused, nothing stored
                assert not stored(store), exc
            with log.open("ab") as fh:
                fh.write(data[cut:])
            runner.ingest_file(store, log, "aider", hold=True)
            runner.ingest_file(store, log, "aider")  # quiet now: read to its end
            assert Counter(stored(store)) == Counter(SAID), f"cut at byte {cut}"


@pytest.mark.parametrize(
    ("history", "want"),
    [
        pytest.param(  # tool output of several lines right after the person's line: never a reply
            "#### /run make  \n> make: nothing to do\nfor all.  \n\n#### Why?  \n\nBecause.\n\n",
            [("user", "Why?"), ("assistant", "Because.")],
            id="tool-after-input",
        ),
        pytest.param(  # a reply that opens with a quote comes after a blank line: still the reply
            "#### Quote the docs.  \n\n> Coupons apply first.\n\nThat is the rule.\n\n> Tokens: 1 sent.  \n",
            [("user", "Quote the docs."), ("assistant", "> Coupons apply first.\n\nThat is the rule.")],
            id="reply-opens-with-quote",
        ),
    ],
)
def test_tool_output_and_quotes(tmp_path: Path, history: str, want: list[tuple[str, str]]) -> None:
    log = tmp_path / REAL.name
    log.write_text("\n# aider chat started at 2026-01-02 10:00:00\n\n> Aider v0.86.2\nsecond line  \n\n" + history)
    assert [(t.speaker, t.text) for s in load(log, "aider") for t in s.turns] == want
