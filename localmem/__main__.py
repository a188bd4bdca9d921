"""``python -m localmem`` runs the CLI."""

import sys

from localmem.cli import main

sys.exit(main())
