"""The web view's writes over HTTP, without a browser: every new action behind the gate (a
POST with the token header, same origin), a forget that only happens as previewed, the
same effects as ``localmem forget`` (the real CLI, on a copy of the same store), and two
devices syncing through a folder with ``localmem sync``: a forget and a redaction made in
the web view reach the other device, tombstones and forget set included."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from localmem.config import Settings
from localmem.memory import open_store
from tests.helpers.ui import TOKEN, Server, call, cookie, count, turn_id

ROOT = Path(__file__).resolve().parents[2]


def cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done


def test_every_write_needs_a_post_with_the_token_header(server: Server, built: Settings) -> None:
    tid = turn_id(built, "bike:0")
    posts = {
        "/api/forget/preview": {"selection": {"turns": [tid]}},
        "/api/forget": {"selection": {"turns": [tid]}, "digest": "x"},
        "/api/redact": {"turn_id": tid, "start": 0, "end": 2},
        "/api/recalls/clear": {},
    }
    for path, body in posts.items():
        raw = json.dumps(body).encode()
        assert server.request("GET", path, cookie(server))[0] in (404, 405), path
        assert server.request("POST", path, cookie(server), raw)[0] == 403, path  # the cookie alone
        assert server.request("POST", path, {"X-Localmem-Token": TOKEN}, raw)[0] == 403, path  # the header alone
        foreign = {**cookie(server), "X-Localmem-Token": TOKEN, "Origin": "http://evil.example"}
        assert server.request("POST", path, foreign, raw)[0] == 403, path
    for path in ("/api/find?q=bike", "/api/timeline", "/api/months", "/api/facets", "/api/recalls", "/api/session/1"):
        assert server.request("GET", path)[0] == 403, path
        assert server.request("GET", path, cookie(server))[0] == 200, path
    assert count(built, "SELECT count(*) FROM turns WHERE id = ?", tid) == 1


def test_a_forget_happens_only_as_previewed(server: Server, built: Settings) -> None:
    sid = count(built, "SELECT id FROM sessions WHERE key = 'bike-again'")
    status, p = call(server, "POST", "/api/forget/preview", {"selection": {"session": sid}})
    assert status == 200 and (p["turns"], p["sessions"], p["sessions_emptied"]) == (3, 1, 1)
    assert "no undo" in p["undo"] and "other devices" in p["reach"] and "backup" in p["not_reached"]
    status, out = call(server, "POST", "/api/forget", {"selection": {"session": sid}})
    assert status == 400 and "digest" in out["error"]
    status, out = call(server, "POST", "/api/forget", {"selection": {"session": sid}, "digest": "0" * 32})
    assert status == 409 and "look again" in out["error"]
    assert count(built, "SELECT count(*) FROM turns WHERE session_id = ?", sid) == 3
    for bad in ({}, {"turns": []}, {"turns": ["x"]}, {"filter": {}}, {"filter": {"colour": "red"}}, {"session": True}):
        assert call(server, "POST", "/api/forget/preview", {"selection": bad})[0] == 400, bad
    assert call(server, "POST", "/api/forget/preview", {"selection": {"turns": [10**12]}})[0] == 404
    status, out = call(server, "POST", "/api/forget", {"selection": {"session": sid}, "digest": p["digest"]})
    assert status == 200 and out == {"forgotten": 3, "sessions_emptied": 1}
    assert count(built, "SELECT count(*) FROM sessions WHERE id = ?", sid) == 0


def _chat(path: Path) -> Path:
    lines = []
    for day, (key, texts) in enumerate(
        {
            "kitchen": ("The spare key is under the blue pot.", "Thanks, I'll water the plants.", "Back on Sunday."),
            "travel": ("My passport number is X1234567, keep it safe.", "Stored.", "Flight leaves at nine."),
            "garden": ("Basil needs water every morning.", "And the tomatoes?", "Twice a week is enough."),
        }.items(),
        start=1,
    ):
        for i, t in enumerate(texts):
            speaker = "Ana" if i % 2 == 0 else "Ben"
            lines.append({"session": key, "speaker": speaker, "text": t, "timestamp": f"2024-03-0{day}T10:0{i}:00"})
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def _state(db: Path) -> dict[str, Any]:
    with open_store(Settings(db=db)) as s:
        c = s.conn
        return {
            "turns": sorted(str(r[0]) for r in c.execute("SELECT hash FROM turns")),
            "sessions": sorted(str(r[0]) for r in c.execute("SELECT key FROM sessions")),
            "forgotten": sorted(str(r[0]) for r in c.execute("SELECT hash FROM forgotten")),
            "journal": sorted((str(k), str(key)) for k, key in c.execute("SELECT kind, key FROM changes")),
            "cues": c.one("SELECT count(*) FROM cues")[0],
            "edges": sorted(tuple(r) for r in c.execute("SELECT kind, count(*) FROM edges GROUP BY kind")),
            "vectors": c.one("SELECT count(*) FROM turn_vec")[0],
        }


def _serve(db: Path) -> Server:
    settings = Settings(db=db)
    return Server(settings, opener=lambda: open_store(settings))


def _forget(srv: Server, selection: dict[str, Any]) -> dict[str, Any]:
    status, p = call(srv, "POST", "/api/forget/preview", {"selection": selection})
    assert status == 200, p
    status, out = call(srv, "POST", "/api/forget", {"selection": selection, "digest": p["digest"]})
    assert status == 200, out
    return dict(out)


def test_forget_in_the_web_view_is_localmem_forget(tmp_path: Path) -> None:
    """The same store twice (one ingest, copied): `localmem forget` on one, the web view on
    the other; the two end identical, journal and forget set included."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    cli(a, "ingest", str(_chat(tmp_path / "chat.jsonl")))
    shutil.copyfile(a, b)
    cli(a, "forget", "--session", "travel")
    cli(a, "forget", "--before", "2024-03-01T10:02:00")
    srv = _serve(b)
    try:
        sid = int(call(srv, "GET", "/api/find?q=passport")[1]["results"][0]["session_id"])
        assert _forget(srv, {"session": sid})["forgotten"] == 3
        assert _forget(srv, {"filter": {"end": "2024-03-01T10:02:00"}})["forgotten"] == 2
    finally:
        srv.stop()
    assert _state(a) == _state(b)
    assert len(_state(b)["forgotten"]) == 5


