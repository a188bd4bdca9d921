"""``localmem`` (the console script) and ``python -m localmem``: the command.

A ``query`` or ``recall`` is first sent raw to the store's resident process
(``localmem.resident.quick``: the standard library only, no settings loaded); the full CLI
(``localmem.cli``: argparse, apsw, the settings) is imported only when that did not answer,
and then does everything as it does without a resident process (docs/architecture.md,
"Start-up").
"""

from __future__ import annotations

import sys

from localmem.resident import quick


def main() -> int:
    code = quick.run(sys.argv[1:])
    if code is not None:
        return code
    from localmem.cli import main as cli_main  # lazy: the full command, only when no resident process answered

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
