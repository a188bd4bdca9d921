"""``localmem`` (the console script) and ``python -m localmem``: the command.

A ``query`` or ``recall`` is first sent raw to the store's resident process
(``localmem.resident.quick``: the standard library only, no settings loaded); the full CLI
(``localmem.cli``: argparse, apsw, the settings) is imported only when that did not answer,
and then does everything as it does without a resident process (docs/architecture.md,
"Start-up").
"""

from __future__ import annotations

import sys

FAST = ("query", "recall")  # resident.quick.COMMANDS: a command line naming neither skips the fast entry


def main() -> int:
    argv = sys.argv[1:]
    if any(arg in FAST for arg in argv):
        from localmem.resident import quick  # lazy: the socket client (~5 ms), only for a query or a recall

        code = quick.run(argv)
        if code is not None:
            return code
    from localmem.cli import main as cli_main  # lazy: the full command, only when no resident process answered

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
