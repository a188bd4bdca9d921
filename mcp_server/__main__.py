"""``python -m mcp_server``: the same as the ``localmem-mcp`` script."""

import sys

from mcp_server.serve import main

if __name__ == "__main__":
    sys.exit(main())
