"""The resident socket in one process: a real Unix socket, a real store (the fake embedder:
these tests are about the protocol), the server on its thread and the client asking.
The same with real processes is in test_processes.py."""

from __future__ import annotations

import json
import os
import socket
import stat
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from localmem.cli.served import Planner
from localmem.config import Settings
from localmem.records import SessionIn
from localmem.resident import ask, client, server, unix, wire
from localmem.resident.local import context
from localmem.resident.server import ResidentServer
from localmem.retrieval import scope as scopes
from localmem.storage.engine import keys
from localmem.storage.layers import recalls
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

Q = wire.Query("Did Ben fix the bike chain?", 200)


@pytest.fixture
def filled(store: Store, garden_sessions: list[SessionIn]) -> Store:
    store.write_sessions(garden_sessions)
    return store


@pytest.fixture
def serving(filled: Store) -> Iterator[ResidentServer]:
    srv = ResidentServer(filled)
    assert srv.start()
    yield srv
    srv.stop()


def test_answer_is_the_in_process_one(serving: ResidentServer, filled: Store) -> None:
    got = client.ask(filled.settings, Q)
    assert got is not None and got["turns"]
    assert got == context(filled, Q)
    assert serving.served == 1


def test_socket_and_folder_are_private(serving: ResidentServer) -> None:
    assert serving.path is not None
    assert stat.S_IMODE(os.lstat(serving.path).st_mode) == 0o600
    assert stat.S_ISSOCK(os.lstat(serving.path).st_mode)
    assert stat.S_IMODE(serving.path.parent.stat().st_mode) == 0o700


def test_stop_removes_the_socket_and_the_client_falls_back(serving: ResidentServer, filled: Store) -> None:
    path = serving.path
    assert path is not None and path.exists()
    serving.stop()
    assert not path.exists()
    assert client.ask(filled.settings, Q) is None


def test_stale_socket_is_refused_by_the_client_and_replaced_by_a_server(filled: Store) -> None:
    path = wire.socket_path(filled.path)
    assert path is not None
    assert wire.private_folder(path.parent, create=True)
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(path))  # a socket file nobody accepts on: a server killed with SIGKILL
    dead.close()
    assert path.exists() and client.ask(filled.settings, Q) is None
    with ResidentServer(filled) as srv:
        assert srv.path == path
        assert client.ask(filled.settings, Q) is not None


def test_a_second_server_stands_by_and_takes_over(filled: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "STANDBY_S", 0.05)
    first = ResidentServer(filled)
    assert first.start()
    second = ResidentServer(filled)
    try:
        assert not second.start()
        assert client.ask(filled.settings, Q) is not None
        first.stop()
        for _ in range(200):
            if second.path is not None:
                break
            threading.Event().wait(0.02)
        assert second.path is not None and client.ask(filled.settings, Q) is not None
        assert second.served == 1
    finally:
        first.stop()
        second.stop()


def test_another_store_at_the_same_path_is_refused(serving: ResidentServer, filled: Store, tmp_path: Path) -> None:
    other = Store(tmp_path / "other.db", embedder=HashEmbedder(), settings=Settings(db=tmp_path / "other.db"))
    other.close()
    os.replace(tmp_path / "other.db", filled.path)  # the path now names another file
    assert client.ask(filled.settings, Q) is None
    assert serving.served == 0


def test_other_settings_are_refused(serving: ResidentServer, filled: Store) -> None:
    changed = replace(filled.settings, retrieval=replace(filled.settings.retrieval, cable=False))
    assert client.ask(changed, Q) is None
    assert client.ask(replace(filled.settings, budget_tokens=700), Q) is None
    # a model or write-side setting does not change what a read returns
    assert client.ask(replace(filled.settings, extract_batch=3), Q) is not None


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"version": "0.0.0"}, "version"),
        ({"protocol": 99}, "version"),
        ({"op": "forget"}, "op"),
        ({"settings": "x"}, "settings"),
        ({"store": {"path": "/elsewhere", "dev": 1, "ino": 2}}, "store"),
        ({"query": {"text": 5}}, "request: query.text must be a string"),
        ({"query": {"text": "q", "budget": "10"}}, "request: query.budget must be an integer"),
    ],
)
def test_refusals(serving: ResidentServer, filled: Store, change: dict[str, object], why: str) -> None:
    identity = wire.store_identity(filled.path)
    assert identity is not None
    req = wire.decode(wire.request(filled.settings, Q, identity, client.__version__)) | change
    assert serving.handle(req) == {"ok": False, "why": why}


