"""A store's memory mirror: what recall filters, scores and returns without a database round trip.

Three parts, all of the memories that are neither forgotten nor superseded: the memory summaries (`MemorySummary`), the search
index (search_index.py: BM25 postings and the vector matrix) with a content-hash index for exact duplicates, and
the full rows (row_mirror.py). The database stays the source of truth. Nothing here reads statements: every
storage method that writes the memory table tells the mirror what it changed (`put`, `patch`, `forget`,
`drop_rows`), and a write the mirror cannot follow reloads it (`ScopeStore.reload_mirror`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..retrieval.search_index import SearchIndex
from .locks import MIRROR, OrderedLock
from .row_mirror import FIELDS as ROW_FIELDS
from .row_mirror import RowMirror
from .values import decode_vector, key_of, plain

# Memories the mirror holds no longer: their rows stay in the database.
GONE = ("forgotten", "superseded")


@dataclass
class MemorySummary:
    """What recall needs to filter and score a memory without a database round trip."""

    memory_type: str
    tags: list[str]
    importance: float
    access_count: int
    half_life_days: float
    status: str
    pinned: bool
    last_accessed_at: datetime
    created_at: datetime
    session_id: str | None
    episode_id: str | None
    content_hash: str
    content: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class MemoryMirror:
    """Memory summaries, search index, hash index and full rows of one store's memories."""

    def __init__(self, dim: int) -> None:
        self.index = SearchIndex(dim)
        self.summaries: dict[str, MemorySummary] = {}
        self.by_hash: dict[str, str] = {}  # content_hash → key, for O(1) exact-duplicate checks
        # Held by every change to the mirror; a caller reading ``light`` whole holds it too.
        self.lock = OrderedLock(MIRROR, "ScopeStore.mirror_lock")
        self.rows = RowMirror()

    @property
    def dim(self) -> int:
        return getattr(self.index, "dim", 384)

    def reset(self) -> None:
        """Empty, as a store with no memories."""
        with self.lock:
            self.index = SearchIndex(self.dim)
            self.summaries.clear()
            self.by_hash.clear()
            self.rows.clear()

    def put(self, row: Mapping[str, Any]) -> None:
        """A memory row as written or read back (light fields at least; the full row when it has every field)."""
        key = key_of(row["id"])
        status = row.get("status", "created")
        with self.lock:
            if status in GONE:
                self.forget(key)
                return
            old = self.summaries.get(key)
            if old is not None and self.by_hash.get(old.content_hash) == key:
                del self.by_hash[old.content_hash]
            self.index.upsert(
                key, row.get("search_text") or row.get("content", ""), decode_vector(row.get("embedding"))
            )
            self.summaries[key] = MemorySummary(
                memory_type=row["memory_type"],
                tags=list(row.get("tags") or []),
                importance=float(row["importance"]),
                access_count=int(row.get("access_count") or 0),
                half_life_days=float(row["half_life_days"]),
                status=status,
                pinned=bool(row.get("pinned")),
                last_accessed_at=plain(row["last_accessed_at"]),
                created_at=plain(row["created_at"]),
                session_id=row.get("session_id"),
                episode_id=row.get("episode_id"),
                content_hash=row.get("content_hash", ""),
                content=row.get("content", ""),
            )
            if row.get("content_hash"):
                self.by_hash.setdefault(row["content_hash"], key)
            full = all(
                f in row for f in ROW_FIELDS
            )  # read back whole after a write, not a memory summary read at open
            self.rows.put(key, {f: plain(row[f]) for f in ROW_FIELDS} if full else {})

    def forget(self, key: str) -> None:
        with self.lock:
            self.rows.drop([key])
            light = self.summaries.pop(key, None)
            self.index.remove(key)
            if light is not None and self.by_hash.get(light.content_hash) == key:
                del self.by_hash[light.content_hash]

    def patch(self, key: str, changes: Mapping[str, Any]) -> None:
        """A write changed these fields of a memory to exactly these values."""
        with self.lock:
            light = self.summaries.get(key)
            if light is not None:
                for name, value in changes.items():
                    if hasattr(light, name):
                        setattr(light, name, value)
            self.rows.patch(key, changes)

    def drop_rows(self, keys: Iterable[str]) -> None:
        """A write changed these memories' full rows in ways not given here: they are read again when needed."""
        self.rows.drop(keys)

    def find_by_hash(self, digest: str) -> str | None:
        with self.lock:
            return self.by_hash.get(digest)

    def unique_words(self, key: str) -> set[str]:
        """The words (index terms) of this memory that no other memory of this store holds. Read before it is
        erased: the recall queries that hold one of them quote this memory, not the others."""
        with self.lock:
            light = self.summaries.get(key)
            text = self.index.text(key) or (light.content if light is not None else "")
            return self.index.unique_terms(key, text) if text else set()

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(per type, per status) of the mirrored memories."""
        t: dict[str, int] = {}
        s: dict[str, int] = {}
        with self.lock:
            for lt in self.summaries.values():
                t[lt.memory_type] = t.get(lt.memory_type, 0) + 1
                s[lt.status] = s.get(lt.status, 0) + 1
        return t, s

    def lifecycle_rows(self) -> list[dict[str, Any]]:
        """What the sweep plans from (lifecycle.Row fields but when each was archived: `archived_since`) for every
        memory not yet forgotten: the mirror's fields, pending recall accesses included. No database read."""
        with self.lock:
            return [
                {
                    "id": key,
                    "memory_type": lt.memory_type,
                    "status": lt.status,
                    "pinned": lt.pinned,
                    "importance": lt.importance,
                    "access_count": lt.access_count,
                    "half_life_days": lt.half_life_days,
                    "created_at": lt.created_at,
                    "last_accessed_at": lt.last_accessed_at,
                }
                for key, lt in self.summaries.items()
            ]
