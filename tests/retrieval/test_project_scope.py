"""Projects: a session's client and project are stored and journaled (and filled in
later), a project scope sees its own sessions plus what a person said anywhere, resolves
a folder to its repository, and reaches the CLI, the Memory facade and the toolkit."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from localmem.config import RetrievalParams, Settings
from localmem.memory import Memory, open_memory
from localmem.records import Project, ProjectScope, SessionIn, TurnIn
from localmem.retrieval import scope as scopes
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.write import changes
from localmem.storage.write.store import Store
from localmem.toolkit.turns import turns_between
from localmem.util.gitinfo import clean_remote, repo_of
from tests.helpers.fakes import HashEmbedder

SHOP = Project(cwd="/home/sam/shop", branch="main", repository="https://sam:ghp_tok@github.com/sam/shop.git")
ETL = Project(cwd="/home/sam/etl", branch="dev")


def agent_session(key: str, day: str, project: Project | None, *turns: tuple[str, str]) -> SessionIn:
    return SessionIn(
        key,
        tuple(
            TurnIn(text, who, "user" if who == "user" else "assistant", f"2024-01-{day}T10:0{i}:00")
            for i, (who, text) in enumerate(turns)
        ),
        started_at=f"2024-01-{day}T10:00:00",
        source="claude-code",
        client="claude-code",
        project=project,
    )


@pytest.fixture
def two_projects(store: Store) -> Store:
    store.write_sessions(
        [
            agent_session(
                "shop-1",
                "02",
                SHOP,
                ("user", "I prefer pnpm over npm on every machine."),
                ("assistant", "The shop database is Postgres; migrations live in db/migrations."),
            ),
            agent_session(
                "etl-1",
                "03",
                ETL,
                ("user", "Which database should the etl jobs use?"),
                ("assistant", "The etl database is DuckDB; one file per run."),
            ),
            agent_session("chat", "04", None, ("user", "My cat is called Miso.")),
        ]
    )
    return store


def test_client_and_project_are_stored_without_credentials_and_journaled(two_projects: Store) -> None:
    rows = two_projects.conn.execute(
        "SELECT key, client, cwd, repository, branch FROM sessions ORDER BY key"
    ).fetchall()
    assert ("shop-1", "claude-code", "/home/sam/shop", "https://github.com/sam/shop", "main") in rows
    assert ("chat", "claude-code", "", "", "") in rows
    data = [json.loads(d) for (d,) in two_projects.conn.execute("SELECT data FROM changes WHERE kind = 'session'")]
    shop = next(d for d in data if d["key"] == "shop-1")
    assert shop["client"] == "claude-code"
    assert shop["project"] == {"cwd": "/home/sam/shop", "repository": "https://github.com/sam/shop", "branch": "main"}
    assert "ghp_tok" not in json.dumps(data)
    # what a fold reads back is the session as journaled
    assert changes.session_from_data(shop).data() == shop


def test_a_project_learned_later_fills_the_session_and_is_journaled_again(store: Store) -> None:
    store.write_sessions([agent_session("s", "05", None, ("user", "first words"))])
    store.write_sessions([agent_session("s", "05", ETL, ("user", "later words"))])
    store.write_sessions([agent_session("s", "05", SHOP, ("user", "even later"))])  # known: kept, no row
    assert store.conn.one("SELECT cwd, branch FROM sessions WHERE key = 's'") == ("/home/sam/etl", "dev")
    rows = [json.loads(d) for (d,) in store.conn.execute("SELECT data FROM changes WHERE kind = 'session'")]
    assert len(rows) == 2 and "project" not in rows[0] and rows[1]["project"]["cwd"] == "/home/sam/etl"


def test_project_scope_keeps_its_sessions_and_what_a_person_said_anywhere(two_projects: Store) -> None:
    seen = {
        where: {t.text for t in reconstruct(two_projects, "which database do we use", 300, scope=where).turns}
        for where in (None, "project:/home/sam/shop", "project:/home/sam/shop/web")
    }
    assert "The etl database is DuckDB; one file per run." in seen[None]
    for where in ("project:/home/sam/shop", "project:/home/sam/shop/web"):
        got = seen[where]
        if where.endswith("/web"):  # a folder inside the project is not the project
            assert "The shop database is Postgres; migrations live in db/migrations." not in got
        else:
            assert "The shop database is Postgres; migrations live in db/migrations." in got
        assert "The etl database is DuckDB; one file per run." not in got  # another project's agent
        assert "Which database should the etl jobs use?" not in got  # a person's work talk elsewhere
    personal = reconstruct(two_projects, "what is my cat called", 300, scope="project:/home/sam/etl")
    assert "My cat is called Miso." in {t.text for t in personal.turns}


def test_what_a_person_said_elsewhere_is_kept_only_when_about_themselves(tmp_path: Path) -> None:
    got = {}
    for personal in ("self", "all"):
        settings = Settings(db=tmp_path / f"{personal}.db", retrieval=RetrievalParams(project_personal=personal))
        with Store(settings.db, embedder=HashEmbedder(), settings=settings) as s:
            s.write_sessions(
                [
                    agent_session("a", "02", SHOP, ("assistant", "The shop database is Postgres.")),
                    agent_session(
                        "b",
                        "03",
                        ETL,
                        ("user", "Which database should the etl jobs use?"),
                        ("user", "I like my database small."),
                    ),
                ]
            )
            ctx = reconstruct(s, "which database", 300, scope="project:/home/sam/shop")
            got[personal] = {t.text for t in ctx.turns}
    assert got["self"] == {"The shop database is Postgres.", "I like my database small."}
    assert got["all"] == got["self"] | {"Which database should the etl jobs use?"}
    assert scopes.about_themselves("My name is Sam.") and scopes.about_themselves("I'm on zsh")
    assert not scopes.about_themselves("Am I right?") and not scopes.about_themselves("How do we run the tests")


def test_turns_elsewhere_weigh_less_than_the_projects_own(tmp_path: Path) -> None:
    scores = {}
    for share in (1.0, 0.5):
        settings = Settings(db=tmp_path / f"{share}.db", retrieval=RetrievalParams(project_elsewhere=share))
        with Store(settings.db, embedder=HashEmbedder(), settings=settings) as s:
            s.write_sessions(
                [
                    agent_session("a", "02", SHOP, ("user", "I like short commit messages.")),
                    agent_session("b", "03", ETL, ("user", "I like short commit messages too.")),
                ]
            )
            ctx = reconstruct(s, "short commit messages", 300, scope="project:/home/sam/shop")
            scores[share] = {t.session: t.score for t in ctx.turns}
    assert scores[1.0]["b"] > 0 and scores[0.5]["b"] == pytest.approx(scores[1.0]["b"] * 0.5, rel=1e-3)
    assert scores[0.5]["a"] == pytest.approx(scores[1.0]["a"], rel=1e-3)


def test_the_toolkit_and_the_facade_take_a_project_scope(two_projects: Store) -> None:
    page = turns_between(two_projects, "2024-01-01", "2024-01-31", scope="project:/home/sam/shop")
    texts = [t.text for t in page.items]
    assert "The shop database is Postgres; migrations live in db/migrations." in texts
    assert "The etl database is DuckDB; one file per run." not in texts
    assert "Which database should the etl jobs use?" in texts
    mem = Memory(two_projects)
    got = {t.text for t in mem.reconstruct("database", 300, project="/home/sam/etl").turns}
    assert "The etl database is DuckDB; one file per run." in got
    assert "The shop database is Postgres; migrations live in db/migrations." not in got


def test_a_folder_resolves_to_its_repository(tmp_path: Path) -> None:
    repo = tmp_path / "app"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "config").write_text(
        '[core]\n\tbare = false\n[remote "origin"]\n\turl = https://me:secret@example.com/me/app.git\n', "utf-8"
    )
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/feature/x\n", "utf-8")
    (repo / "src").mkdir()
    assert repo_of(repo / "src") == repo_of(repo)
    assert repo_of(repo).remote == "https://example.com/me/app" and repo_of(repo).branch == "feature/x"
    assert scopes.project_scope(repo / "src") == ProjectScope(str(repo.resolve()), "https://example.com/me/app")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert scopes.project_scope(plain) == ProjectScope(str(plain.resolve()), "")
    assert clean_remote("git@github.com:me/app.git") == "git@github.com:me/app"


def test_a_clone_elsewhere_is_the_same_project(store: Store, tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    (clone / ".git").mkdir(parents=True)
    (clone / ".git" / "config").write_text('[remote "origin"]\n\turl = https://github.com/sam/shop\n', "utf-8")
    store.write_sessions([agent_session("shop-1", "02", SHOP, ("assistant", "The shop database is Postgres."))])
    ctx = reconstruct(store, "database", 300, scope=f"project:{clone}")
    assert [t.session for t in ctx.turns] == ["shop-1"]


def test_query_project_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "cli.db"
    with open_memory(db) as mem:  # the CLI's own (default) embedder
        mem.write(agent_session("shop-1", "02", SHOP, ("assistant", "The shop database is Postgres.")))
        mem.write(agent_session("etl-1", "03", ETL, ("assistant", "The etl database is DuckDB.")))
    cmd = [sys.executable, "-m", "localmem", "--db", str(db), "query", "which database", "--json", "--budget", "300"]
    run = subprocess.run([*cmd, "--project", "/home/sam/etl"], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert [t["text"] for t in json.loads(run.stdout)["turns"]] == ["The etl database is DuckDB."]
    both = subprocess.run([*cmd, "--project", "/x", "--scope", "y"], capture_output=True, text=True, timeout=300)
    assert both.returncode != 0 and "not both" in both.stderr


def test_sync_carries_the_project_to_another_device(tmp_path: Path) -> None:
    laptop, desktop, folder = tmp_path / "laptop.db", tmp_path / "desktop.db", tmp_path / "sync"
    folder.mkdir()
    with open_memory(laptop) as mem:
        mem.write(agent_session("shop-1", "02", SHOP, ("assistant", "The shop database is Postgres.")))
    for db in (laptop, desktop):
        run = subprocess.run(
            [sys.executable, "-m", "localmem", "--db", str(db), "sync", str(folder)], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr
    with open_memory(desktop) as mem:
        row = mem.store.conn.one("SELECT client, cwd, repository, branch FROM sessions WHERE key = 'shop-1'")
        assert tuple(row) == ("claude-code", "/home/sam/shop", "https://github.com/sam/shop", "main")
        ctx = mem.reconstruct("database", 300, project="/home/sam/shop")
        assert [t.text for t in ctx.turns] == ["The shop database is Postgres."]
