"""One scope's database (namespace + database) on a Connection: its query path, its mirror and its queue.

`Database` is what the parts of a store share (memories.py, snapshots.py, schema.py, retrieval_log.py);
`store.ScopeStore` puts them together. `q` is the query path for everyone: it applies the pending bookkeeping
first (read your writes) and never looks at the statement; a write to the memory table goes through a storage
method that tells the mirror what it changed (the others never write that table: tests/test_storage.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..clock import Clock
from ..ids import IdSource, ulid
from ..models import Scope
from ..retrieval.search_index import SearchIndex
from . import guard
from .bookkeeping import BookkeepingQueue
from .engine import Connection
from .locks import DRAIN, OrderedLock
from .mirror import MemoryMirror
from .values import MEMORY_FIELDS, key_of, record


class Database:
    """The shared state of one scope's database and the query path every part of a store uses."""

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
        self.conn = conn
        # The service's clock: stamps written from Python (status history, updated_at).
        self.clock = clock or Clock()
        self.new_id: IdSource = new_id or ulid
        self.scope = scope
        self.namespace = scope.value
        self.database = database
        self.mirror = MemoryMirror(dim)
        self.summaries = self.mirror.summaries
        self.rows = self.mirror.rows
        self.mirror_lock = self.mirror.lock
        self.drain_lock = OrderedLock(DRAIN, "ScopeStore.drain_lock")
        self.bookkeeping = BookkeepingQueue(conn, self.namespace, database, self.mirror, self.drain_lock)
        # Bumped when a write outside the organise layer changed the knowledge graph (erasure): its mirror reloads.
        self.graph_version = 0

    @property
    def index(self) -> SearchIndex:
        return self.mirror.index

    def q(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """Run statements on this store, after its pending bookkeeping. A caller outside storage never writes the
        memory table here (with checking on, `guard` holds it to that)."""
        if guard.checking():
            return guard.run_checked(self, sql, params)
        return self.write(sql, params)

    def q1(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.q(sql, params)[-1]

    def write(self, sql: str, params: Mapping[str, Any] | None = None) -> list[Any]:
        """The query path of storage's own methods, which keep the mirror in step themselves."""
        if guard.checking():
            guard.internal_only()
        queue = self.bookkeeping
        with self.drain_lock, self.conn.lock:
            # Held log rows are written only for a query that may read them.
            reads_log = "retrieval_log" in sql
            # Not while a compaction copies between requests: the write would make its copy stale.
            if (queue.access or queue.statements or queue.coact or (queue.held_log and reads_log)) and not (
                self.conn.copying
            ):
                queue.drain_locked(keep_log=not reads_log)
            return self.conn.run(self.namespace, self.database, sql, params)

    def write1(self, sql: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.write(sql, params)[-1]

    def generation(self) -> str:
        """This database's identity and memory change count: a snapshot is valid only for exactly this pair
        (the identity tells a store recreated at the same path from the one the snapshot was taken of)."""
        got = self.write1("RETURN (SELECT sid, n FROM ONLY mirror_meta:memory)")
        if not got or not got.get("sid"):
            got = self.write1("UPSERT mirror_meta:memory SET sid = sid ?? rand::uuid::v4(), n = n ?? 0")
            got = got[0] if isinstance(got, list) else got
        return f"{got['sid']}:{int(got.get('n') or 0)}"

    def graph_generation(self) -> str:
        """This database's identity and knowledge-graph change count (schema 005): what a graph snapshot is
        valid for."""
        ident = self.generation().split(":", 1)[0]
        n = self.write1("RETURN (SELECT VALUE n FROM ONLY mirror_meta:graph)")
        return f"{ident}:g{int(n or 0)}"

    def refresh(self, keys: Iterable[str]) -> None:
        """Re-read these memories into the mirror after a write."""
        ids = [record(k) for k in keys]
        if not ids:
            return
        rows = self.write1(f"SELECT {MEMORY_FIELDS}, embedding, search_text FROM $ids", {"ids": ids})
        found = {key_of(r["id"]) for r in rows or []}
        for row in rows or []:
            self.mirror.put(row)
        with self.mirror.lock:
            for k in set(map(key_of, ids)) - found:
                self.mirror.forget(k)
