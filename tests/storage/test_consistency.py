"""Reads stay consistent while other processes write and forget (issue 12, item 1).

Real processes on one database file: a writer (``Store.write`` in a loop), a forgetter
(``forget`` by session, always the newest session, so the freed ids are given out
again at once) and readers running ``reconstruct`` and the toolkit for a few seconds.
Every read must succeed, and every turn it returns must be a row that existed: the
writer logs each row it writes (id, session, date, text), and a returned turn must be
one of those exact tuples, inside the read's scope and as_of. Plus a deterministic
test of a reused turn id. Run a role by hand with ``python -m tests.storage.test_consistency``.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from localmem import toolkit
from localmem.config import Settings
from localmem.errors import NotFound
from localmem.records import SessionIn, TurnIn
from localmem.retrieval.reconstruct import reconstruct
from localmem.storage.write.store import Store
from tests.helpers.fakes import HashEmbedder

ROOT = Path(__file__).resolve().parents[2]
WORDS = ["garden", "bicycle", "chain", "tomato", "violin", "harbor", "lantern", "pepper", "glacier", "orchid"]
Row = tuple[int, str, str | None, str]  # turn id, session key, timestamp, text


def _open(path: Path) -> Store:
    return Store(path, embedder=HashEmbedder(), settings=Settings(db=path))


def _date(n: int) -> str:
    return f"{2020 + n % 5}-{1 + n % 12:02d}-{1 + n % 28:02d}T10:00:00"


def _session(serial: int, rng: random.Random) -> SessionIn:
    """A session whose every turn names its session and date in its text."""
    key, ts = f"k{serial}", _date(serial)
    turns = tuple(
        TurnIn(text=f"Note {serial}.{i} in {key} on {ts[:10]}: {' '.join(rng.sample(WORDS, 3))}.", timestamp=ts)
        for i in range(rng.randint(1, 3))
    )
    return SessionIn(key=key, turns=turns)


def _logged(store: Store, sessions: list[SessionIn]) -> list[Row]:
    rows: list[Row] = []
    for sess, res in zip(sessions, store.write_sessions(sessions), strict=True):
        for t, tid in zip(sess.turns, res.turn_ids, strict=True):
            rows.append((tid, sess.key, t.timestamp, t.text))
    return rows


# -- the roles, each run in its own process ---------------------------------------------


def _writer(store: Store, until: float, rng: random.Random) -> dict[str, Any]:
    rows: list[Row] = []
    serial = 1000
    while time.monotonic() < until:
        serial += 1
        rows += _logged(store, [_session(serial, rng)])
    return {"rows": rows}


def _forgetter(store: Store, until: float, rng: random.Random) -> dict[str, Any]:
    forgotten = 0
    while time.monotonic() < until:
        time.sleep(rng.uniform(0.01, 0.05))
        newest = store.conn.execute("SELECT key FROM sessions ORDER BY id DESC LIMIT 1").fetchone()
        if newest is not None:
            forgotten += store.forget(session=str(newest[0]))
    return {"forgotten": forgotten}


def _filter(store: Store, rng: random.Random) -> tuple[str | None, str | None]:
    """A scope (a session key that exists now) or an as_of date, or neither."""
    kind = rng.choice(["none", "scope", "as_of"])
    if kind == "scope":
        row = store.conn.execute("SELECT key FROM sessions ORDER BY random() LIMIT 1").fetchone()
        return (str(row[0]) if row else None), None
    if kind == "as_of":
        return None, _date(rng.randrange(60))
    return None, None


def _ref(ref: toolkit.TurnRef) -> list[Any]:
    return [ref.turn_id, ref.session, ref.timestamp, ref.text]


def _reader(store: Store, until: float, rng: random.Random, use_toolkit: bool) -> dict[str, Any]:
    """Reads in a loop; records every returned turn with the filter it was read under.
    NotFound is a right answer for a turn id taken from an earlier read (it may have
    been forgotten since); any other exception is a failure."""
    seen: list[list[Any]] = []  # [turn id, session, ts, text, scope, as_of]
    errors: list[str] = []
    reads = gone = 0
    last: list[int] = []
    while time.monotonic() < until:
        query = " ".join(rng.sample(WORDS, 2))
        scope, as_of = _filter(store, rng)
        try:
            reads += 1
            if not use_toolkit:
                ctx = reconstruct(store, query, 400, as_of=as_of, scope=scope)
                seen += [[e.turn_id, e.session, e.timestamp, e.text, scope, as_of] for e in ctx.turns]
                last = [e.turn_id for e in ctx.turns] or last
                continue
            hits = toolkit.search_cues(store, query, as_of=as_of, scope=scope, limit=5).items
            for h in hits:
                assert as_of is None or h.timestamp is None or h.timestamp <= as_of, (h, as_of)
            last = [h.cue.turn_id for h in hits] or last
            if scope:
                seen += [[*_ref(r), scope, None] for r in toolkit.session_turns(store, scope, limit=20).items]
            seen += [
                [*_ref(r), None, None] for r in toolkit.turns_between(store, "2020-01-01", as_of or "2025-12-31").items
            ]
            if hits:
                seen += [[*_ref(r), None, None] for r in toolkit.cue_turns(store, hits[0].cue.cue_id).items]
            if last:
                tid = rng.choice(last)
                ctx_t = toolkit.turn_context(store, tid)
                refs = [ctx_t.turn, *(n.turn for n in ctx_t.neighbours), *(k.turn for k in ctx_t.links)]
                refs.append(toolkit.turn_cues(store, tid).items[0].turn)
                seen += [[*_ref(r), None, None] for r in refs]
                full = toolkit.turn(store, tid)
                seen.append([full["turn_id"], full["session"], full["timestamp"], full["text"], None, None])
        except NotFound:
            gone += 1
        except Exception:
            errors.append(traceback.format_exc())
    return {"seen": seen, "errors": errors, "reads": reads, "gone": gone}


def main(role: str, db: str, seconds: float, out: str, seed: int) -> None:
    store = _open(Path(db))
    rng = random.Random(seed)
    print("ready", flush=True)
    sys.stdin.readline()  # the go signal: every process starts its loop together
    until = time.monotonic() + seconds
    if role == "writer":
        result = _writer(store, until, rng)
    elif role == "forgetter":
        result = _forgetter(store, until, rng)
    else:
        result = _reader(store, until, rng, use_toolkit=role == "toolkit")
    store.close()
    Path(out).write_text(json.dumps(result), "utf-8")


# -- the tests ---------------------------------------------------------------------------


def _run(tmp_path: Path, seconds: float) -> tuple[dict[str, dict[str, Any]], list[Row]]:
    db = tmp_path / "shared.db"
    store = _open(db)
    rng = random.Random(5)
    seeded = _logged(store, [_session(n, rng) for n in range(40)])
    store.close()
    roles = ["writer", "forgetter", "reconstruct", "toolkit"]
    procs = {
        role: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.storage.test_consistency",
                role,
                str(db),
                str(seconds),
                str(tmp_path / role),
                str(i),
            ],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, role in enumerate(roles)
    }
    try:
        for p in procs.values():
            assert p.stdout is not None and p.stdout.readline().strip() == "ready", p.communicate()[1]
        for p in procs.values():
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for role, p in procs.items():
            _out, err = p.communicate(timeout=seconds + 120)
            assert p.returncode == 0, f"{role} failed:\n{err}"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    results = {role: json.loads((tmp_path / role).read_text("utf-8")) for role in roles}
    return results, seeded + [(int(t), str(k), ts, str(x)) for t, k, ts, x in results["writer"]["rows"]]


def test_reads_are_consistent_while_other_processes_write_and_forget(tmp_path: Path) -> None:
    results, written = _run(tmp_path, seconds=4.0)
    versions = {(tid, key, ts, text) for tid, key, ts, text in written}  # every row that ever existed
    ids = [tid for tid, *_ in written]
    assert len(ids) - len(set(ids)) > 0, "no turn id was reused: the test did not exercise id reuse"
    assert results["forgetter"]["forgotten"] > 0
    store = _open(tmp_path / "shared.db")  # a separate connection, after the run
    now = {
        (int(r[0]), str(r[1]), r[2], str(r[3]))
        for r in store.conn.execute(
            "SELECT t.id, s.key, t.ts, t.text FROM turns t JOIN sessions s ON s.id = t.session_id"
        )
    }
    store.close()
    assert now <= versions, "the writers' log misses rows the database has"
    for role in ("reconstruct", "toolkit"):
        res = results[role]
        assert res["errors"] == [], f"{role}: {len(res['errors'])} of {res['reads']} reads failed:\n{res['errors'][0]}"
        assert res["reads"] >= 10 and res["seen"], res["reads"]
        for tid, key, ts, text, scope, as_of in res["seen"]:
            assert (tid, key, ts, text) in versions, f"{role} returned a turn no row ever held: {tid} {key} {ts} {text}"
            assert scope is None or key == scope, f"{role}: turn {tid} of {key} returned for scope {scope}"
            assert as_of is None or ts is None or ts <= as_of, f"{role}: turn {tid} of {ts} returned as of {as_of}"


def test_reused_turn_id_takes_its_own_session_and_date(tmp_path: Path) -> None:
    """A reader's mirror is synced; another connection forgets the newest turn and
    writes one that takes its id (SQLite gives out max(id) + 1 again): reads with
    scope and as_of use the new turn's session and date, not the forgotten one's."""
    path = tmp_path / "m.db"
    reader, writer = _open(path), _open(path)
    writer.write([TurnIn(text="We planted tomato seedlings in the garden.")], "alpha", started_at="2024-01-01")
    writer.write([TurnIn(text="The harbor lantern was lit at dusk.")], "gamma", started_at="2025-03-01")
    old = writer.write([TurnIn(text="The tandem bicycle needs a new chain.")], "beta", started_at="2024-06-01")
    assert reconstruct(reader, "tandem bicycle chain", 400, scope="beta").turns[0].turn_id == old.turn_ids[0]
    writer.forget(session="beta")
    new = writer.write([TurnIn(text="The tandem bicycle chain snapped again.")], "gamma", started_at="2025-03-01")
    assert new.turn_ids == old.turn_ids  # the id was reused
    scoped = reconstruct(reader, "tandem bicycle chain", 400, scope="gamma")
    hit = [e for e in scoped.turns if e.turn_id == new.turn_ids[0]]
    assert hit and hit[0].session == "gamma" and hit[0].timestamp == "2025-03-01T00:00:00"
    assert all(e.session == "gamma" for e in scoped.turns)
    early = reconstruct(reader, "tandem bicycle chain", 400, as_of="2024-12-31")
    assert new.turn_ids[0] not in {e.turn_id for e in early.turns}  # said in 2025
    assert all(e.timestamp is None or e.timestamp <= "2024-12-31T00:00:00" for e in early.turns)
    hits = toolkit.search_cues(reader, "tandem bicycle", as_of="2024-12-31").items
    assert new.turn_ids[0] not in {h.cue.turn_id for h in hits}
    reader.close()
    writer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
