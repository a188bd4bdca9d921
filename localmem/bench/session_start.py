"""``localmem bench session-start``: what a session start injects in a new project, on a
store of ~10k turns that have nothing to do with it.

The store: LoCoMo's dev conversations and LongMemEval-S haystacks (personal chat with a
friend or an assistant: decisions, plans and open questions about trips, jobs, recipes),
up to ``--turns``, plus the three coding projects of ``bench projects``
(``projects.SESSIONS``: a shop, an ETL pipeline, a Hugo site, with their own decisions and
the person's statements about themselves, each said in one of them).

The cases (``CASES``): a project folder made for the case (its name, README, manifest) and
the person's first prompt there, each labelled with the turns a person would call
justified in that project: for a new project, only the person's own working preferences
that fit it (pnpm for a JavaScript project, commit style and shell anywhere, time zone
where jobs are scheduled, their name on a personal site); for one of the fixture's
projects, its own talk too. Everything else injected is *unrelated*: chat, another
project's decisions, a preference that does not fit.

Each case runs the hook's own recall (``resident.recall``) with the default budgets and
bar: a session start, then the first prompt in the same session (which leaves out what
the start gave). Reported per case: bytes and turns injected, unrelated turns, justified
ones found. Target: 0 unrelated at session start. The store's embedder (default: the default one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localmem.bench import projects
from localmem.config import Settings
from localmem.ingest import locomo as locomo_ingest
from localmem.ingest import longmemeval as lme_ingest
from localmem.memory import open_store
from localmem.records import SessionIn
from localmem.resident import recall
from localmem.retrieval.scope import project_scope
from localmem.storage.bench import reads as bench_reads
from localmem.storage.reads import queries
from localmem.storage.write.store import Store

# the person's statements in the fixture (projects.SESSIONS), by what they are about
PNPM = "Good. By the way, I prefer pnpm"
SHELL = "I use zsh"
TIMEZONE = "I'm in Lisbon"
COMMITS = "I like commit messages"
NAME = "My name is Sam Okafor"
ANYWHERE = (COMMITS, SHELL)  # how a person works, whatever the project


@dataclass(frozen=True)
class Case:
    name: str  # the folder's name
    files: dict[str, str]  # what it holds
    prompt: str  # the person's first prompt there
    justified: tuple[str, ...]  # text starts of the turns a person would call justified
    own: str = ""  # a fixture project this folder is (its sessions' turns are justified)
    cwd: str = ""  # where it is, when not made under the work folder
    remote: str = ""


def _readme(title: str, body: str) -> str:
    return f"# {title}\n\n{body}\n"


CASES = (
    Case(
        "invoice-ui",
        {
            "package.json": json.dumps({"name": "invoice-ui", "description": "A React dashboard for invoices"}),
            "README.md": _readme("Invoice UI", "A web dashboard for our invoices, built with Vite and React."),
        },
        "Set up the project and add a test command.",
        (PNPM, *ANYWHERE),
    ),
    Case(
        "grep-lite",
        {
            "Cargo.toml": '[package]\nname = "grep-lite"\ndescription = "A small grep clone"\n',
            "README.md": _readme("grep-lite", "A small grep clone in Rust: regex search over files."),
        },
        "Add a flag for case-insensitive search.",
        ANYWHERE,
    ),
    Case(
        "nightly-backup",
        {
            "pyproject.toml": '[project]\nname = "nightly-backup"\ndescription = "Nightly backups on a schedule"\n',
            "README.md": _readme("Nightly backup", "Backs up the photo library every night, scheduled with cron."),
        },
        "When should the backup job run?",
        (TIMEZONE, *ANYWHERE),
    ),
    Case(
        "sam-notes",
        {
            "hugo.toml": 'title = "Sam\'s notes"\n',
            "README.md": _readme("Sam's notes", "My personal blog and notes, a Hugo site."),
        },
        "Put my name in the footer.",
        (NAME, *ANYWHERE),
    ),
    Case(
        "family-recipes",
        {
            "requirements.txt": "flask\n",
            "README.md": _readme("Family recipes", "A small Flask app to keep our family recipes and meal plans."),
        },
        "Add a page that lists recipes by ingredient.",
        ANYWHERE,
    ),
    Case(
        "trip-planner",
        {"README.md": _readme("Trip planner", "Plan trips: flights, hotels and day-by-day itineraries.")},
        "Start with a data model for a trip.",
        ANYWHERE,
    ),
    Case("scratch", {}, "Write a hello world script.", ANYWHERE),
    Case(
        "shop",
        {},
        "Which database do we use?",
        (PNPM, *ANYWHERE),
        own="shop",
        cwd=f"{projects.ROOT}/shop",
    ),
)


@dataclass
class Result:
    case: str
    session_bytes: int = 0
    session_turns: int = 0
    session_unrelated: list[str] = field(default_factory=list)
    session_justified: int = 0
    prompt_bytes: int = 0
    prompt_turns: int = 0
    prompt_unrelated: list[str] = field(default_factory=list)
    justified: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "case": self.case,
            "session_bytes": self.session_bytes,
            "session_turns": self.session_turns,
            "session_unrelated": len(self.session_unrelated),
            "session_justified": self.session_justified,
            "justified": self.justified,
            "prompt_bytes": self.prompt_bytes,
            "prompt_turns": self.prompt_turns,
            "prompt_unrelated": len(self.prompt_unrelated),
            "unrelated_examples": [t[:100] for t in (self.session_unrelated + self.prompt_unrelated)[:3]],
        }


def _chat(data: Path, turns: int) -> Iterator[SessionIn]:
    """LoCoMo's dev conversations, then LongMemEval-S haystacks, up to ``turns`` turns."""
    left = turns
    for path, parse in (
        (data / "locomo_dev.json", locomo_ingest.parse),
        (data / "longmemeval_s_dev60.json", lme_ingest.parse),
    ):
        if not path.exists():
            continue
        for s in parse(path):
            if left <= 0:
                return
            s = SessionIn(s.key, s.turns[:left], s.started_at, s.source, s.title)
            left -= len(s.turns)
            yield s


