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
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from localmem.cli import recovery
from localmem.config import Settings, default_db_path
from localmem.errors import ConfigError, LocalmemError, ModelError
from localmem.hooks import install as hook_install
from localmem.hooks import status as hook_status
from localmem.hooks.events import CLIENTS as hook_clients
from localmem.memory import generator, open_store
from localmem.models.llm import (
    NOT_INSTALLED,
    embedded_model_path,
    embedded_model_warning,
    is_embedded_model,
    model_layer_installed,
)
from localmem.models.registry import default_embedder
from localmem.resident import daemon, unix, wire
from localmem.storage.copies import rolling
from localmem.storage.engine import checkpoints, faults
from localmem.storage.engine.keys import (
    KEY_FILE_ENV,
    cipher_name,
    encryption_available,
    is_encrypted,
    no_cipher,
    read_key_file,
)
from localmem.storage.reads import views
from localmem.sync.keys import load_keyring
from localmem.sync.run import health as sync_health
from localmem.util import private
from mcp_server import clientconfig

IMPORT_TIMEOUT_S = 60


class Warn(Exception):
    """Raised by a check that works but needs the user's attention."""


class Fail(Exception):
    """Raised by a check that found something broken; the message says how to fix it."""


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


def model_line(model: str | None, who: str = "the server") -> str:
    """Which model answers, for ``doctor`` and ``mcp-config`` (None: the MCP server has none)."""
    if model is None:
        return f"{who} has no model, so it offers no answer tool and enriches nothing in the background"
    if is_embedded_model(model):
        return f"{who} " + str(embedded_model_warning(model)).replace("answered by", "answers with", 1)
    return f"{who} answers with {model}"


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


def _flag(args: list[str], name: str) -> str | None:
    """The value of ``--name X`` or ``--name=X`` in an argument list."""
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a[len(name) + 1 :]
    return None


def mcp_entry(client: str, path: Path | None = None) -> str:
    """Check the localmem entry of one client's config file (see the module docstring)."""
    target = path or clientconfig.config_path(client)
    fix = f"fix: `localmem mcp-config --client {client} --install` from the environment localmem is installed in"
    try:
        entry = clientconfig.installed_entry(client, target)
    except Exception as exc:
        raise Fail(f"{exc}; {fix}") from exc
    if entry is None:
        return f"not set up ({target} has no localmem entry; `localmem mcp-config --client {client} --install` adds it)"
    command = entry.get("command")
    args = entry.get("args") or []
    env = entry.get("env") or {}
    if not isinstance(command, str) or not command or not isinstance(args, list) or not isinstance(env, dict):
        raise Fail(f"{target}: the localmem entry has no usable 'command'/'args'; {fix}")
    args = [str(a) for a in args]
    notes: list[str] = [f"{target}"]
    exe = _executable(command, fix)
    module = _flag(args, "-m")
    if module is not None:
        _can_import(exe, module, {str(k): str(v) for k, v in env.items()}, fix)
        notes.append(f"{exe} imports {module}")
    else:
        notes.append(f"runs {exe}")
    db = _flag(args, "--db") or env.get("LOCALMEM_DB")
    notes.append(_entry_db(db, fix))
    if module is not None and db is not None and Path(db).expanduser().is_file():
        notes.append(_entry_opens(exe, db, args, {str(k): str(v) for k, v in env.items()}, fix))
    if (folder := _flag(args, "--sync")) is not None:
        notes.append(_entry_sync(Path(folder), args, fix))
    model = _flag(args, "--model") or env.get("LOCALMEM_MODEL")
    if model is not None and not is_embedded_model(model) and not Path(model).expanduser().is_file():
        raise Fail(f"its model {model} does not exist; {fix} (with --model PATH)")
    notes.append(model_line(model))
    hints = []
    if model is None or is_embedded_model(model):
        hints.append(f"`localmem mcp-config --client {client} --model PATH.gguf --install` sets one")
    if clientconfig.is_legacy(args):
        hints.append(
            f"an entry of an earlier version (`-m {clientconfig.LEGACY_MODULE}`): it works, but `localmem query` "
            f"is not answered through its server's socket; `localmem mcp-config --client {client} --install` "
            "refreshes it"
        )
    if hints:
        raise Warn("; ".join(notes) + "".join(f" ({hint})" for hint in hints))
    return "; ".join(notes)


