"""``localmem ui``: serve the web view of the memory on 127.0.0.1 (``localmem.ui``)."""

from __future__ import annotations

import argparse

from localmem.cli.common import Subparsers
from localmem.config import Settings
from localmem.ui.app import serve


def add_ui(sub: Subparsers) -> None:
    c = sub.add_parser(
        "ui",
        help="browse the memory in a local web page: ask with a trace, find, timeline, what was injected, forget, redact",
        description="Serve a web view of the memory on 127.0.0.1 only. Prints a URL with a secret token "
        "(as notebook servers do); the page and its API refuse requests without it, and requests whose "
        "Host or Origin is not this machine's loopback.",
    )
    c.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default 0: any free port)")
    c.add_argument("--open", action="store_true", help="open the page in the default web browser")
    c.set_defaults(func=cmd_ui)


def cmd_ui(args: argparse.Namespace, settings: Settings) -> int:
    return serve(settings, port=args.port, open_browser=args.open)