def test_a_library_error_is_refused_for_the_caller_to_meet_in_process(serving: ResidentServer, filled: Store) -> None:
    bad = wire.Query("anything", as_of="not a time")
    assert client.ask(filled.settings, bad) is None


def test_busy_store_is_refused(serving: ResidentServer, filled: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "BUSY_S", 0.05)
    with serving.lock:  # another call (an MCP tool) holds the store
        assert client.ask(filled.settings, Q) is None
    assert client.ask(filled.settings, Q) is not None


def test_garbage_on_the_socket_is_dropped(serving: ResidentServer, filled: Store) -> None:
    assert serving.path is not None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(str(serving.path))
        s.sendall(b"\xff\xfe not json\n")
        assert s.recv(100) == b""  # closed without a reply
    assert client.ask(filled.settings, Q) is not None  # and the server goes on


def test_a_folder_others_may_enter_is_not_used(filled: Store) -> None:
    path = wire.socket_path(filled.path)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.parent.chmod(0o755)
    srv = ResidentServer(filled)
    assert not srv.start(standby=False)
    path.parent.chmod(0o700)
    assert srv.start(standby=False)
    try:
        path.parent.chmod(0o755)  # opened up while serving: clients stop asking
        assert client.ask(filled.settings, Q) is None
    finally:
        path.parent.chmod(0o700)
        srv.stop()


def test_no_store_file_means_no_asking(tmp_path: Path) -> None:
    assert client.ask(Settings(db=tmp_path / "none.db"), Q) is None


def test_key_opens_a_plain_store_and_not_a_locked_one(filled: Store, tmp_path: Path) -> None:
    assert keys.key_opens(filled.path)
    locked = tmp_path / "locked.db"
    locked.write_bytes(os.urandom(4096))  # what an encrypted store looks like without its key
    assert keys.is_encrypted(locked) and not keys.key_opens(locked)


def test_socket_path_is_per_store_and_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = wire.socket_path(tmp_path / "a.db"), wire.socket_path(tmp_path / "b.db")
    assert a is not None and b is not None and a != b and a.parent == b.parent
    (tmp_path / "link.db").symlink_to(tmp_path / "a.db")
    assert wire.socket_path(tmp_path / "link.db") == a  # one store, one socket, whatever the path's spelling
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("x" * 120)))
    (tmp_path / ("x" * 120)).mkdir()
    short = wire.socket_path(tmp_path / "a.db")  # too long for AF_UNIX there: the short folder in /tmp
    assert short is not None and str(short.parent) == unix.fallback_dir() and short.name == a.name


def test_a_session_left_out_is_left_out_there_too(serving: ResidentServer, filled: Store) -> None:
    q = wire.Query("What happened to the bike chain?", 300, exclude="s2")
    got = client.ask(filled.settings, q)
    assert got is not None and got == context(filled, q)
    assert got["turns"] and all(t["session"] != "s2" for t in got["turns"])


def test_a_project_path_is_made_absolute_before_it_travels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "repo").mkdir()
    q = ask.absolute_project(wire.Query("q", scope="project:repo"))
    assert q.scope == f"project:{tmp_path / 'repo'}"
    home = ask.absolute_project(wire.Query("q", scope="project:~/x"))
    assert home.scope == "project:" + os.path.expanduser("~/x")
    for scope in (None, "locomo:conv-26", "project:", "session-key"):
        assert ask.absolute_project(wire.Query("q", scope=scope)).scope == scope
    assert wire.PROJECT_PREFIX == scopes.PREFIX  # the light side spells the read path's prefix


