"""``python -m engram_core.daemon``: what clients run to start the daemon."""

import sys

from .server import main

sys.exit(main())
