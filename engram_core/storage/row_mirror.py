"""The full rows of a store's mirrored memories, in memory, so that recall reads its winners without a query.

Fetching ten rows cost a query per scope whose answer the SDK decodes field by field in pure Python (~330 µs a
row, and the query waited for the bookkeeping drain's lock). Recall now reads them from here. The store keeps it
in step at one place per kind of change (storage methods, mirror.py): a write path that reads its row back puts
it (`put`), one that knows the new values patches it (`patch`), any other drops the rows it changed (`drop`); a
console write or a redaction pass reloads the mirror, which empties it. A row not
held (dropped, or never read: an open without a snapshot) is read again by the next recall that returns it,
and `fill` reads the missing ones in bulk (the daemon runs it in the background).

Rows are held packed (a tuple in `FIELDS` order), or as the JSON text the snapshot saved them as until a
recall first needs one (kept in the snapshot's blob until then): most are never asked for between two starts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from threading import Thread
from typing import Any

from .locks import ROW_MIRROR, OrderedLock

# The fields held per memory: what a recall returns (values.MEMORY_FIELDS) without the id, which is the key, and
# the computed strength, which `MemoryCore.to_memory` computes for the moment of the answer.
FIELDS = (
    "content",
    "content_hash",
    "memory_type",
    "scope",
    "tags",
    "importance",
    "confidence",
    "relevance_score",
    "outcome_impact",
    "user_feedback",
    "access_count",
    "half_life_days",
    "pinned",
    "status",
    "status_history",
    "source",
    "session_id",
    "episode_id",
    "promoted_from",
    "promotion_chain",
    "consolidated_into",
    "invalid_at",
    "created_at",
    "updated_at",
    "last_accessed_at",
    "metadata",
)
_DATETIMES = ("invalid_at", "created_at", "updated_at", "last_accessed_at")
_DT = "$engram_dt"  # how a datetime is tagged in the snapshot's JSON (metadata may hold datetimes anywhere)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return {_DT: value.isoformat()}
    raise TypeError(f"{type(value).__name__} is not kept in the row snapshot")


def _json_hook(obj: dict[str, Any]) -> Any:
    if len(obj) == 1 and _DT in obj:
        return datetime.fromisoformat(obj[_DT])
    return obj


def encode(packed: tuple[Any, ...]) -> str:
    return json.dumps(packed, default=_json_default, ensure_ascii=False, separators=(",", ":"))


def decode(text: str) -> tuple[Any, ...] | None:
    got = json.loads(text, object_hook=_json_hook)
    return tuple(got) if isinstance(got, list) and len(got) == len(FIELDS) else None


class RowMirror:
    """key → the memory's row (packed, or its snapshot JSON). Every method is safe from any thread."""

    def __init__(self) -> None:
        self.lock = OrderedLock(ROW_MIRROR, "RowMirror.lock")
        self._rows: dict[str, tuple[Any, ...] | str] = {}
        # Rows as the snapshot saved them and no recall has asked for yet: each row's JSON text lies between two
        # offsets of one shared UTF-8 blob (`_at`: key → its position). Making 100,000 of them Python strings at
        # every start (parsed out of one JSON document) took about a second of the first recall.
        self._blob = b""
        self._offsets: list[int] = []
        self._at: dict[str, int] = {}
        self.filling = False  # a background `fill` runs
        self.filler: Thread | None = None  # the last one started

    def __len__(self) -> int:
        return len(self._rows) + len(self._at)

    def __contains__(self, key: object) -> bool:
        return key in self._rows or key in self._at

    def clear(self) -> None:
        with self.lock:
            self._rows.clear()
            self._forget_snapshot()

    def _forget_snapshot(self) -> None:
        self._blob, self._offsets, self._at = b"", [], {}

    def load_snapshot(self, keys: list[str], blob: bytes, offsets: list[int]) -> None:
        """Hold the snapshot's rows: ``keys[i]``'s JSON text is ``blob[offsets[i]:offsets[i + 1]]`` (empty: the row
        was not held). Replaces everything held."""
        with self.lock:
            self._rows.clear()
            self._blob, self._offsets = blob, offsets
            self._at = {k: i for i, k in enumerate(keys) if offsets[i + 1] > offsets[i]}

    def _snapshot_text(self, i: int) -> str:
        return self._blob[self._offsets[i] : self._offsets[i + 1]].decode()

    def _held(self, key: str) -> tuple[Any, ...] | str | None:
        """What is held for ``key``; a snapshot row becomes its text here (the caller holds the lock)."""
        held = self._rows.get(key)
        if held is None and key in self._at:
            held = self._rows[key] = self._snapshot_text(self._at.pop(key))
        return held

    def put(self, key: str, row: Mapping[str, Any]) -> None:
        """Hold a plain row (values.plain) read back after a write; a row missing a field is dropped instead."""
        with self.lock:
            self._at.pop(key, None)
            if all(f in row for f in FIELDS):
                self._rows[key] = tuple(row[f] for f in FIELDS)
            else:
                self._rows.pop(key, None)

    def patch(self, key: str, changes: Mapping[str, Any]) -> None:
        """A write changed these fields of a held row as given (a row not held stays missing)."""
        with self.lock:
            held = self._held(key)
            if isinstance(held, str):
                held = decode(held)
            if held is not None:
                row = dict(zip(FIELDS, held, strict=True))
                row.update((f, v) for f, v in changes.items() if f in row)
                self._rows[key] = tuple(row[f] for f in FIELDS)

    def drop(self, keys: Iterable[str]) -> None:
        with self.lock:
            for k in keys:
                self._rows.pop(k, None)
                self._at.pop(k, None)

    def get(self, key: str) -> dict[str, Any] | None:
        """The row as `ScopeStore.get_many` returns it (a fresh dict), or None when not held."""
        with self.lock:
            held = self._held(key)
            if isinstance(held, str):
                packed = decode(held)
                if packed is None:
                    del self._rows[key]
                    return None
                self._rows[key] = held = packed
        if held is None:
            return None
        row = dict(zip(FIELDS, held, strict=True))
        row["id"] = f"memory:{key}"
        # Fresh containers: a caller that edits what it got must not edit the mirror.
        row["tags"] = list(row["tags"] or [])
        row["metadata"] = dict(row["metadata"] or {})
        row["status_history"] = [dict(h) for h in row["status_history"] or []]
        row["promotion_chain"] = list(row["promotion_chain"] or [])
        return row

    def snapshot_text(self, key: str) -> str | None:
        """The row as the snapshot keeps it (None when not held)."""
        with self.lock:
            held = self._rows.get(key)
            if held is None and key in self._at:  # as saved: no need to hold it as a string
                return self._snapshot_text(self._at[key])
        if held is None or isinstance(held, str):
            return held
        try:
            return encode(held)
        except TypeError:
            return None

    def missing(self, keys: Iterable[str]) -> list[str]:
        with self.lock:
            return [k for k in keys if k not in self._rows and k not in self._at]


