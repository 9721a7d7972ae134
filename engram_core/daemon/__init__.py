"""The daemon: the one process that owns the stores, serving the service over a Unix socket (transport only)."""

from .server import Daemon, main, serve

__all__ = ["Daemon", "main", "serve"]
