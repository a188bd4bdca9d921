"""``localmem doctor``: checks that say what works and what does not, each with detail.

Each check is independent and never raises: a failure is reported, not thrown. A check
is ``ok``, ``ok`` with ``warn`` (works, but not as a user would want: the embedded test
model answers, no model is configured, a client will create the database on first use),
or failed. Besides the installation itself, every MCP client entry that ``mcp-config
--install`` wrote (Claude Desktop, VS Code in this folder, Cursor) is checked: its
interpreter exists and can import localmem's server, its database exists (or where it
will be created) and opens with the entry's environment and key file as its server will
open it, its sync folder and sync key files, its model file exists, and which model will
answer; a broken entry says the command that fixes it, and one of an earlier version
(``python -m mcp_server``: it works, without the CLI's fast entry) the command that
refreshes it. A store that has synced shows its
refused segments. ``hook runs`` names what the hooks did and the last failure, and where
their status went when it could not be written beside the store; ``store folder`` fails
when the store's folder takes no new file. ``resident`` says which process serves the
store's socket (a daemon a query or a hook started: its pid, to stop it with ``kill``);
``backups`` how many rolling backups there are, the newest's age, their disk cost and
folder (``storage.copies.rolling``).
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from localmem.cli import recovery
from localmem.cli.doctor_mcp import Fail, Warn, mcp_entry, model_line
from localmem.config import Settings
from localmem.errors import LocalmemError, ModelError
from localmem.hooks import install as hook_install
from localmem.hooks import status as hook_status
from localmem.hooks.events import CLIENTS as hook_clients
from localmem.memory import generator, open_store
from localmem.models.llm import (
    NOT_INSTALLED,
    embedded_model_path,
    is_embedded_model,
    model_layer_installed,
)
from localmem.models.registry import default_embedder
from localmem.resident import daemon, unix, wire
from localmem.storage.copies import rolling
from localmem.storage.engine import checkpoints, faults
from localmem.storage.engine.keys import (
    cipher_name,
    encryption_available,
    is_encrypted,
    no_cipher,
)
from localmem.storage.reads import views
from localmem.sync.run import health as sync_health
from localmem.util import private
from mcp_server import clientconfig


def _check(name: str, fn: Callable[[], str]) -> dict[str, Any]:
    try:
        return {"name": name, "ok": True, "warn": False, "detail": fn()}
    except Warn as exc:
        return {"name": name, "ok": True, "warn": True, "detail": str(exc)}
    except Fail as exc:
        return {"name": name, "ok": False, "warn": False, "detail": str(exc)}
    except LocalmemError as exc:  # its own words, never its class; a store's with the way back (cli.recovery)
        return {"name": name, "ok": False, "warn": False, "detail": recovery.explain(exc) or str(exc)}
    except Exception as exc:
        return {"name": name, "ok": False, "warn": False, "detail": f"{type(exc).__name__}: {exc}"}


def run_checks(settings: Settings) -> list[dict[str, Any]]:
    def sqlite() -> str:
        e = views.engine()
        line = f"SQLite {e.sqlite}, apsw {e.apsw}, sqlite-vec {e.sqlite_vec}, FTS5 ok; {cipher_name()}"
        if not encryption_available():
            raise Warn(f"{line}; {no_cipher()}")
        return line

    def embedder() -> str:
        emb = default_embedder(settings.embedder)
        emb.embed(["warm up"])
        texts = [f"I went hiking with my sister on day {i} of the trip." for i in range(64)]
        t0 = time.perf_counter()
        emb.embed(texts)
        rate = len(texts) / (time.perf_counter() - t0)
        return f"{emb.model_id} ({emb.dim}-d), {rate:.0f} sentences/s"

    def database() -> str:
        if not settings.db.exists():
            return f"{settings.db} does not exist yet (created on first ingest)"

        with open_store(settings) as store, faults.faults(settings.db):  # damage: StoreCorrupt, said by _check
            s, damage = store.stats(), views.damage(store.conn)
        if damage:  # pages stats never read
            raise Fail(recovery.damaged(settings.db, damage[0]))
        line = (
            f"{settings.db} ({'encrypted' if is_encrypted(settings.db) else 'not encrypted'}): "
            f"schema v{s['schema_version']}, {s['turns']} turns, {sum(s['cues'].values())} cues, "
            f"{sum(s['edges'].values())} edges; layers: statement cues + temporal/semantic edges"
            + (
                "; extracted cues"
                if s["cues"]["triple"] or s["cues"]["keyword"]
                else "; no extracted cues yet (no model run)"
            )
            + (
                "; Litestream replicates it now (its writers leave checkpoints to Litestream)"
                if checkpoints.live(settings.db)
                else ""
            )
        )
        if checkpoints.crashed(settings.db):
            wal = Path(f"{settings.db}-wal")
            size = wal.stat().st_size / 1e6 if wal.exists() else 0.0
            raise Warn(
                f"{line}; its Litestream was killed: localmem leaves the WAL ({size:.1f} MB) to it and takes no "
                "checkpoint until `localmem replicate` runs again (or `localmem replicate --release` gives it up)"
            )
        return line

    def model() -> str:
        if not model_layer_installed():  # the lean install: fine without a model, not with one configured
            if settings.model:
                raise Fail(f"the model {settings.model} is configured, but {NOT_INSTALLED}")
            raise Warn(NOT_INSTALLED)
        if not settings.model:
            try:
                embedded_model_path()
            except ModelError as exc:  # the lean install: no model at all is fine, but say what it costs
                raise Warn(f"no chat model configured; enrich, answer and explore need one: {exc}") from exc
        gen = generator(settings)
        info = gen.info()
        probe = gen.probe()
        where = (
            f"GPU offload: {info['on_gpu']} of {info['layers']}"
            if info["gpu_offload_supported"] and info["n_gpu_layers"] != 0
            else "CPU only (this llama.cpp build cannot offload to a GPU)"
            if not info["gpu_offload_supported"]
            else "CPU (n_gpu_layers=0 by setting)"
        )
        detail = (
            f"{info['model']}: {where}; context {info['n_ctx']} of {info['n_ctx_train']} tokens; "
            f"{info['threads']} threads; {probe['tokens_per_s']} generated tokens/s"
        )
        if is_embedded_model(settings.model):
            raise Warn(f"{detail}; {model_line(settings.model or 'default', 'answer')}")
        return f"{detail}; {model_line(str(gen.path), 'answer')}"

    def sync() -> str:
        if not settings.db.exists():
            return "this store has not synced"
        with open_store(settings) as store, faults.faults(settings.db):
            found = sync_health(store)
        if found is None:
            return "this store has not synced"
        refused = found["refused"]
        line = (
            f"device {found['device']}; {found['unexported_changes']} changes not exported yet; "
            f"{len(found['incomplete'])} segments still arriving"
        )
        if refused:
            why = "; ".join(f"{r['device']}/{r['name']}: {r['reason']}" for r in refused[:3])
            raise Warn(f"{line}; {len(refused)} segments REFUSED (nothing of them is folded): {why}")
        return line + "; none refused"

    checks = [
        _check("storage", sqlite),
        _check("embedder", embedder),
        _check("model", model),
        _check("database", database),
        _check("sync", sync),
    ]
    checks += [_check(f"mcp {client}", functools.partial(mcp_entry, client)) for client in clientconfig.CLIENTS]
    checks += [_check(f"hooks {client}", functools.partial(hook_entries, client)) for client in hook_clients]
    checks.append(_check("hook runs", functools.partial(hook_runs, settings)))
    checks.append(_check("store folder", functools.partial(store_folder, settings.db)))
    checks.append(_check("resident", functools.partial(resident, settings.db)))  # a daemon: its pid
    checks.append(_check("backups", functools.partial(backups, settings)))
    checks.append(_check("private", functools.partial(private_store, settings.db)))
    return checks


def private_store(db: Path) -> str:
    """A warning, with the one-line fix, when other users can read the store (``util.private``)."""
    ok, line = private.store_privacy(db)
    if not ok:
        raise Warn(line)
    return line


def backups(settings: Settings) -> str:
    """The rolling backups in one line; a warning when none was taken for two intervals."""
    line, late = rolling.summary(settings.db, settings.backups, datetime.now(UTC))
    if late:
        raise Warn(line)
    return line


def resident(db: Path) -> str:
    """Who serves the store's socket (``daemon.describe``); a warning naming why no process
    can (``unix.unserved``: no socket path fits, a folder not private, a daemon's failure)."""
    problem = unix.unserved(wire.runtime_dir(), db)
    if problem is not None:
        raise Warn(problem)
    return daemon.describe(db)


def hook_entries(client: str, path: Path | None = None) -> str:
    """localmem's hook entries in one agent's settings: installed, and runnable (their
    interpreter, their key file, and for Codex whether it trusts them: ``hooks.install``)."""
    found = hook_install.inspect(client, path)
    if not found.events:
        return f"not installed ({found.path}; `localmem hooks install --client {client}` adds them)"
    if found.problems:  # Codex's untrusted entries among them: Codex never runs those
        raise Fail(f"{found.path}: " + "; ".join(found.problems))
    trusted = " (trusted in Codex's /hooks)" if found.trust else ""
    return f"{found.path}: " + ", ".join(found.events) + trusted


def hook_runs(settings: Settings) -> str:
    """What the hooks did: a failure is counted and named here, never shown to the agent.
    The last run failed: FAIL; failures before a run that worked: warn."""
    ran = hook_status.read(settings.db)
    line = hook_status.summary(ran)
    if ran.get("unwritable"):  # the runs since went to this user's state folder: say so, whatever they did
        raise Fail(line)
    last, err = ran.get("last_run") or {}, ran.get("last_error")
    if err:
        named = f"last error {err.get('at')} ({err.get('client')} {err.get('event')}): {err.get('kind')}: {err.get('message', '')}"
        if last.get("outcome") == "failed":
            raise Fail(f"{line}; {named}")
        raise Warn(f"{line}; {named}")
    if ran.get("unwritable_before"):
        raise Warn(line)
    return line


def store_folder(db: Path) -> str:
    """The store's folder takes a new file (the store's WAL, a backup, the hooks' status):
    a file made and removed there, since permission bits say nothing on a file system
    mounted read-only, or to root."""
    folder = db.expanduser().absolute().parent
    while not folder.exists() and folder != folder.parent:  # the store is made there on first ingest
        folder = folder.parent
    try:
        fd, probe = tempfile.mkstemp(prefix=".localmem-probe-", dir=folder)
    except OSError as exc:
        raise Fail(
            f"{folder} is not writable ({exc.strerror or exc}): nothing can be stored, and the hooks record "
            f"their runs in {hook_status.fallback_path(db)} instead; make it writable or move the store (--db)"
        ) from exc
    os.close(fd)
    os.unlink(probe)
    return f"{folder} is writable"
