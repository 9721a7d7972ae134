"""The memory table: create, read, update, erase, the sweep's changes, export and restore.

Every write here tells the mirror what it changed (mirror.py); nothing outside storage writes this table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
from surrealdb import RecordID

from .database import Database
from .retrieval_log import RetrievalLog
from .snapshots import Snapshots
from .values import MEMORY_FIELDS, decode_vector, key_of, plain, query_file, record, with_vector_bytes


class MemoryTable:
    """The memory rows of one store (``store.memories``); `ScopeStore` offers the common ones itself."""

    def __init__(self, db: Database, snapshots: Snapshots, log: RetrievalLog) -> None:
        self.db = db
        self.snapshots = snapshots
        self.log = log

    def new_row(self, fields: Mapping[str, Any]) -> dict[str, Any]:
        content = with_vector_bytes(fields)
        if content.get("search_text") == content.get("content"):
            # No episode context (an import, a memory outside a session): the search text is the content, which
            # every reader falls back to; written, it would store the text twice (~0.2 KB a memory).
            content.pop("search_text", None)
        if not content.get("status_history"):  # written with the row: the history event would rewrite it
            entry = {"to": content.get("status", "created"), "at": self.db.clock.now()}
            if content.get("status_reason"):
                entry["reason"] = content["status_reason"]
            content["status_history"] = [entry]
        return content

    def create(self, key: str, fields: Mapping[str, Any]) -> dict[str, Any]:
        # A projection on CREATE trips the engine over the COMPUTED field (3.2.4): read it back instead.
        content = self.new_row(fields)
        rows = self.db.write1(
            f"CREATE $id CONTENT $fields RETURN NONE; SELECT {MEMORY_FIELDS} FROM $id",
            {"id": record(key), "fields": content},
        )
        # The mirror takes what we just wrote (embedding included) instead of reading it back.
        self.db.mirror.put(
            {**rows[0], "embedding": content.get("embedding"), "search_text": fields.get("search_text")}
        )
        out: dict[str, Any] = plain(rows[0])
        return out

    def insert(self, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """New memories (key, fields) in one statement, nothing read back (an import's chunk). The mirror takes
        each with `mirror_new`."""
        if rows:
            self.db.write(
                "INSERT INTO memory $rows RETURN NONE",
                {"rows": [{**self.new_row(f), "id": record(k)} for k, f in rows]},
            )

    def mirror_new(self, key: str, fields: Mapping[str, Any]) -> None:
        """Put a memory `insert` wrote into the mirror, from the fields it was written with."""
        self.db.mirror.put({"access_count": 0, "pinned": False, **fields, "id": record(key)})

    def get(self, key: str) -> dict[str, Any] | None:
        rows = self.db.write1(f"SELECT {MEMORY_FIELDS} FROM $id", {"id": record(key)})
        return plain(rows[0]) if rows else None

    def get_many(self, keys: list[str], *, settled: bool = True) -> dict[str, dict[str, Any]]:
        """Full rows by key. ``settled=False`` reads without applying pending bookkeeping first; the
        counters it would change (access count, last access, status) come from the mirror instead."""
        if not keys:
            return {}
        if settled:
            rows = self.db.write1(f"SELECT {MEMORY_FIELDS} FROM $ids", {"ids": [record(k) for k in keys]})
            return {key_of(r["id"]): plain(r) for r in rows or []}
        out: dict[str, dict[str, Any]] = {}
        for k in keys:
            row = self.db.rows.get(k)
            if row is not None:
                out[k] = row
        missing = [k for k in keys if k not in out]
        if missing:
            with self.db.conn.lock:  # read and held under the lock: no write can come between the two
                got = self.db.conn.run(
                    self.db.namespace,
                    self.db.database,
                    f"SELECT {MEMORY_FIELDS} FROM $ids",
                    {"ids": [record(k) for k in missing]},
                )[-1]
                for r in got or []:
                    row = plain(r)
                    key = key_of(r["id"])
                    if key in self.db.summaries:
                        self.db.rows.put(key, row)
                    out[key] = row
            self.snapshots.fill_rows_later()
        with self.db.mirror.lock:
            for key, row in out.items():
                light = self.db.summaries.get(key)
                if light is not None:
                    row.update(
                        access_count=light.access_count,
                        last_accessed_at=light.last_accessed_at,
                        status=light.status,
                    )
        return out

    def get_embedding(self, key: str) -> np.ndarray | None:
        """The stored vector of one memory (float32), None when it has none."""
        return decode_vector(self.db.write1("SELECT VALUE embedding FROM ONLY $id", {"id": record(key)}))

    def update(self, key: str, changes: Mapping[str, Any]) -> dict[str, Any] | None:
        rows = self.db.write1(
            f"UPDATE $id MERGE $changes RETURN {MEMORY_FIELDS}",
            {"id": record(key), "changes": {**with_vector_bytes(changes), "updated_at": self.db.clock.now()}},
        )
        self.db.refresh([key])
        return plain(rows[0]) if rows else None

    def merge_into(
        self,
        key: str,
        *,
        access_count: int,
        importance: float,
        tags: list[str],
        merged_from: str,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any] | None:
        """Fold a duplicate into an existing memory: summed access, max importance, union of tags."""
        rows = self.db.write1(
            """UPDATE $id SET
                 access_count += $acc,
                 importance = math::max([importance, $importance]),
                 tags = array::union(tags, $tags),
                 metadata.merged_from = array::union(metadata.merged_from ?? [], [$from]),
                 updated_at = $now;
               UPDATE $id MERGE { metadata: $meta };
               SELECT """
            + MEMORY_FIELDS
            + " FROM $id",
            {
                "id": record(key),
                "acc": access_count,
                "importance": importance,
                "tags": tags,
                "from": merged_from,
                "meta": dict(metadata or {}),
                "now": self.db.clock.now(),
            },
        )
        self.db.refresh([key])
        return plain(rows[0]) if rows else None

    def forget(self, key: str, reason: str) -> dict[str, Any] | None:
        """Forget: the skeleton (id, type, scope, dates, history) stays; every field that carries the text goes,
        and the full-text index entry with it, and so do its traces elsewhere in this store (`erase_traces`).
        (The engine's files keep old bytes until `Connection.compact`.)"""
        rows = self.db.write1(
            "UPDATE $id SET status = 'forgotten', status_reason = $r, status_changed_at = $now, "
            "updated_at = $now, content = '[forgotten]', content_hash = '', search_text = NONE, "
            "embedding = NONE, metadata = {}, tags = [], source = NONE RETURN NONE; "
            f"SELECT {MEMORY_FIELDS} FROM $id",
            {"id": record(key), "r": reason, "now": self.db.clock.now()},
        )
        if rows:
            self.erase_traces([key])
        self.db.refresh([key])
        return plain(rows[0]) if rows else None

    def erase_traces(self, keys: list[str]) -> None:
        """What erasing these memories removes beyond their own rows (queries/erase_traces.surql): graph entities
        only they mentioned, relations only they evidenced, review-queue items quoting them, their edges."""
        if not keys:
            return
        self.db.write(
            query_file("erase_traces.surql"), {"ids": [record(k) for k in keys], "keys": list(keys)}
        )
        self.db.graph_version += 1  # the organise layer's graph mirror reloads
        self.db.conn.erased = True
        # A graph snapshot written before holds the erased entities' names, and a mirror dropped for a reload is
        # not saved over it: derived data, removed now (the next start reads the graph from the store).
        for suffix in ("npz", "json"):
            side = self.snapshots.side_path("graph", suffix)
            if side is not None:
                side.unlink(missing_ok=True)

    def set_status(
        self, key: str, status: str, reason: str, at: datetime | None = None, **extra: Any
    ) -> dict[str, Any] | None:
        return self.update(
            key,
            {
                "status": status,
                "status_reason": reason,
                "status_changed_at": at or self.db.clock.now(),
                **extra,
            },
        )

    def select(
        self,
        *,
        where: str = "true",
        params: Mapping[str, Any] | None = None,
        order: str = "created_at DESC",
        limit: int = 100,
        start: int = 0,
    ) -> list[dict[str, Any]]:
        rows = self.db.write1(
            f"SELECT {MEMORY_FIELDS} FROM memory WHERE {where} ORDER BY {order} LIMIT $limit START $start",
            {**(params or {}), "limit": limit, "start": start},
        )
        return [plain(r) for r in rows or []]

    def export_rows(self, after: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """Every memory with every stored field, in id order (the order they were written: ids are ULIDs),
        ``limit`` at a time after the key ``after``; its vector as a list of floats (the export format a person
        can read, and what `restore_row` takes back), each exactly the value stored."""
        where = "WHERE id > $after" if after else ""
        page = "LIMIT $limit" if limit is not None else ""
        rows = [
            plain(r)
            for r in self.db.write1(
                f"SELECT * OMIT memory_strength FROM memory {where} ORDER BY id {page}",
                {"after": record(after) if after else None, "limit": limit},
            )
            or []
        ]
        for row in rows:
            vec = decode_vector(row.get("embedding"))
            row["embedding"] = None if vec is None else vec.tolist()
        return rows

    def restore_row(self, key: str, fields: Mapping[str, Any]) -> None:
        """Write a record exactly as exported (id and every field), replacing any with the same id."""
        # The CREATE event appends to status_history; put the exported history back exactly.
        self.db.write(
            "UPSERT $id CONTENT $f RETURN NONE; UPDATE $id SET status_history = $h RETURN NONE",
            {"id": record(key), "f": with_vector_bytes(fields), "h": list(fields.get("status_history", []))},
        )
        self.db.refresh([key])

    def change_marks(self) -> dict[str, str]:
        """Each memory's id -> what every write moves (updated_at, status, content hash, tags), read as one string:
        how sync finds what changed without decoding every whole row."""
        text = (
            self.db.write1(
                "RETURN array::join((SELECT VALUE record::id(id) + '\x1f' + <string> updated_at + '\x1f' + status "
                "+ '\x1f' + (content_hash ?? '') + '\x1f' + array::join(tags, ',') FROM memory), '\x1e')"
            )
            or ""
        )
        out: dict[str, str] = {}
        for line in text.split("\x1e"):
            key, _, mark = line.partition("\x1f")
            if key:
                out[key] = mark
        return out

    def export_rows_of(self, keys: Sequence[str]) -> list[dict[str, Any]]:
        """`export_rows` for these memories only (the ones sync found changed)."""
        if not keys:
            return []
        rows = [
            plain(r)
            for r in self.db.write1(
                "SELECT * OMIT memory_strength FROM $ids ORDER BY id", {"ids": [record(k) for k in keys]}
            )
            or []
        ]
        for row in rows:
            vec = decode_vector(row.get("embedding"))
            row["embedding"] = None if vec is None else vec.tolist()
        return rows

    def restore_rows(self, rows: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """`restore_row` for many records in one request (sync writes thousands)."""
        if not rows:
            return
        self.db.write(
            "FOR $r IN $rows { UPSERT $r.id CONTENT $r.f RETURN NONE; "
            "UPDATE $r.id SET status_history = $r.h RETURN NONE; };",
            {
                "rows": [
                    {"id": record(k), "f": with_vector_bytes(f), "h": list(f.get("status_history", []))}
                    for k, f in rows
                ]
            },
        )
        self.db.refresh([k for k, _ in rows])

    def count_by(self) -> tuple[int, dict[str, int], dict[str, int]]:
        """(total, per type, per status). The mirror holds every memory but the forgotten and superseded ones
        (what list_memories pages through): those are counted here in Python, the rest by an indexed query.
        Two GROUP BY over the whole table took ~3 s at 100,000 memories and held every other request meanwhile
        (the TUI's scope tree asks for them as it opens)."""
        t, s = self.db.mirror.counts()
        rest = self.db.write1(
            "SELECT memory_type, status, count() AS n FROM memory "
            "WHERE status IN ['forgotten', 'superseded'] GROUP BY memory_type, status"
        )
        for r in rest or []:
            t[r["memory_type"]] = t.get(r["memory_type"], 0) + r["n"]
            s[r["status"]] = s.get(r["status"], 0) + r["n"]
        return sum(s.values()), dict(sorted(t.items())), dict(sorted(s.items()))

    def archived_since(self, keys: Sequence[str], chunk: int = 1000) -> dict[str, datetime]:
        """When each of these memories last changed status (read for the few the sweep may forget: reading it for
        every archived memory fetched each whole row, 2.3 s and 330 MB of engine memory for 43,000 at 100k)."""
        out: dict[str, datetime] = {}
        for i in range(0, len(keys), chunk):
            text = (
                self.db.write1(
                    "RETURN array::join((SELECT VALUE record::id(id) + ' ' + <string> status_changed_at "
                    "FROM $ids WHERE status_changed_at != NONE), '\n')",
                    {"ids": [record(k) for k in keys[i : i + chunk]]},
                )
                or ""
            )
            for line in text.split("\n"):
                key, _, when = line.partition(" ")
                if key:
                    out[key] = datetime.fromisoformat(when.replace("Z", "+00:00"))
        return out

    def pending_queue_keys(self) -> set[str]:
        rows = self.db.write1(
            "SELECT VALUE memory_id FROM consolidation_queue WHERE status = 'pending' AND memory_id != NONE"
        )
        return {key_of(r) for r in rows or []}

    def apply_sweep(
        self,
        now: datetime,
        moves: Mapping[str, tuple[str, str]],
        half_lives: Mapping[str, float],
        decay: list[tuple[str, float]],
    ) -> int:
        """Apply a planned sweep (queries/sweep.surql); returns how many memories were newly queued.

        The mirror takes the changes in place, not a rebuild: at 50k memories a rebuild held every client for tens
        of seconds. The sweep's UPDATEs return nothing (they would return every changed row, embeddings included)."""
        groups: dict[tuple[str, str], list[RecordID]] = {}
        for key, (status, reason) in moves.items():
            groups.setdefault((status, reason), []).append(record(key))
        by_value: dict[float, list[RecordID]] = {}
        for key, value in half_lives.items():
            by_value.setdefault(value, []).append(record(key))
        if not (groups or by_value or decay):
            return 0
        result = self.db.write(
            query_file("sweep.surql"),
            {
                "now": now,
                "moves": [{"ids": ids, "status": st, "reason": why} for (st, why), ids in groups.items()],
                "half_lives": [{"ids": ids, "value": v} for v, ids in by_value.items()],
                "decay": [{"id": record(k), "priority": p} for k, p in decay],
                "forgotten": [record(k) for k, (st, _why) in moves.items() if st == "forgotten"],
            },
        )
        if any(st == "forgotten" for st, _why in moves.values()):
            gone = [k for k, (st, _why) in moves.items() if st == "forgotten"]
            self.erase_traces(gone)
            self.log.scrub(gone, set())
            self.db.conn.erased = True  # the old text stays in the engine's files until the next compaction
        self.db.mirror.drop_rows(
            [*moves, *half_lives]
        )  # status, its history, half-life: read again when asked
        with self.db.mirror.lock:
            for key, value in half_lives.items():
                if key in self.db.summaries:
                    self.db.summaries[key].half_life_days = value
            for key, (status, _why) in moves.items():
                if status in ("forgotten", "superseded"):
                    self.db.mirror.forget(key)
                elif key in self.db.summaries:
                    self.db.summaries[key].status = status
        return int(result[-1] or 0)

    def status_counts(self) -> dict[str, int]:
        return self.count_by()[2]

    def apply_feedback(self, key: str, delta: float, step: float, floor: float) -> None:
        """A recall that returned this memory was judged useful or not: importance moves by ``step`` (never below
        ``floor`` when it was above it), relevance and outcome impact by ``delta``. The mirror ranks by the new
        importance at once."""
        self.db.write(
            "UPDATE $id SET importance = math::min([1.0, math::max([math::min([importance, $floor]), "
            "importance + $step])]), relevance_score = math::clamp(relevance_score + $d, 0.0, 1.0), "
            "outcome_impact = math::clamp(outcome_impact + $d, 0.0, 1.0)",
            {"id": record(key), "d": delta, "step": step, "floor": floor},
        )
        self.db.refresh([key])

    def raise_access_count(self, key: str, n: int) -> None:
        """At least ``n`` accesses (a consolidated memory keeps its sources' count)."""
        self.db.write(
            "UPDATE $id SET access_count = math::max([access_count, $n])", {"id": record(key), "n": n}
        )
        self.db.mirror.drop_rows([key])

    def set_embeddings(self, vectors: Mapping[str, Any]) -> None:
        """Write these memories' vectors (bytes, `encode_vector`). No full row holds a vector; the search index
        takes them when the caller reloads the mirror."""
        self.db.write(
            "FOR $u IN $rows { UPDATE $u.id SET embedding = $u.e RETURN NONE; };",
            {"rows": [{"id": record(k), "e": v} for k, v in vectors.items()]},
        )

    def merge_fields(self, key: str, changes: Mapping[str, Any]) -> None:
        """Rewrite these fields as given, nothing else (a redaction pass; the caller reloads the mirror after)."""
        self.db.write("UPDATE $id MERGE $changes RETURN NONE", {"id": record(key), "changes": dict(changes)})
        self.db.mirror.drop_rows([key])

    def note_injected(self, last_use: Mapping[str, datetime], now: datetime) -> None:
        """SessionStart injected these memories: their last use moves (lifecycle.injected_last_use), no access is
        counted. The mirror takes it at once; the database write is queued like recall's bookkeeping."""
        with self.db.mirror.lock:
            for key, at in last_use.items():
                light = self.db.summaries.get(key)
                if light is not None:
                    light.last_accessed_at = at
        self.db.bookkeeping.defer(
            "FOR $u IN $items { UPDATE $u.id SET last_accessed_at = $u.at, "
            "metadata.injections = (metadata.injections ?? 0) + 1, metadata.last_injected_at = $now "
            "RETURN NONE; }",
            {"items": [{"id": record(k), "at": at} for k, at in last_use.items()], "now": now},
            memory_rows=tuple(last_use),
        )