def from_json_row(values: list[Any]) -> dict[str, Any] | None:
    """A row read in bulk as JSON (`FILL_QUERY`), its datetimes back as datetimes; None when its metadata is not
    empty (it is read the ordinary way)."""
    row = dict(zip(("key", *FIELDS), values, strict=True))
    if row["metadata"] is not True:
        return None
    row["metadata"] = {}
    for f in _DATETIMES:
        if row[f] is not None:
            row[f] = _parse_dt(row[f])
    row["status_history"] = [
        {**h, "at": _parse_dt(h["at"])} if h.get("at") is not None else h for h in row["status_history"] or []
    ]
    return row


def _parse_dt(text: str) -> datetime:
    # The engine writes nanoseconds; Python keeps microseconds (as values.plain does for the SDK's datetimes).
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# The missing rows of a store in one query, as JSON text the engine writes (parsed by the C json module instead of
# the SDK's pure-Python CBOR decoder). Metadata may hold datetimes JSON cannot tell from strings: a row whose
# metadata is not empty is read again the ordinary way.
FILL_QUERY = (
    "RETURN array::join((SELECT VALUE encoding::json::encode([record::id(id), "
    + ", ".join(f if f != "metadata" else "metadata = {}" for f in FIELDS)
    + "]) FROM $ids), '\n')"
)
