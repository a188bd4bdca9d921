"""CABLE's command-line switches, shared by the commands that read and build memory.

Read-time (query, answer, serve, bench): ``--no-cable`` and the expansion's tau, theta
and budget. Build-time (worker, enrich, bench --model): ``--no-cable`` (leave
antecedent jobs queued; the default), ``--cable`` (build them), ``--no-subtraction``, ``--no-verification``,
``--generic-queries``, Kb, Kh, Nq and the verification batch. Flags override the
config file's ``[retrieval]`` / ``[cable]`` values; absent flags change nothing. The
defaults in the help texts are read from ``localmem.config`` (docs/cable.md explains them).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from localmem.config import Settings, check
from localmem.config import default as _d


def add_read_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("CABLE expansion (read time)")
    g.add_argument("--no-cable", action="store_true", help="no antecedent expansion")
    g.add_argument(
        "--cable-tau",
        type=float,
        help=f"seed threshold: cosine(query, seed) >= tau (default {_d('retrieval.cable_tau')})",
    )
    g.add_argument(
        "--cable-theta",
        type=float,
        help=f"novelty threshold: cosine to the result < theta (default {_d('retrieval.cable_theta')})",
    )
    g.add_argument(
        "--cable-budget", type=int, help=f"most antecedent turns added (default {_d('retrieval.cable_budget')})"
    )
    g.add_argument(
        "--cable-share",
        type=float,
        help=f"most of the token budget antecedent turns may take (default {_d('retrieval.cable_share')})",
    )
    g.add_argument(
        "--cable-keep-p",
        type=float,
        help=f"never replace turns at least this likely to be evidence (default {_d('retrieval.cable_keep_p')}; 1.0: any)",
    )


def add_build_flags(p: argparse.ArgumentParser, *, with_off: bool = True) -> None:
    g = p.add_argument_group("CABLE construction (antecedent links at write time)")
    if with_off:
        g.add_argument("--no-cable", action="store_true", help="do not build antecedent links (jobs stay queued)")
        g.add_argument(
            "--cable",
            action="store_true",
            help="build antecedent links (off by default; see docs/cable.md)",
        )
    g.add_argument("--no-subtraction", action="store_true", help="verify all of H, not only H minus B")
    g.add_argument("--no-verification", action="store_true", help="link every candidate without asking the model")
    g.add_argument("--generic-queries", action="store_true", help="topical queries instead of the typed prompts")
    g.add_argument("--kb", type=int, help=f"direct neighbours B of the new turn (default {_d('cable.kb')})")
    g.add_argument("--kh", type=int, help=f"turns per antecedent query (default {_d('cable.kh')})")
    g.add_argument("--nq", type=int, help=f"antecedent queries per turn, at most (default {_d('cable.nq')})")
    g.add_argument(
        "--verify-batch", type=int, help=f"candidates per verification call (default {_d('cable.verify_batch')})"
    )


def apply(args: argparse.Namespace, settings: Settings) -> Settings:
    """``settings`` with the CABLE flags present in ``args``."""
    r, c = settings.retrieval, settings.cable
    read: dict[str, Any] = {
        "cable_tau": getattr(args, "cable_tau", None),
        "cable_theta": getattr(args, "cable_theta", None),
        "cable_budget": getattr(args, "cable_budget", None),
        "cable_share": getattr(args, "cable_share", None),
        "cable_keep_p": getattr(args, "cable_keep_p", None),
    }
    build: dict[str, Any] = {
        "kb": getattr(args, "kb", None),
        "kh": getattr(args, "kh", None),
        "nq": getattr(args, "nq", None),
        "verify_batch": getattr(args, "verify_batch", None),
    }
    if getattr(args, "no_subtraction", False):
        build["subtraction"] = False
    if getattr(args, "no_verification", False):
        build["verification"] = False
    if getattr(args, "generic_queries", False):
        build["generic_queries"] = True
    if getattr(args, "cable", False):
        build["enabled"] = True
    if getattr(args, "no_cable", False):
        read["cable"] = False
        build["enabled"] = False
    r = replace(r, **{k: _flag(f"retrieval.{k}", v) for k, v in read.items() if v is not None})
    c = replace(c, **{k: _flag(f"cable.{k}", v) for k, v in build.items() if v is not None})
    return replace(settings, retrieval=r, cable=c)


def _flag(key: str, value: Any) -> Any:
    """A flag's value checked like the config file's, the error naming the flag."""
    name = key.partition(".")[2]
    flag = "--" + name.replace("_", "-")
    return check(key, value, flag)
