"""``python -m engram_core.cli``."""

import sys

from .commands import main

sys.exit(main())
