"""The planted-secret corpus (222 secrets of 37 kinds, one of each of the 94 kinds in 14
forms of ``localmem.bench.secrets_corpus``, 20 private spans) through every way
capture brings text in: `localmem capture` of the agents' folders, the Stop hook, the
prompt hook (its prompt is read, never stored), `localmem watch` following a growing
transcript (the real watchdog), and MCP `remember` in a real MCP client session over
stdio. Then `localmem sync DIR`, `localmem export` and `localmem backup`: no planted value
is in any file of the store's folder, the sync folder (each segment's body decompressed),
the export or the backup. And a
store written by an older version (the guard off) is cleaned by `localmem redact --scan`:
counted by kind first (--dry-run), then nothing of it left in any file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

from localmem.bench import agent_logs, secrets_corpus
from tests.util.secret_corpus import Planted, corpus, needles, private_spans

FORMS = secrets_corpus.corpus(1, seed=29)
FORM_NEEDLES = {s.text: s.needles for s in FORMS}
PLANTED = [*corpus(6), *(Planted(s.kind, s.needles[0], s.text) for s in FORMS)]
PRIVATE = private_spans(20)


def needles_of(p: Planted) -> list[str]:
    """What must not be stored of ``p``: the forms corpus names its own needles."""
    return list(FORM_NEEDLES.get(p.text, ())) or needles(p)


def readable(f: Path, opened: list[Path]) -> bytes:
    """A file's bytes; a sync segment's with its zlib body decompressed after them (the
    header says whether it is encrypted: these are not), noted in ``opened``."""
    data = f.read_bytes()
    if f.suffix == ".seg" and data.startswith(b"LMSEG/"):
        first = data.index(b"\n") + 1
        second = data.index(b"\n", first)
        assert json.loads(data[first:second])["encrypted"] is None
        data += zlib.decompress(data[second + 1 :])
        opened.append(f)
    return data


CWD = "/home/dev/vault"


def chunks(n: int) -> list[list[Planted]]:
    return [PLANTED[i::n] for i in range(n)]


def said(i: int, batch: list[Planted]) -> str:
    private = f" <private>{PRIVATE[i % len(PRIVATE)]} stays with me</private>"
    return "Notes:" + private + "\n" + "\n".join(p.text for p in batch)


def planted_transcript(path: Path, session: str, part: list[Planted], exchanges: int = 6) -> None:
    """A Claude Code transcript whose prompts carry ``part`` (and a private span each)."""
    per = [part[i::exchanges] for i in range(exchanges)]
    lines = [line for i in range(exchanges) for line in agent_logs.exchange(session, CWD, i, said(i, per[i]))]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", "utf-8")


def env(home: Path | None = None) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k not in ("LOCALMEM_MODEL", "CODEX_HOME", "CLAUDE_CONFIG_DIR")}
    if home is not None:
        out["HOME"] = str(home)
    return out


def run(*argv: str, home: Path | None = None, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run([sys.executable, *argv], input=stdin, capture_output=True, timeout=600, env=env(home))
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc


def leaks(*places: Path, opened: list[Path] | None = None) -> dict[str, list[str]]:
    """Planted values found, by file, in every file under ``places`` (sync segments
    decompressed: ``readable``)."""
    found: dict[str, list[str]] = {}
    for place in places:
        files = [place] if place.is_file() else sorted(p for p in place.rglob("*") if p.is_file())
        for f in files:
            data = readable(f, [] if opened is None else opened)
            hits = [n for p in PLANTED for n in needles_of(p) if n.encode() in data]
            hits += [m for m in PRIVATE if m.encode() in data]
            if hits:
                found[str(f)] = hits
    return found


async def remember(db: Path, part: list[Planted]) -> int:
    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server", "--db", str(db)], env=env())
    stored = 0
    async with Client(params, read_timeout_seconds=120) as c:
        for i, batch in enumerate([part[j : j + 6] for j in range(0, len(part), 6)]):
            res = await c.call_tool("remember", {"turns": [{"text": said(i, batch), "speaker": "me"}], "project": CWD})
            assert not res.is_error, res.content
            stored += int((res.structured_content or {})["new_turns"])
    return stored


def test_planted_secrets_reach_no_file_by_any_capture_path(tmp_path: Path) -> None:
    capture_part, stop_part, watch_part, mcp_part = chunks(4)
    home = tmp_path / "home"
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "memory.db"
    logs = tmp_path / "logs"

    # capture: the agents' default folder
    old = home / ".claude" / "projects" / "-home-dev-vault" / "00000000-0000-4000-8000-00000000c0de.jsonl"
    planted_transcript(old, "00000000-0000-4000-8000-00000000c0de", capture_part)
    os.utime(old, (time.time() - 86400, time.time() - 86400))  # yesterday's session: read to its end
    got = json.loads(
        run("-m", "localmem", "--db", str(db), "capture", "--json", "--only", "claude-code", home=home).stdout
    )
    assert got["new"] == 18 and not got["errors"], got

    # the Stop hook, and a prompt hook whose prompt holds secrets (read, not stored)
    log = logs / "stop.jsonl"
    planted_transcript(log, "00000000-0000-4000-8000-0000000057a9", stop_part)
    payload = {"session_id": "00000000-0000-4000-8000-0000000057a9", "transcript_path": str(log), "cwd": CWD}
    hook = ["-m", "localmem.hooks", "--db", str(db)]
    assert run(*hook, "stop", "--client", "claude-code", stdin=json.dumps(payload).encode()).stdout == b""
    prompt = {"session_id": "s", "cwd": CWD, "prompt": said(0, stop_part[:8])}
    run(*hook, "prompt", "--client", "claude-code", stdin=json.dumps(prompt).encode())

    # watch: a transcript that grows while `localmem watch` follows it
    root = logs / "watched"
    (root / "-home-dev-vault").mkdir(parents=True)
    grown = root / "-home-dev-vault" / "00000000-0000-4000-8000-00000000aa7c.jsonl"
    grown.write_text("", "utf-8")
    cmd = [sys.executable, "-m", "localmem", "--db", str(db), "watch", "--only", "claude-code"]
    cmd += ["--dir", f"claude-code={root}", "--json", "--final-after", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env())
    try:
        assert proc.stdout is not None
        first = json.loads(proc.stdout.readline())
        assert first["event"] == "started"
        source = tmp_path / "source.jsonl"
        planted_transcript(source, "00000000-0000-4000-8000-00000000aa7c", watch_part)
        with grown.open("a", encoding="utf-8") as fh:
            for line in source.read_text("utf-8").splitlines():
                fh.write(line + "\n")
                fh.flush()
                time.sleep(0.02)
        new = 0
        deadline = time.monotonic() + 120
        while new < 18 and time.monotonic() < deadline:
            event: dict[str, Any] = json.loads(proc.stdout.readline())
            new += int(event.get("report", {}).get("new", 0)) if event["event"] == "ingested" else 0
        assert new == 18
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)

    # MCP remember in a real client session
    assert anyio.run(remember, db, mcp_part) == len(range(0, len(mcp_part), 6))

    sync_dir = tmp_path / "sync"
    sync_dir.mkdir()
    run("-m", "localmem", "--db", str(db), "sync", str(sync_dir))
    export = tmp_path / "export.jsonl"
    run("-m", "localmem", "--db", str(db), "export", "--out", str(export))
    backup = tmp_path / "backup.db"
    run("-m", "localmem", "--db", str(db), "backup", str(backup))
    assert any(sync_dir.rglob("*")) and export.stat().st_size > 0 and backup.stat().st_size > 0
    segments: list[Path] = []
    assert leaks(folder, sync_dir, export, backup, opened=segments) == {}
    assert segments  # the segments were read decompressed: what they carry was searched
    assert any(b"[secret: " in readable(f, []) for f in segments)  # decompressed, the redacted text is there
    text = export.read_text("utf-8")
    assert "Notes:" in text and text.count("[secret: ") >= 200  # what is around them is kept


def test_redact_scan_cleans_what_an_older_version_stored(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    db = folder / "memory.db"
    log = tmp_path / "old.jsonl"
    planted_transcript(log, "00000000-0000-4000-8000-000000000001", PLANTED, exchanges=12)
    older = {**env(), "LOCALMEM_INGEST_REDACT": "false"}  # what versions before the guard stored
    ingest = subprocess.run(
        [sys.executable, "-m", "localmem", "--db", str(db), "ingest", str(log), "--json"],
        capture_output=True,
        env=older,
    )
    assert ingest.returncode == 0, ingest.stderr
    before = leaks(folder)
    assert len({n for hits in before.values() for n in hits}) > 200  # the search can find them

    dry = json.loads(run("-m", "localmem", "--db", str(db), "redact", "--scan", "--dry-run", "--json").stdout)
    assert dry["applied"] is None and dry["found"]["places"]["turns"] == 12
    assert len(dry["found"]["kinds"]) >= 20 and dry["found"]["kinds"]["private span"] == 12
    assert len(dry["found"]["turn_ids"]) == 12  # the turns named, by id
    shown = run("-m", "localmem", "--db", str(db), "redact", "--scan", "--dry-run").stdout
    assert b"turns: " in shown and b"aws-access-key" in shown
    assert not [n for p in PLANTED for n in needles_of(p) if n.encode() in shown]  # never the secret itself
    assert leaks(folder)  # a dry run changes nothing

    done = json.loads(run("-m", "localmem", "--db", str(db), "redact", "--scan", "--json").stdout)
    assert done["applied"]["turns_rewritten"] == 12 and done["applied"]["vacuumed"], done
    assert any("sync segments" in x for x in done["out_of_reach"])
    assert leaks(folder) == {}
    again = json.loads(run("-m", "localmem", "--db", str(db), "redact", "--scan", "--dry-run", "--json").stdout)
    assert again["found"]["places"] == {}
    # the turns kept their place: the session reads in the same order, now redacted
    export = tmp_path / "after.jsonl"
    run("-m", "localmem", "--db", str(db), "export", "--out", str(export))
    rows = [json.loads(x) for x in export.read_text("utf-8").splitlines() if x.strip()]
    prompts = [r["text"] for r in rows if r.get("text", "").startswith("Step ")]
    assert [p.split(":")[0] for p in prompts] == [f"Step {i}" for i in range(12)]
    assert all("[secret: " in p and not any(m in p for m in PRIVATE) for p in prompts)
    assert leaks(export) == {}