def build(store: Store, data: Path, turns: int) -> int:
    """The store (module docstring), written once: a store that has turns is kept."""
    have = bench_reads.count_turns(store.conn)
    if have == 0:
        batch: list[SessionIn] = []
        for s in _chat(data, turns):
            batch.append(s)
            if sum(len(b.turns) for b in batch) >= 500:
                store.write_sessions(batch)
                batch = []
        store.write_sessions([*batch, *projects.sessions()])
        have = bench_reads.count_turns(store.conn)
    return have


def _folder(work: Path, case: Case) -> Path:
    if case.cwd:
        return Path(case.cwd)
    folder = work / "projects" / case.name
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in case.files.items():
        (folder / name).write_text(text, "utf-8")
    return folder


def _judge(store: Store, case: Case, turn_ids: tuple[int, ...]) -> tuple[list[str], set[str]]:
    """(the unrelated turns' texts, the justified statements found) among ``turn_ids``."""
    rows = queries.turn_rows(store.conn, turn_ids)
    unrelated: list[str] = []
    found: set[str] = set()
    for tid in turn_ids:
        row = rows[tid]
        own = bool(case.own) and row.session_key.startswith(f"{case.own}-")
        hit = next((j for j in case.justified if row.text.startswith(j)), None)
        if hit is not None:
            found.add(hit)
        elif not own:
            unrelated.append(row.text)
    return unrelated, found


def run(work: Path, data: Path, turns: int = 10_000, embedder: str = "default") -> dict[str, Any]:
    settings = Settings(db=work / f"session-start-{turns}.db", embedder=embedder)
    t0 = time.perf_counter()
    results = []
    with open_store(settings) as store:
        stored = build(store, data, turns)
        built = time.perf_counter() - t0
        hooks = store.settings.hooks
        for case in CASES:
            folder = _folder(work, case)
            project = project_scope(folder)
            session = f"bench-{case.name}"
            start = recall.session_start(store, project, session, hooks.session_budget)
            bad, found = _judge(store, case, start.turn_ids)
            r = Result(case.name, len(start.text.encode()), len(start.turns), bad, len(found))
            given = frozenset(start.turn_ids)
            ask = recall.prompt(store, project, session, case.prompt, hooks.prompt_budget, hooks.prompt_bar, given)
            bad, more = _judge(store, case, ask.turn_ids)
            r.prompt_bytes, r.prompt_turns, r.prompt_unrelated = len(ask.text.encode()), len(ask.turns), bad
            r.justified = len(case.justified)
            r.session_justified = len(found)
            results.append(r.to_dict() | {"prompt_justified": len(more - found)})
    return {
        "turns": stored,
        "build_s": round(built, 1),
        "session_budget": settings.hooks.session_budget,
        "prompt_budget": settings.hooks.prompt_budget,
        "cases": results,
        "session_unrelated": sum(r["session_unrelated"] for r in results),
        "prompt_unrelated": sum(r["prompt_unrelated"] for r in results),
    }


def table(r: dict[str, Any]) -> str:
    lines = [
        f"store: {r['turns']:,} turns (chat from LoCoMo and LongMemEval-S, plus bench projects' three projects); "
        f"session budget {r['session_budget']}, prompt budget {r['prompt_budget']} tokens",
        "| case | session start: bytes | turns | unrelated | justified found | first prompt: bytes | turns | unrelated |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for c in r["cases"]:
        lines.append(
            f"| {c['case']} | {c['session_bytes']:,} | {c['session_turns']} | {c['session_unrelated']} | "
            f"{c['session_justified']} of {c['justified']} | {c['prompt_bytes']:,} | {c['prompt_turns']} | "
            f"{c['prompt_unrelated']} |"
        )
    lines.append(
        f"unrelated turns injected: {r['session_unrelated']} at session start, {r['prompt_unrelated']} at first prompts"
    )
    return "\n".join(lines)
