"""The journal of hook events the daemon acknowledged before applying them.

A hook must not wait for an embedding, so the daemon acknowledges a hook event first: the event is appended and
fsynced here before the ack, marked done once applied, and replayed on start (docs/daemon.md, "Durability"). The
same journal makes spool ingestion exactly-once: an event id already begun is never applied again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any

from ..redaction import redact_value
from ..wire.protocol import private_open

JOURNAL_NAME = "journal.jsonl"
KEEP_DONE_IDS = 50_000


class Journal:
    """Append-only: ``{"op": "begin", "id", "event"}`` fsynced before the ack, ``{"op": "done", "id"}`` after."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.Lock()
        self.done: dict[str, None] = {}  # applied ids, oldest first (a rewrite keeps the newest)
        self.pending: dict[str, dict[str, Any]] = {}
        order: list[str] = []
        if path.exists():
            with open(path, "rb") as fh:
                for raw in fh:
                    try:
                        rec = json.loads(raw)
                        eid = str(rec["id"])
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn last line from a crash mid-append: its event was never acknowledged
                    if rec.get("op") == "begin" and eid not in self.done:
                        # redacted again: a journal written by an older version may hold a raw event
                        self.pending[eid] = redact_value(rec.get("event") or {})
                    elif rec.get("op") == "done":
                        self.pending.pop(eid, None)
                        if eid not in self.done:
                            self.done[eid] = None
                            order.append(eid)
        self._compact(order[-KEEP_DONE_IDS:])
        self._fd = private_open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def _compact(self, keep_done: list[str]) -> None:
        """Rewrite the journal to the ids still worth remembering; atomic via rename."""
        tmp = self.path.with_suffix(".tmp")
        fd = private_open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for eid in keep_done:
                fh.write(json.dumps({"op": "done", "id": eid}) + "\n")
            for eid, ev in self.pending.items():
                fh.write(json.dumps({"op": "begin", "id": eid, "event": ev}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        self.done = dict.fromkeys(keep_done)

    def rewrite(self) -> None:
        """Drop the text of applied events from the file (their ids stay, for exactly-once): run after a
        compaction, so an event's words leave the disk with the store's old bytes (an erased memory's included)."""
        with self.lock:
            os.close(self._fd)
            try:
                self._compact(list(self.done)[-KEEP_DONE_IDS:])
            finally:
                self._fd = private_open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    def seen(self, eid: str) -> bool:
        with self.lock:
            return eid in self.done or eid in self.pending

    def begin(self, eid: str, event: dict[str, Any]) -> bool:
        """Durably record an event before acknowledging it; False if it was already seen (exactly once)."""
        line = (json.dumps({"op": "begin", "id": eid, "event": event}, default=str) + "\n").encode()
        with self.lock:
            if eid in self.done or eid in self.pending:
                return False
            os.write(self._fd, line)
            os.fsync(self._fd)
            self.pending[eid] = event
            return True

    def finish(self, eid: str) -> None:
        # No fsync: losing a "done" only means a replay, and replay checks whether the write already happened.
        with self.lock:
            os.write(self._fd, (json.dumps({"op": "done", "id": eid}) + "\n").encode())
            self.pending.pop(eid, None)
            self.done[eid] = None

    def close(self) -> None:
        with self.lock, contextlib.suppress(OSError):
            os.close(self._fd)


def event_id_of(line: bytes | str, event: dict[str, Any]) -> str:
    eid = event.get("event_id")
    if isinstance(eid, str) and eid:
        return eid
    raw = line.encode() if isinstance(line, str) else line
    return "h_" + hashlib.sha256(raw.strip()).hexdigest()[:32]
