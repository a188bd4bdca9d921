"""``localmem models``: the embedders localmem can use on this machine (``models/discover``).

Lists the built-in embedder and the embedding models found in Ollama's and LM Studio's
folders, with the ``--model`` / ``--embedder`` value that loads each; ``--all`` adds the
models found there that cannot embed (chat models), with why.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from localmem.cli.common import Subparsers, print_json
from localmem.config import Settings
from localmem.models import discover

HELP = "list the embedders localmem can use, and those found in Ollama's and LM Studio's folders"


def add_models(sub: Subparsers) -> None:
    c = sub.add_parser(
        "models",
        help=HELP,
        description="List the embedders localmem can use: the built-in MiniLM, and the GGUF embedding models and "
        "ONNX embedder folders found in Ollama's ($OLLAMA_MODELS or ~/.ollama/models) and LM Studio's "
        "(~/.lmstudio/models, ~/.cache/lm-studio/models) folders. Nothing is loaded or downloaded. "
        "Use one with `localmem reembed --model SPEC`.",
    )
    c.add_argument("--all", action="store_true", help="also list the models found that cannot embed, with why")
    c.add_argument("--json", action="store_true", help="print the list as JSON")
    c.set_defaults(func=cmd_models)


def cmd_models(args: argparse.Namespace, settings: Settings) -> int:
    found = [f for f in discover.everything() if args.all or f.embedding]
    if args.json:
        print_json({"configured": settings.embedder, "models": [asdict(f) for f in found]})
        return 0
    print(f"{'name':<40} {'source':<9} {'format':<6} {'dim':>5}  spec (--model)")
    for f in found:
        dim = str(f.dim) if f.dim else "?"
        line = f"{f.name:<40} {f.source:<9} {f.format:<6} {dim:>5}  {f.spec}"
        print(line + (f"  [{f.note}]" if f.note else ""))
    print(f"\nconfigured embedder: {settings.embedder}; move a store with `localmem reembed --model SPEC`")
    return 0
