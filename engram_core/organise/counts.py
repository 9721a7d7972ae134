"""True totals for the organise queues, so a front end can say "100 of 1,120" instead of stopping at its limit."""

from __future__ import annotations

from typing import Literal

from ..api import api
from ..core import MemoryCore


@api
def count_contradictions(core: MemoryCore, project: str | None = None,
                         status: Literal["open", "resolved", "all"] = "open", session: str | None = None) -> int:
    """How many contradictions ``list_contradictions`` would list without its limit (same scopes, same status)."""
    total = 0
    for store in core.scopes.stores("all", project, session):
        cond = "true" if status == "all" else "status = $s"
        rows = store.q1(f"SELECT count() AS n FROM contradiction_queue WHERE {cond} GROUP ALL", {"s": status})
        total += int(rows[0]["n"]) if rows else 0
    return total
