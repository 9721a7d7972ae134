"""Identifiers: ULIDs for memories and sessions, so ids sort by time and are unique across scopes.

The service takes its id source at construction (``EngramService(ids=...)``), as it takes its clock: the default
is ``ulid`` (wall-clock milliseconds and 80 random bits); ``SequentialIds`` gives the same ids on every run,
for reproducible builds (the TUI's demo fixture, snapshots, tests) without patching this module.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from datetime import datetime

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

IdSource = Callable[[], str]
"""A new unique id at each call (26 Crockford base32 characters)."""


def _encode(value: int) -> str:
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def ulid(ts_ms: int | None = None) -> str:
    """A 26-character ULID: 48 bits of milliseconds, 80 random bits, Crockford base32."""
    ms = int(time.time() * 1000) if ts_ms is None else ts_ms
    return _encode((ms << 80) | int.from_bytes(os.urandom(10), "big"))


class SequentialIds:
    """ULIDs whose time part is a fixed instant and whose random part is a counter (1, 2, 3…): the same calls
    give the same ids, in increasing order. Thread-safe."""

    def __init__(self, at: datetime, start: int = 1) -> None:
        self._ms = int(at.timestamp() * 1000)
        self._next = start
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            n, self._next = self._next, self._next + 1
        return _encode((self._ms << 80) | n)


def is_ulid(text: str) -> bool:
    return len(text) == 26 and all(c in _CROCKFORD for c in text.upper())