def test_two_devices_sync_a_forget_and_a_redaction_made_in_the_web_view(tmp_path: Path) -> None:
    a, b, folder = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "sync"
    folder.mkdir()
    cli(a, "ingest", str(_chat(tmp_path / "chat.jsonl")))
    cli(a, "sync", str(folder))
    cli(b, "sync", str(folder))
    assert _state(b)["turns"] == _state(a)["turns"]
    srv = _serve(a)
    try:
        found = call(srv, "GET", "/api/find?q=passport%20number&match=words")[1]["results"][0]
        text = found["text"]
        start = text.index("X1234567")
        status, red = call(
            srv,
            "POST",
            "/api/redact",
            {"turn_id": found["turn_id"], "start": start, "end": start + 8, "hash": "0" * 32},
        )
        assert status == 409  # not the turn the page showed
        turn = call(srv, "GET", f"/api/turn/{found['turn_id']}")[1]
        body = {"turn_id": found["turn_id"], "start": start, "end": start + 8, "hash": turn["hash"]}
        status, red = call(srv, "POST", "/api/redact", body)
        assert status == 200 and red["text"] == "My passport number is [secret: manual], keep it safe."
        kitchen = call(srv, "GET", "/api/find?q=spare%20key&match=words")[1]["results"][0]["session_id"]
        assert _forget(srv, {"session": kitchen})["forgotten"] == 3
    finally:
        srv.stop()
    cli(a, "sync", str(folder))
    cli(b, "sync", str(folder))
    sa, sb = _state(a), _state(b)
    assert sb["turns"] == sa["turns"] and sb["forgotten"] == sa["forgotten"] and len(sb["forgotten"]) == 4
    assert "kitchen" not in sb["sessions"]
    with open_store(Settings(db=b)) as s:
        texts = [str(r[0]) for r in s.conn.execute("SELECT text FROM turns")]
    assert "My passport number is [secret: manual], keep it safe." in texts
    assert not [t for t in texts if "X1234567" in t or "spare key" in t]
    assert "X1234567" not in cli(b, "query", "passport number").stdout
    # the tombstones keep them out of B: an old export ingested there again brings nothing back
    cli(b, "ingest", str(tmp_path / "chat.jsonl"))
    assert _state(b)["turns"] == sb["turns"]
