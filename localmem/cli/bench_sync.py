"""``localmem bench sync``: three devices over real Syncthing daemons (converge time,
bytes per turn, identical stores), ``--join N``: a new device folding an N-turn history
against a plain ingest, ``--faults``: key changes and forgets across three devices, and
``--walk``: one pass profiled room by room. Table to stdout;
``--json`` adds the result as one JSON line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from localmem.bench import sync_bench, sync_faults, sync_join, sync_walk
from localmem.bench.preamble import working_folder
from localmem.config import Settings


def add_sync_bench_parser(bsub: Any) -> None:
    c = bsub.add_parser(
        "sync",
        help="three devices syncing over real Syncthing daemons: converge time, bytes per turn, identical stores",
        description="Start one Syncthing daemon per device (127.0.0.1 only, no discovery or relays), three localmem "
        "devices writing at once through their MCP servers (serve --sync) and CLI ingest, one forget, a derived "
        "cue per device; report time to identical stores, bytes on the wire per turn, and a late device's join.",
    )
    c.add_argument("--turns", type=int, default=300, help="turns written in all by the three devices (default 300)")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for convergence (default 300)")
    c.add_argument("--join", type=int, default=0, help="also time a new device folding an N-turn history (0: skip)")
    c.add_argument("--no-syncthing", action="store_true", help="only the --join (or --walk) measurement")
    c.add_argument(
        "--faults",
        action="store_true",
        help="also a round of key changes and forgets across 3 devices (real CLI processes, one folder): turns "
        "lost, forgotten and plaintext bytes left in the folder",
    )
    c.add_argument(
        "--walk",
        action="store_true",
        help="also profile one `localmem sync` pass between two devices: rooms visited, steps back up, transactions",
    )
    c.add_argument("--workdir", type=Path, help="keep daemons' homes, folders and stores here (default: a temp dir)")
    c.add_argument("--json", action="store_true", help="also print the result as one JSON line")
    c.set_defaults(func=cmd_bench_sync)


def cmd_bench_sync(args: argparse.Namespace, settings: Settings) -> int:
    with working_folder(args.workdir, "sync") as work:
        out = _measure(args, work)
    if args.json:
        print(json.dumps(out))
    ok = all(v.get("identical", True) and not v.get("lost") and not v.get("turns_lost") for v in out.values())
    if "faults" in out:
        f = out["faults"]
        ok = ok and not (f["forgotten_bytes_raw"] or f["forgotten_bytes_decrypted"] or f["segments_plaintext"])
    return 0 if ok else 1


def _measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The mesh's and the join's results, each printed as it comes."""
    out: dict[str, Any] = {}
    if not args.no_syncthing:
        out["mesh"] = sync_bench.run(work, args.turns, args.timeout)
        m = out["mesh"]
        print(
            f"devices {m['devices']} (one Syncthing daemon each), turns written {m['turns_written']}, forgotten {m['turns_forgotten']}"
        )
        print(f"writes took {m['write_s']} s; converged: {m['converged']} after {m['converge_s']} s more")
        print(
            f"wire bytes {m['wire_bytes']:,} ({m['wire_bytes_per_turn']} per turn written); segments {m['folder_bytes']:,} bytes"
        )
        print(f"turns per device {m['turns_each']}, lost {m['lost']}, duplicated {m['duplicated']}")
        print(f"derived cues per device {m['derived_cues_each']}, forget set per device {m['forget_set_each']}")
        j = m["join"]
        print(
            f"late device folds the folder: {j['turns']} turns in {j['seconds']} s, {j['cpu_ms_per_turn']} ms CPU per folded turn"
        )
    if args.join:
        out["join"] = sync_join.join(work, args.join)
        j = out["join"]
        print(
            f"join {j['turns']} turns: plain ingest {j['ingest_turns_per_s']} turns/s; fold {j['fold_turns_per_s']} turns/s "
            f"({j['fold_embedding_s']} s of {j['fold_s']} s embedding); identical: {j['identical']}"
        )
    if args.faults:
        out["faults"] = sync_faults.run(work / "faults")
        f = out["faults"]
        print(
            f"faults: {f['devices']} devices, {f['turns_written']} turns written, {f['turns_forgotten']} forgotten; "
            f"lost {f['turns_lost']}; forgotten bytes in the folder {f['forgotten_bytes_raw']} raw, "
            f"{f['forgotten_bytes_decrypted']} decrypted; plaintext segments {f['segments_plaintext']}, "
            f"plaintext bytes {f['plaintext_bytes_raw']}; refused left {f['refused_left']}; identical {f['identical']} "
            f"({f['seconds']} s)"
        )
    if args.walk:
        out["walk"] = sync_walk.run(work / "walk")
        w = out["walk"]
        print(
            f"one sync pass: {w['rooms']} rooms, {w['steps_back_up']} steps back up "
            f"({w['steps_back_up_into_sync']} into localmem.sync), {w['returns']} returns; "
            f"write transactions opened by {w['transactions_opened_by']}"
        )
    return out
