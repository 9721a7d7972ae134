"""The ``engram`` command line: a client of the daemon, and the only importer of the TUI."""

from .commands import main

__all__ = ["main"]