def test_a_served_context_is_in_the_recall_log_as_the_caller_named_it(serving: ResidentServer, filled: Store) -> None:
    project = "/src/garden"
    q = replace(Q, scope=wire.PROJECT_PREFIX + project, exclude="s-9", client="hook:claude-code", tool="recall")
    got = client.ask(filled.settings, q)
    assert got is not None
    page = recalls.calls(filled.conn, 10, 0)
    assert page.total == 1
    call = page.items[0]
    assert (call.client, call.tool, call.project, call.session) == ("hook:claude-code", "recall", project, "s-9")
    assert call.query == Q.text
    logged = [t.turn_id for t in recalls.call_turns(filled.conn, call.id)]
    assert logged == [t["turn_id"] for t in got["turns"]]


def test_a_query_field_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(ValueError, match=r"query\.client"):
        wire.parse_query({"text": "x", "client": 3})


H = wire.HookAsk("prompt", "codex", "/home/dev/garden", "s9", "Did Ben fix the bike chain?", 200, -1.0)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"event": "stop"}, "request: query.event must be one of session-start, prompt"),
        ({"project": "relative/dir"}, "request: query.project must be an absolute path"),
        ({"budget": -1}, "request: query.budget must be a non-negative integer"),
        ({"bar": "high"}, "request: query.bar must be a number or null"),
        ({"agent": None}, "request: query.agent must be a string"),
    ],
)
def test_hook_refusals(serving: ResidentServer, filled: Store, change: dict[str, object], why: str) -> None:
    identity = wire.store_identity(filled.path)
    assert identity is not None
    req = wire.decode(wire.request(filled.settings, H, identity, client.__version__))
    req["query"] |= change
    assert serving.handle(req) == {"ok": False, "why": why}


def test_a_hook_is_answered_with_the_callers_bar(serving: ResidentServer, filled: Store) -> None:
    """The bar and budget travel with the question: the server's own hook settings do not
    decide what the caller gets; the answer names its best cosine either way."""
    got, why = client.ask_hook(filled.settings, H, 5.0)
    assert got is not None and why == "" and "bike chain" in got["text"] and got["turns"] > 0
    high, _ = client.ask_hook(filled.settings, replace(H, bar=2.0), 5.0)
    assert high is not None and high["text"] == "" and high["best_cosine"] == got["best_cosine"]
    assert client.ask_hook(replace(filled.settings, budget_tokens=700), H, 5.0) == (None, "settings")
    rows = recalls.calls(filled.conn, 10, 0).items
    assert [(r.client, r.tool, r.session) for r in rows] == [
        ("hook:codex", "prompt", "s9")
    ]  # no row for nothing handed


