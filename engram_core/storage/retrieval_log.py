"""The retrieval log: one row per recall (held in memory until written, bookkeeping.py), scrubbed of what an
erased memory left in it, pruned to the newest rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..retrieval.search_index import tokenize
from .database import Database
from .values import FORGOTTEN, record


class RetrievalLog:
    """The retrieval_log table of one store (``store.retrieval_log``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def log(self, fields: Mapping[str, Any]) -> str:
        """Hold a retrieval_log row; its id is known at once. Held rows are written before any query that names
        the table, at the next compaction (into the compacted copy: no old version left behind), at close, or by
        the bookkeeping thread after `bookkeeping.LOG_AFTER_S`. At most `bookkeeping.HELD_LOG_MAX` are held (the
        oldest beyond would be pruned at the compaction anyway)."""
        key = self.db.new_id()
        self.db.bookkeeping.hold_log({"id": record(key, "retrieval_log"), **fields})
        return key

    def scrub(self, keys: list[str], words: set[str]) -> int:
        """Recall queries are the user's words and stay, except where they quote an erased memory: a logged
        recall that returned one of ``keys`` loses that id and its query text, and so does one whose query holds
        one of ``words`` (words only an erased memory had). Strategy, counts and feedback flags stay for learning.
        Returns the rows changed."""
        rows = self.db.write1(
            "SELECT id, query, memory_ids CONTAINSANY $keys AS hit FROM retrieval_log "
            "WHERE query != $gone OR memory_ids CONTAINSANY $keys",
            {"keys": list(keys), "gone": FORGOTTEN},
        )
        ids = [
            r["id"]
            for r in rows or []
            if r.get("hit") or (words and words & set(tokenize(r.get("query") or "")))
        ]
        if not ids:
            return 0
        self.db.write(
            "UPDATE $ids SET query = $gone, feedback_reason = NONE, "
            "memory_ids = memory_ids.filter(|$m| $m NOTINSIDE $keys), results_count = array::len(memory_ids) "
            "RETURN NONE",
            {"ids": ids, "keys": list(keys), "gone": FORGOTTEN},
        )
        self.db.conn.erased = True
        return len(ids)

    def prune(self, keep: int) -> None:
        """Keep the newest ``keep`` retrieval_log rows: one is written per recall, the only table that grows with
        use alone (the rows deleted leave the disk at the next compaction)."""
        self.db.write(
            "LET $cut = (SELECT VALUE created_at FROM retrieval_log ORDER BY created_at DESC LIMIT 1 START $k)[0];"
            " IF $cut != NONE { DELETE retrieval_log WHERE created_at <= $cut RETURN NONE; };",
            {"k": keep},
        )
