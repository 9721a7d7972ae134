"""Engram core: the memory model, stores, retrieval and the service every front end uses.

This package never imports a UI toolkit (a test holds it to that)."""

__version__ = "0.1.0"
