"""``localmem bench projects``: does a project scope keep a project's recall on its own
sessions while what the person said about themselves in other projects is still found?

A small fixture written for it (``SESSIONS``): a person's coding-agent sessions in three
projects (a TypeScript shop, a Python ETL pipeline, a Hugo site). Each project decided
its own answer to the same questions (its database, how its tests run, where it deploys,
its linter), so every project question has a distractor: another project's answer in
the same words. Along the way the person says things about themselves (package manager,
shell, time zone, commit style, name), each in one project only.

Asked: each project question in its own project (``own``: its answer should be in the
context, ``leak``: another project's answer should not), and each personal question in a
project where it was *not* said (``personal``: the statement should be found). Variants:
no scope; a hard filter (only the project's sessions); the project scope keeping every
person turn from elsewhere (``retrieval.project_personal`` "all") or only first-person
statements ("self"), each at ``retrieval.project_elsewhere`` 1, 0.5, 0.25 and 0.1. The
real MiniLM embedder.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from localmem.config import RetrievalParams, Settings
from localmem.memory import open_store
from localmem.records import Project, SessionIn, TurnIn
from localmem.retrieval.reconstruct import reconstruct

ROOT = "/home/sam"
U, A = "user", "assistant"
# (project, day, turns): a turn is (speaker, text)
SESSIONS: list[tuple[str, int, list[tuple[str, str]]]] = [
    (
        "shop",
        1,
        [
            (U, "Let's set up the storage for the shop. Which database should we use?"),
            (A, "For the shop we decided on Postgres 16, with Prisma for migrations."),
            (U, "Good. By the way, I prefer pnpm over npm on all my machines."),
            (A, "Noted, the shop uses pnpm workspaces now."),
        ],
    ),
    (
        "shop",
        3,
        [
            (U, "How should we run the tests here?"),
            (A, "Shop tests run with `pnpm vitest run`; the e2e suite uses Playwright."),
            (U, "And the linter?"),
            (A, "The shop is linted with ESLint and formatted with Prettier on commit."),
        ],
    ),
    (
        "shop",
        5,
        [
            (U, "Where does the shop deploy from?"),
            (A, "The shop deploys to Fly.io; the config is fly.toml at the repo root."),
            (U, "I like commit messages in the imperative, no emojis please."),
            (A, "Understood: imperative mood, no emojis in shop commits."),
        ],
    ),
    (
        "etl",
        2,
        [
            (U, "Which database should the etl pipeline write to?"),
            (A, "The etl pipeline writes to DuckDB files, one per nightly run."),
            (U, "I use zsh with oh-my-zsh, so keep shell snippets zsh-friendly."),
            (A, "Will do; the etl scripts stay POSIX and run fine under zsh."),
        ],
    ),
    (
        "etl",
        4,
        [
            (U, "How do we run the tests for the etl jobs?"),
            (A, "The etl tests run with `pytest -x`, fixtures live in tests/data."),
            (U, "Which linter does the etl code use?"),
            (A, "The etl code is linted and formatted with Ruff."),
        ],
    ),
    (
        "etl",
        6,
        [
            (U, "Where are the etl jobs deployed?"),
            (A, "The etl jobs deploy as Airflow DAGs on the data cluster."),
            (U, "I'm in Lisbon, so schedule the jobs for 02:00 Lisbon time."),
            (A, "Scheduled the nightly run for 02:00 Europe/Lisbon."),
        ],
    ),
    (
        "site",
        2,
        [
            (U, "Does the site need a database?"),
            (A, "The site needs no database: content is Markdown in content/ built by Hugo."),
            (U, "My name is Sam Okafor, put it in the site footer."),
            (A, "The footer now says Sam Okafor."),
        ],
    ),
    (
        "site",
        5,
        [
            (U, "How do we run the tests for the site?"),
            (A, "Site tests run with `hugo --minify` then htmltest to check links."),
            (U, "What linter do we use on the site?"),
            (A, "The site Markdown is linted with markdownlint-cli2."),
        ],
    ),
    (
        "site",
        7,
        [
            (U, "Where does the site deploy?"),
            (A, "The site deploys on Netlify; netlify.toml holds the build command."),
        ],
    ),
]
# question -> the answer's text start in each project
PROJECT_QUESTIONS = {
    "Which database do we use?": {
        "shop": "For the shop we decided",
        "etl": "The etl pipeline writes",
        "site": "The site needs no",
    },
    "How do we run the tests?": {"shop": "Shop tests run", "etl": "The etl tests run", "site": "Site tests run"},
    "Which linter do we use?": {
        "shop": "The shop is linted",
        "etl": "The etl code is linted",
        "site": "The site Markdown",
    },
    "Where does it deploy?": {"shop": "The shop deploys", "etl": "The etl jobs deploy", "site": "The site deploys"},
}
# question -> (the statement's text start, the project it was said in)
PERSONAL_QUESTIONS = {
    "Which package manager do I prefer?": ("Good. By the way, I prefer pnpm", "shop"),
    "What shell do I use?": ("I use zsh", "etl"),
    "Which city am I in?": ("I'm in Lisbon", "etl"),
    "How do I like my commit messages?": ("I like commit messages", "shop"),
    "What is my name?": ("My name is Sam Okafor", "site"),
}
PROJECTS = ("shop", "etl", "site")
VARIANTS = (
    "none",
    "hard",
    *(f"scope {personal} {share}" for personal in ("all", "self") for share in (1.0, 0.5, 0.25, 0.1)),
)


def sessions() -> list[SessionIn]:
    out = []
    for n, (project, day, turns) in enumerate(SESSIONS):
        started = f"2026-02-{day:02d}T10:00:00"
        made = tuple(
            TurnIn(text, who, "user" if who == U else "assistant", f"2026-02-{day:02d}T10:{i:02d}:00")
            for i, (who, text) in enumerate(turns)
        )
        where = Project(cwd=f"{ROOT}/{project}", branch="main")
        out.append(SessionIn(f"{project}-{n}", made, started, f"claude-code:{project}", "", "claude-code", where))
    return out


def _scope(variant: str, project: str) -> str | None:
    if variant == "none":
        return None
    if variant == "hard":
        return f"claude-code:{project}"
    return f"project:{ROOT}/{project}"


def run(work: Path, budgets: tuple[int, ...] = (150, 300)) -> dict[str, Any]:
    base = Settings(db=work / "projects.db")
    rows = []
    for variant in VARIANTS:
        _, kept, share = variant.split() if variant.startswith("scope") else ("", "self", "0.25")
        settings = replace(base, retrieval=RetrievalParams(project_elsewhere=float(share), project_personal=kept))
        with open_store(settings) as store:
            store.write_sessions(sessions())
            for budget in budgets:
                own = leak = asked = found = 0
                for question, answers in PROJECT_QUESTIONS.items():
                    for project in PROJECTS:
                        ctx = reconstruct(store, question, budget, scope=_scope(variant, project))
                        texts = [t.text for t in ctx.turns]
                        asked += 1
                        own += any(t.startswith(answers[project]) for t in texts)
                        leak += any(t.startswith(a) for p, a in answers.items() if p != project for t in texts)
                personal = 0
                for question, (said, there) in PERSONAL_QUESTIONS.items():
                    for project in (p for p in PROJECTS if p != there):
                        ctx = reconstruct(store, question, budget, scope=_scope(variant, project))
                        found += 1
                        personal += any(t.text.startswith(said) for t in ctx.turns)
                rows.append(
                    {
                        "variant": variant,
                        "budget": budget,
                        "own": round(100 * own / asked, 1),
                        "leak": round(100 * leak / asked, 1),
                        "personal": round(100 * personal / found, 1),
                        "project_questions": asked,
                        "personal_questions": found,
                    }
                )
    return {"rows": rows}
