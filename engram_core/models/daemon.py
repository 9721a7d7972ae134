"""What the daemon answers for itself (``engram status``, ``engram stop``, ``engram status --flush``)."""

from __future__ import annotations

from pydantic import BaseModel


class ParkedEvent(BaseModel):
    """An acknowledged hook event whose apply failed three times: kept in the journal, retried every 5 minutes."""

    event_id: str
    kind: str | None = None
    attempts: int
    error: str
    since: float  # Unix time it was parked


class DaemonStatus(BaseModel):
    """``engram status --json`` prints this object. Keys the daemon adds later pass through unchanged."""

    model_config = {"extra": "allow"}

    protocol: int
    pid: int
    version: str
    home: str
    methods: dict[str, str]  # every method it serves -> its return type (wire/types.py)
    params: dict[str, list[str]]
    model: str  # the embedding model's state: not loaded, loading, ready, unavailable (…), error: …
    uptime_s: float
    socket: str
    idle_timeout_s: int | float
    requests: int
    errors: int
    connections: int
    events_queued: int
    events_applied: int
    events_failed: int
    spool_ingested: int
    compactions: int
    spool_waiting: int
    spool_rejected: list[
        str
    ] = []  # "name: why" of each spool entry moved aside (spool/rejected/), never retried
    journal_pending: int
    events_parked: int
    parked: list[ParkedEvent]
    sessions_active: int
    projects_open: int
    embedding: str | None
    rss_mb: float | None = None  # the daemon's resident memory
    heap_arenas: int | None = None  # its malloc arenas (glibc; heap.py caps them at two)


class FlushReport(BaseModel):
    drained: bool  # every acknowledged hook event was applied (or parked) within the time given
    queued: int
    applied: int
    parked: int


class ShutdownAck(BaseModel):
    stopping: bool
    pid: int
    waiting_for: str | None = None  # long work the daemon stops first (a compaction), said to whoever waits
