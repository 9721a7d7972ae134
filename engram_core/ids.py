"""Identifiers: ULIDs for memories and sessions, so ids sort by time and are unique across scopes."""

from __future__ import annotations

import os
import time

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid(ts_ms: int | None = None) -> str:
    """A 26-character ULID: 48 bits of milliseconds, 80 random bits, Crockford base32."""
    ms = int(time.time() * 1000) if ts_ms is None else ts_ms
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        chars.append(_CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def is_ulid(text: str) -> bool:
    return len(text) == 26 and all(c in _CROCKFORD for c in text.upper())
