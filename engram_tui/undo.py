"""Undo for the memory browser: each change keeps what it replaced, until the screen is left.

Every destructive action is real at once (the agent sees it), and its inverse is kept here: archive and
forget restore the previous status (and, for forget, the content, tags and metadata the database cleared),
an edit restores the old fields, a promotion forgets the promoted copy. Leaving the screen drops the stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class UndoEntry:
    action: str  # archive | forget | edit | pin | promote
    memory_id: str
    label: str
    before: dict[str, Any] = field(default_factory=dict)
    created_id: str | None = None  # promote: the copy made in the higher scope


class UndoStack:
    def __init__(self, limit: int = 50) -> None:
        self._items: list[UndoEntry] = []
        self.limit = limit

    def push(self, entry: UndoEntry) -> None:
        self._items.append(entry)
        del self._items[: -self.limit]

    def pop(self) -> UndoEntry | None:
        return self._items.pop() if self._items else None

    def peek(self) -> UndoEntry | None:
        return self._items[-1] if self._items else None

    def clear(self) -> None:
        self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


def undo_plan(entry: UndoEntry) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The service calls that reverse ``entry``, in order (pure, so it is tested without a UI)."""
    from engram_core.models import MemoryPatch

    b = entry.before
    mid = entry.memory_id
    if entry.action == "archive":
        return [("set_status", (mid, b["status"]), {"reason": "undo archive"})]
    if entry.action == "forget":
        # Status first: while the memory is 'forgotten' the database clears any content written to it.
        status = b["status"] if b["status"] not in ("forgotten",) else "active"
        patch = MemoryPatch(content=b["content"], tags=b.get("tags") or [], metadata=b.get("metadata") or {})
        return [("set_status", (mid, status), {"reason": "undo forget"}), ("update", (mid, patch), {})]
    if entry.action == "edit":
        patch = MemoryPatch(content=b.get("content"), tags=b.get("tags"), importance=b.get("importance"))
        return [("update", (mid, patch), {})]
    if entry.action == "pin":
        return [("update", (mid, MemoryPatch(pinned=b["pinned"])), {})]
    if entry.action == "promote" and entry.created_id:
        return [("forget", (entry.created_id,), {"reason": "promotion undone"})]
    return []
