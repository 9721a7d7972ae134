"""The check that no raw query writes the memory table (the mirrors follow only storage's named writes).

Every memory write bumps the store's memory change counter (schema 004: an event on the table). With checking on
(`check_raw_writes(True)`, or ENGRAM_RAW_WRITE_GUARD=1: the test suite sets it), `ScopeStore.q` reads the counter
before and after the statements, under the connection's lock so that nothing else writes in between, and raises
`RawMemoryWrite` when they changed it, if the caller is a module of engram_core outside storage (a test may write
rows as it likes). Off (the default), `q` costs nothing more.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any, cast

_checking = os.environ.get("ENGRAM_RAW_WRITE_GUARD") == "1"
COUNTER = "RETURN (SELECT VALUE n FROM ONLY mirror_meta:memory)"


class RawMemoryWrite(RuntimeError):
    """A statement run through `ScopeStore.q` wrote the memory table behind the mirrors' back."""


def check_raw_writes(on: bool) -> None:
    global _checking
    _checking = on


def checking() -> bool:
    return _checking


def _caller() -> str:
    """The module that called into storage."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("engram_core.storage"):
        frame = frame.f_back  # type: ignore[assignment]
    return "" if frame is None else str(frame.f_globals.get("__name__", ""))


def internal_only() -> None:
    """`Database.write` is storage's own path (no counter check): refuse it to a core module outside storage."""
    caller = str(sys._getframe(2).f_globals.get("__name__", ""))  # who called `write`
    if caller.startswith("engram_core.") and not caller.startswith("engram_core.storage"):
        raise RawMemoryWrite(f"{caller} used storage's own query path (`write`); outside storage, use `q`")


def run_checked(db: Any, sql: str, params: Mapping[str, Any] | None) -> list[Any]:
    """``db.write(sql, params)``, raising when a module of engram_core wrote the memory table with it."""
    if not _caller().startswith("engram_core."):
        return db.write(sql, params)  # type: ignore[no-any-return]
    with db.drain_lock, db.conn.lock:
        db.write1(COUNTER)  # applies the pending bookkeeping, which writes memory rows, first
        before = db.conn.run(db.namespace, db.database, COUNTER)[-1]
        got = db.write(sql, params)
        after = db.conn.run(db.namespace, db.database, COUNTER)[-1]
    if before != after:
        raise RawMemoryWrite(
            f"a raw query wrote the memory table of {db.namespace}/{db.database} (use a storage method, which "
            f"keeps the mirrors in step): {' '.join(sql.split())[:200]}"
        )
    return cast(list[Any], got)
