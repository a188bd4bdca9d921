"""``python -m localmem.cli`` runs the CLI, as ``localmem`` and ``python -m localmem`` do."""

import sys

from localmem.cli import main

sys.exit(main())
