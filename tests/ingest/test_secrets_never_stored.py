"""Planted secrets never reach the store: 222 synthetic secrets of 37 kinds, one of each
of the 94 kinds in 14 forms of ``localmem.bench.secrets_corpus`` (command lines, .netrc,
URL-encoded, base64 in a Kubernetes Secret, wrapped keys, prose, ...) and 20
``<private>`` spans, planted in a Claude Code transcript, a Codex rollout, a Gemini CLI
chat, a VS Code chat session log and a generic JSON Lines log (in prompts, replies, tool
calls and tool results),
ingested with the real CLI, and written again through ``Memory.write``; then every file in
the store's folder (the database, its -wal and -shm) and a ``localmem export`` are searched
for every planted value: none is there. The same run with the guard switched off finds
them, so the search can fail."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import localmem
from localmem.bench import secrets_corpus
from localmem.config import Settings
from localmem.errors import InputError
from localmem.records import TurnIn
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder
from tests.util.secret_corpus import Planted, corpus, needles, private_spans

FORMS = secrets_corpus.corpus(1, seed=23)
FORM_NEEDLES = {s.text: s.needles for s in FORMS}
PLANTED = [*corpus(6), *(Planted(s.kind, s.needles[0], s.text) for s in FORMS)]
PRIVATE = private_spans(20)


def needles_of(p: Planted) -> list[str]:
    """What must not be stored of ``p``: the forms corpus names its own needles."""
    return list(FORM_NEEDLES.get(p.text, ())) or needles(p)


def run(db: Path, *args: str, env: dict[str, str] | None = None) -> dict:  # type: ignore[type-arg]
    cmd = [sys.executable, "-m", "localmem", "--db", str(db), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if "--json" in args else {}


def groups(n: int = 4) -> list[list[Planted]]:
    return [PLANTED[i : i + n] for i in range(0, len(PLANTED), n)]


def said(i: int, batch: list[Planted]) -> str:
    private = f" and <private>{PRIVATE[i % len(PRIVATE)]} is mine alone</private>" if i % 3 == 0 else ""
    return f"Note {i}{private}:\n" + "\n".join(p.text for p in batch)


def claude_code(path: Path) -> None:
    base = {"sessionId": "9d2f6c1e-0000-4000-8000-00000000abcd", "cwd": "/w", "gitBranch": "main", "version": "2.1.0"}
    lines = []
    for i, batch in enumerate(groups()):
        ts = f"2026-01-05T10:{i // 60:02d}:{i % 60:02d}.000Z"
        common = {**base, "isSidechain": False, "timestamp": ts}
        lines.append(
            {**common, "type": "user", "uuid": f"u{i}", "message": {"role": "user", "content": said(i, batch)}}
        )
        blocks = [
            {"type": "text", "text": "Checked: " + batch[0].text},
            {"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": f"echo '{batch[-1].text}'"}},
        ]
        for j, block in enumerate(blocks):
            msg = {"id": f"msg_{i}", "type": "message", "role": "assistant", "content": [block]}
            lines.append({**common, "type": "assistant", "uuid": f"a{i}.{j}", "message": msg})
        result = [{"type": "tool_result", "tool_use_id": f"t{i}", "content": "\n".join(p.text for p in batch)}]
        lines.append({**common, "type": "user", "uuid": f"r{i}", "message": {"role": "user", "content": result}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def codex(path: Path) -> None:
    meta = {"id": "0199ffff-0000-7000-8000-000000000001", "timestamp": "2026-01-05T10:00:00Z", "cwd": "/w"}
    lines = [{"timestamp": "2026-01-05T10:00:00Z", "type": "session_meta", "payload": meta}]
    for i, batch in enumerate(groups()):
        ts = f"2026-01-05T11:{i // 60:02d}:{i % 60:02d}Z"
        user = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": said(i, batch)}]}
        reply = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": batch[1].text}]}
        args = json.dumps({"command": ["bash", "-lc", batch[-1].text]})
        call = {"type": "function_call", "name": "shell", "arguments": args, "call_id": f"c{i}"}
        for item in (user, reply, call):
            lines.append({"timestamp": ts, "type": "response_item", "payload": item})
        event = {"type": "user_message", "message": said(i, batch)}
        lines.append({"timestamp": ts, "type": "event_msg", "payload": event})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def gemini(path: Path) -> None:
    lines: list[dict] = [{"sessionId": "g-secrets", "projectHash": "0" * 64, "startTime": "2026-01-05T12:00:00Z"}]  # type: ignore[type-arg]
    for i, batch in enumerate(groups()):
        ts = f"2026-01-05T12:{i // 60:02d}:{i % 60:02d}Z"
        lines.append({"id": f"u{i}", "timestamp": ts, "type": "user", "content": [{"text": said(i, batch)}]})
        call = {"id": f"c{i}", "name": "run_shell_command", "args": {"command": batch[-1].text}, "timestamp": ts}
        reply = {"id": f"g{i}", "timestamp": ts, "type": "gemini", "content": batch[2 % len(batch)].text}
        lines.extend([reply, {**reply, "toolCalls": [call]}])
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def vscode(path: Path) -> None:
    """A VS Code chat session's mutation log (localmem/ingest/vscode.py): each request pushed,
    its response parts pushed (markdown, a terminal call, a tool's input), then finished."""
    head = {"version": 3, "sessionId": "v-secrets", "creationDate": 1767600000000, "requests": []}
    lines: list[dict] = [{"kind": 0, "v": head}]  # type: ignore[type-arg]
    for i, batch in enumerate(groups()):
        req = {"requestId": f"request_{i}", "timestamp": 1767600000000 + i * 1000, "message": {"text": said(i, batch)}}
        lines.append({"kind": 2, "k": ["requests"], "v": [{**req, "response": [], "modelState": {"value": 0}}]})
        terminal = {"kind": "terminal", "commandLine": {"original": f"echo '{batch[-1].text}'"}}
        grep = {"kind": "input", "rawInput": {"query": batch[0].text}}
        parts = [
            {"value": "Checked: " + batch[1 % len(batch)].text},
            {"kind": "toolInvocationSerialized", "toolId": "run_in_terminal", "toolSpecificData": terminal},
            {"kind": "toolInvocationSerialized", "toolId": "grep_search", "toolSpecificData": grep},
        ]
        lines.append({"kind": 2, "k": ["requests", i, "response"], "v": parts})
        lines.append({"kind": 1, "k": ["requests", i, "modelState"], "v": {"value": 1}})
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))