def test_a_hook_without_a_bar_gets_the_reading_embedders_own(
    serving: ResidentServer, filled: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hooks.prompt_bar`` left unset travels as null: the bar is then the one calibrated for
    the embedder that reads the store (``Embedder.prompt_bar``; an embedder folder carries
    it in embedder.json), so a model whose cosines run higher is not let through by
    MiniLM's 0.5; a number the caller set wins over it."""
    asked = replace(H, session="")  # no session: nothing left out as given already, each ask the same
    unset = replace(asked, bar=None)
    got, _ = client.ask_hook(filled.settings, asked, 5.0)
    assert got is not None and got["text"]
    monkeypatch.setattr(filled.embedder, "prompt_bar", got["best_cosine"] + 0.01, raising=False)
    strict, _ = client.ask_hook(filled.settings, unset, 5.0)
    assert strict is not None and strict["text"] == "" and strict["best_cosine"] == got["best_cosine"]
    assert client.ask_hook(filled.settings, asked, 5.0)[0] == got  # the caller's -1 wins
    monkeypatch.setattr(filled.embedder, "prompt_bar", got["best_cosine"] - 0.01, raising=False)
    loose, _ = client.ask_hook(filled.settings, unset, 5.0)
    assert loose is not None and loose["text"] == got["text"]


def raw(filled: Store, argv: list[str], change: dict[str, object] | None = None) -> dict[str, object]:
    """A ``cli`` request as ``resident.quick`` sends it, from the store's folder."""
    return {
        "protocol": unix.PROTOCOL,
        "version": client.__version__,
        "op": "cli",
        "store": wire.store_identity(filled.path),
        "argv": ["--db", str(filled.path), *argv],
        "cwd": str(filled.path.parent),
        "env": {},
        "platform": {k: os.environ.get(k) for k in unix.PLATFORM_ENV},
        "stdin": None,
    } | (change or {})


def test_a_raw_command_line_is_answered_as_the_command_prints_it(filled: Store) -> None:
    srv = ResidentServer(filled, cli=Planner())
    reply = srv.handle(raw(filled, ["query", Q.text, "--json", "--budget", "200"]))
    assert reply["ok"] is True and reply["code"] == 0 and reply["stderr"] == ""
    logged = recalls.calls(filled.conn, 10, 0).items
    assert [(c.client, c.tool, c.query, c.budget) for c in logged] == [("cli", "query", Q.text, 200)]
    assert json.loads(str(reply["stdout"])) == context(filled, Q)
    text = srv.handle(raw(filled, ["query", Q.text]))
    assert str(text["stdout"]).endswith("\n") and str(text["stderr"]).startswith("\n[")
    payload = json.dumps({"prompt": Q.text, "budget": 200})
    hook = srv.handle(raw(filled, ["recall", "--json"], {"stdin": payload}))
    assert json.loads(str(hook["stdout"])) == {"context": context(filled, replace(Q, tool="recall")), "via": "resident"}


@pytest.mark.parametrize(
    ("argv", "change", "why"),
    [
        (["query", "--help"], {}, "command: the command prints help or usage"),
        (["query"], {}, "command: give either a question or --batch FILE"),
        (["query", "q", "--bogus"], {}, "command: arguments: unrecognized arguments: --bogus"),
        (["query", "q", "--no-cable"], {}, "settings"),
        (["query", "q"], {"env": {"LOCALMEM_RETRIEVAL_CABLE_TAU": "0.5"}}, "settings"),
        (["query", "q"], {"env": {"LOCALMEM_RETRIEVAL_NOPE": "1"}}, "command: environment variable"),
        (["query", "q"], {"platform": dict.fromkeys(unix.PLATFORM_ENV, "/elsewhere")}, "command: $HOME"),
        (["--db", "/elsewhere/x.db", "query", "q"], {}, "store"),
        (["recall"], {}, "command: recall without its stdin"),
        (["stats"], {}, "command: not query or recall"),
        (["--version", "query", "q"], {}, "command: not query or recall"),
        (["query", "q"], {"protocol": 1}, "version"),
        (["query", "q"], {"argv": "query q"}, "request: argv must be a list of strings"),
    ],
)
def test_raw_refusals(filled: Store, argv: list[str], change: dict[str, object], why: str) -> None:
    reply = ResidentServer(filled, cli=Planner()).handle(raw(filled, argv, change))
    assert reply["ok"] is False and str(reply["why"]).startswith(why), reply


def test_a_server_without_a_planner_refuses_raw_lines(filled: Store) -> None:
    assert ResidentServer(filled).handle(raw(filled, ["query", "q"])) == {"ok": False, "why": "op"}


def test_warm_does_a_first_callers_work_and_leaves_no_trace(filled: Store) -> None:
    planner = Planner()
    srv = ResidentServer(filled, cli=planner)
    filled.forget_mirrors()
    srv.warm()
    assert planner._parser is not None  # the raw-line parser is built
    assert filled._mirrors._view is not None  # the vector mirrors are loaded
    assert srv.served == 0 and recalls.calls(filled.conn, 10, 0).total == 0  # no call, no recall-log row
    reply = srv.handle(raw(filled, ["query", Q.text, "--json", "--budget", "200"]))
    assert json.loads(str(reply["stdout"])) == context(filled, Q)  # and answers as before


def test_warm_gives_up_on_a_busy_store(filled: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "BUSY_S", 0.05)
    srv = ResidentServer(filled)
    filled.forget_mirrors()
    with srv.lock:  # a caller holds the store
        srv.warm()
    assert filled._mirrors._view is None and srv.served == 0