def _executable(command: str, fix: str) -> str:
    if not os.path.isabs(command):
        found = shutil.which(command)
        if found is None:
            raise Fail(f"its command {command!r} is not on PATH (and a client may not have this shell's PATH); {fix}")
        return found
    if not Path(command).is_file() or not os.access(command, os.X_OK):
        raise Fail(f"its interpreter {command} does not exist (a virtual environment moved or deleted?); {fix}")
    return command


def _can_import(exe: str, module: str, env: dict[str, str], fix: str) -> None:
    code = f"import importlib.util, sys; sys.exit(0 if importlib.util.find_spec({module!r}) else 3)"
    try:
        proc = subprocess.run(
            [exe, "-c", code],
            # as a client would start it: the entry's env, none of this shell's PYTHON* settings, and
            # not this folder (`-c` puts the working folder on sys.path)
            env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}, **env},
            cwd=Path.home(),
            capture_output=True,
            timeout=IMPORT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Fail(f"its interpreter {exe} does not run ({exc}); {fix}") from exc
    if proc.returncode != 0:
        raise Fail(f"{exe} cannot import {module} (localmem is not installed there); {fix}")


def _entry_opens(exe: str, db: str, args: list[str], env: dict[str, str], fix: str) -> str:
    """Open the entry's store as its server will (its interpreter, env and key file); a
    key file it names must be usable (mode 600) even while the store is plaintext."""
    key_file = _flag(args, "--key-file")
    for named in (key_file, env.get(KEY_FILE_ENV)):
        if named:
            try:
                read_key_file(named)
            except ConfigError as exc:
                raise Fail(f"the entry's {exc}; {fix} (with --key-file FILE)") from exc
    cmd = [exe, "-m", "localmem", "--db", db, *(["--key-file", key_file] if key_file else []), "stats", "--json"]
    try:
        proc = subprocess.run(
            cmd,
            env={**{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "LOCALMEM_"))}, **env},
            cwd=Path.home(),
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Fail(f"its interpreter {exe} could not open the store ({exc}); {fix}") from exc
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        hint = "an encrypted store needs `--key-file FILE` on mcp-config" if "encrypted" in why else "see the message"
        raise Fail(f"the entry cannot open its store: {why}; {fix} ({hint})")
    return "the entry opens its store"


def _entry_sync(folder: Path, args: list[str], fix: str) -> str:
    """The entry's ``--sync`` folder and key files, as its server will read them."""
    identities = [Path(a) for f, a in itertools.pairwise(args) if f == "--sync-identity"]
    passphrase = _flag(args, "--sync-passphrase-file")
    recipients = [a for f, a in itertools.pairwise(args) if f == "--sync-recipient"]
    try:
        keys = load_keyring(Path(passphrase) if passphrase else None, identities, recipients, None)
    except Exception as exc:
        raise Fail(f"its sync key cannot be used: {exc}; {fix}") from exc
    how = "encrypted" if keys.encrypts else "in plaintext (no sync key)"
    if not folder.is_dir():
        raise Warn(f"syncs {how} with {folder}, which does not exist yet (the server waits for it)")
    return f"syncs {how} with {folder}"


def _entry_db(db: str | None, fix: str) -> str:
    if db is None:
        return f"database: none given, the server's default ({default_db_path()} unless its config file says otherwise)"
    path = Path(db).expanduser()
    if not path.is_absolute():
        raise Fail(f"its database {db} is a relative path (the client's working folder decides where it is); {fix}")
    if path.is_file():
        return f"database {path} ({path.stat().st_size / 1e6:.1f} MB)"
    if path.exists():
        raise Fail(f"its database {path} is not a file; {fix} (with --db PATH)")
    parent = next((p for p in path.parents if p.exists()), None)
    if parent is None or not parent.is_dir() or not os.access(parent, os.W_OK):
        raise Fail(f"its database {path} cannot be created (no writable folder above it); {fix} (with --db PATH)")
    return f"database {path} does not exist yet (the server creates it on first use)"