def generic(path: Path) -> None:
    rows = [{"session": "notes", "speaker": "Sam", "text": said(i, b)} for i, b in enumerate(groups())]
    path.write_text("".join(json.dumps(x) + "\n" for x in rows))


def leaks(folder: Path, *extra: Path) -> dict[str, list[str]]:
    """Planted values found, by file: every file of the store's folder, and ``extra``."""
    found: dict[str, list[str]] = {}
    for f in [*sorted(p for p in folder.iterdir() if p.is_file()), *extra]:
        data = f.read_bytes()
        hits = [n for p in PLANTED for n in needles_of(p) if n.encode() in data]
        hits += [m for m in PRIVATE if m.encode() in data]
        if hits:
            found[f.name] = hits
    return found


def test_planted_secrets_are_in_no_file_of_the_store(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    files = {"claude-code": logs / "cc.jsonl", "codex": logs / "rollout.jsonl", "gemini": logs / "session-g.jsonl"}
    files["vscode"] = logs / "7e3a1c9d.jsonl"
    files["jsonl"] = logs / "notes.jsonl"
    for make, f in zip((claude_code, codex, gemini, vscode, generic), files.values(), strict=True):
        make(f)
    assert sum(n.encode() in f.read_bytes() for f in files.values() for p in PLANTED for n in needles_of(p)) > 750
    assert sum(n.encode() in files["vscode"].read_bytes() for p in PLANTED for n in needles_of(p)) > 150
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "memory.db"
    for fmt, f in files.items():
        report = run(db, "ingest", str(f), "--json")
        assert report["format"] == fmt and report["new"] >= len(groups()), report
    with localmem.open(db) as mem:
        res = mem.write([TurnIn(text=said(i, b), speaker="me") for i, b in enumerate(groups())], "written")
        assert res.new_turns == len(groups())
        stored = [str(r[0]) for r in mem.store.conn.execute("SELECT text FROM turns")]
    export = tmp_path / "export.jsonl"
    run(db, "export", "--out", str(export))
    assert leaks(folder, export) == {}
    # What is around the secrets is kept, with a placeholder naming each kind.
    text = export.read_text()
    assert "DATABASE_URL=postgres://app:[secret: password]@db.internal:5432/prod" in text
    assert "ran: echo" in text and "[secret: private-key]" in text
    kinds = {k.split("]")[0] for t in stored for k in t.split("[secret: ")[1:]}
    assert len(kinds) >= 20, kinds


def test_with_the_guard_off_the_search_finds_them(tmp_path: Path) -> None:
    log = tmp_path / "notes.jsonl"
    generic(log)
    folder = tmp_path / "store"
    folder.mkdir()
    run(folder / "memory.db", "ingest", str(log), "--json", env={"LOCALMEM_INGEST_REDACT": "false"})
    found = leaks(folder)
    assert found and len({n for hits in found.values() for n in hits}) > 100


def test_the_write_path_drops_private_spans_and_refuses_nothing_else(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Store(db, embedder=HashEmbedder(), settings=Settings(db=db)) as store:
        with pytest.raises(InputError, match=r"no text outside its <private> spans"):
            store.write([TurnIn(text="<private>the door code is 4821</private>")], "s")
        res = store.write([TurnIn(text="Lunch at noon <private>with Dana</private> on Friday.")], "s")
        stored = store.conn.execute("SELECT text FROM turns WHERE id = ?", (res.turn_ids[0],)).fetchone()[0]
    assert stored == "Lunch at noon on Friday."
