"""`ScopeStore`: one scope's database with its mirror, put together from the storage parts.

The parts, each a module of this package: the query path and shared state (database.py), the memory table
(memories.py), the mirror (mirror.py, row_mirror.py) and its snapshot (snapshots.py), the bookkeeping queue
(bookkeeping.py), the retrieval log (retrieval_log.py), organise's graph tables (graph_tables.py), the schema
(schema.py). `ScopeStore` offers the common calls itself; the rest are on its parts (``store.memories``,
``store.retrieval_log``, ``store.snapshots``, ``store.bookkeeping``, ``store.mirror``, ``store.graph``).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from ..clock import Clock
from ..ids import IdSource
from ..models import Scope
from . import schema
from .database import Database
from .engine import Connection
from .graph_tables import GraphTables
from .memories import MemoryTable
from .retrieval_log import RetrievalLog
from .snapshots import Snapshots
from .values import MEMORY_TABLE, plain, record

# Tables whose rows storage's mirror copies: written only by storage's named methods.
MIRRORED_TABLES = frozenset({MEMORY_TABLE})
# Organise's graph tables: written only by `GraphTables` (graph_tables.py), which keeps the graph mirror in step.
GRAPH_TABLES = frozenset({"entity", "relates_to", "associated_with", "episode"})


class ScopeStore(Database):
    """One scope's database (namespace + database) on a Connection, with its in-process mirror."""

    def __init__(
        self,
        conn: Connection,
        scope: Scope,
        database: str,
        *,
        dim: int = 384,
        clock: Clock | None = None,
        new_id: IdSource | None = None,
    ) -> None:
        super().__init__(conn, scope, database, dim=dim, clock=clock, new_id=new_id)
        self.snapshots = Snapshots(self)
        self.snapshot_writers = self.snapshots.writers
        self.retrieval_log = RetrievalLog(self)
        self.memories = MemoryTable(self, self.snapshots, self.retrieval_log)
        self.graph = GraphTables(self, self, self.snapshot_writers)
        self.apply_schema()
        self.reload_mirror()

    # ── plumbing ──────────────────────────────────────────────
    def schema_version(self) -> int:
        return schema.schema_version(self)

    def apply_schema(self) -> int:
        """Apply every migration newer than the recorded version, each in one transaction."""
        return schema.apply_schema(self)

    def create(self, table: str, fields: Mapping[str, Any], key: str | None = None) -> dict[str, Any]:
        """A row of a table no mirror copies, its id from the service's id source (not the engine's random one:
        queue items and logs are shown and listed by id, and a build on SequentialIds must give the same ones)."""
        if table in MIRRORED_TABLES:
            raise ValueError(f"{table} rows are written by the storage methods that keep its mirror in step")
        rows = self.write1(
            "CREATE $t CONTENT $f", {"t": record(key or self.new_id(), table), "f": dict(fields)}
        )
        out: dict[str, Any] = plain(rows[0])
        return out

    def drop_database(self) -> None:
        """Remove this scope database entirely (sessions, after their promotion pass)."""
        self.conn.run(self.namespace, self.database, f"REMOVE DATABASE IF EXISTS `{self.database}`")
        self.conn.erased = True  # its rows stay in the engine's files until the next compaction
        self.mirror.reset()

    # ── the mirror and its snapshot ───────────────────────────
    @property
    def snapshot_path(self) -> Path | None:
        return self.snapshots.path

    def side_snapshot_path(self, part: str, suffix: str = "json") -> Path | None:
        return self.snapshots.side_path(part, suffix)

    def reload_mirror(self) -> None:
        self.snapshots.reload()

    def save_snapshot(self) -> None:
        self.snapshots.save()

    def find_by_hash(self, digest: str) -> str | None:
        return self.mirror.find_by_hash(digest)

    # ── memories (the rest: store.memories) ──────────────────
    def create_memory(self, key: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        return self.memories.create(key, fields)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.memories.get(key)

    def get_many(self, keys: list[str], *, settled: bool = True) -> dict[str, dict[str, Any]]:
        return self.memories.get_many(keys, settled=settled)

    def update_memory(self, key: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.memories.update(key, changes)

    def set_status(
        self, key: str, status: str, reason: str, at: datetime | None = None, **extra: Any
    ) -> dict[str, Any] | None:
        return self.memories.set_status(key, status, reason, at, **extra)

    def list_memories(
        self,
        *,
        where: str = "true",
        params: Mapping[str, Any] | None = None,
        order: str = "created_at DESC",
        limit: int = 100,
        start: int = 0,
    ) -> list[dict[str, Any]]:
        return self.memories.select(where=where, params=params, order=order, limit=limit, start=start)

    def erase_memory(self, key: str, reason: str) -> dict[str, Any] | None:
        return self.memories.forget(key, reason)

    # ── bookkeeping (the rest: store.bookkeeping) ────────────
    def strengthen(self, keys: list[str], when: datetime | None = None) -> None:
        """Each retrieval counts an access and nudges relevance up (events may revive).

        The mirror counts the access at once. The database write (~15-40 ms for ten rows: each UPDATE
        rewrites the row and runs its events) is queued (bookkeeping.py); status changes the events make
        (first retrieval, revival) reach the mirror when it is applied."""
        if keys:
            self.bookkeeping.strengthen(keys, when or self.clock.now())

    def drain(self) -> None:
        """Apply the pending bookkeeping now."""
        self.bookkeeping.drain()

    @property
    def has_pending(self) -> bool:
        return self.bookkeeping.has_pending
