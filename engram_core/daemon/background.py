"""The daemon's background schedule: compaction when idle, the spool poll, the maintenance sweep, scheduled sync,
and the exit after an idle timeout. :class:`Activity` counts the requests being answered, which decide "idle"."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ..config import Settings
from ..models import CompactReport
from ..request_lock import RequestLock
from .inbox import HookInbox

log = logging.getLogger("engram.daemon")

SPOOL_POLL_S = 2.0
# Compaction (service.compact) runs when a store is due and no request came for COMPACT_IDLE_S, checked every
# COMPACT_CHECK_S; a daemon that is never idle still compacts a due store after COMPACT_FORCE_S.
COMPACT_CHECK_S = 10.0
COMPACT_IDLE_S = 2.0
COMPACT_FORCE_S = 120.0
# Except during a bulk write: an import is never idle, so the forced rule would compact the growing store again and
# again, and `engram import` compacts what it grew at its end anyway (docs/daemon.md, "Compaction").
BULK_WRITES = frozenset({"import_lines", "restore_memories"})
BULK_QUIET_S = 60.0


class Activity:
    """The requests being answered now and when the last one ended. A store is not compacted while one runs (an
    import chunk lasts seconds, and an idle rule counted from its start would compact between chunks)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests_running = 0
        self.bulk_running = 0
        self.last_bulk_write = -BULK_QUIET_S
        self.last_request = time.monotonic()
        self.last_activity = time.monotonic()  # a request or a connection's end: the idle exit counts from it

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        self.last_activity = self.last_request = time.monotonic()
        with self.lock:
            self.requests_running += 1
        try:
            yield
        finally:
            with self.lock:
                self.requests_running -= 1
                self.last_request = time.monotonic()  # idle is counted from the end of the last answer

    @contextlib.contextmanager
    def bulk_write(self) -> Iterator[None]:
        with self.lock:
            self.bulk_running += 1
        try:
            yield
        finally:
            with self.lock:
                self.bulk_running -= 1
                self.last_bulk_write = time.monotonic()

    def quiet_for(self, seconds: float, now: float | None = None) -> bool:
        """No request is being answered and none was for ``seconds``."""
        now = time.monotonic() if now is None else now
        with self.lock:
            return self.requests_running == 0 and now - self.last_request >= seconds

    def bulk_writing(self, now: float) -> bool:
        """An import or restore is running, or its last chunk ended less than BULK_QUIET_S ago."""
        with self.lock:
            return self.bulk_running > 0 or now - self.last_bulk_write < BULK_QUIET_S


class Background:
    """The daemon's background thread and the compactions it (or `engram compact`) runs.

    ``service`` gives the daemon's service (None once closed); ``busy`` says whether something (an MCP session,
    an event not yet applied) keeps the daemon up; ``on_idle`` stops it after ``idle_timeout_s`` without either.
    ``not_compacting`` is clear while a compaction runs: the inbox's worker waits for it."""

    def __init__(
        self,
        *,
        settings: Settings,
        activity: Activity,
        inbox: HookInbox,
        lock: RequestLock,
        service: Callable[[], Any],
        stop_event: threading.Event,
        not_compacting: threading.Event,
        busy: Callable[[], bool],
        on_idle: Callable[[], None],
        idle_timeout_s: float,
    ) -> None:
        self.settings = settings
        self.activity = activity
        self.inbox = inbox
        self.lock = lock
        self._service = service
        self.stop_event = stop_event
        self.not_compacting = not_compacting
        self._busy = busy
        self._on_idle = on_idle
        self.idle_timeout_s = idle_timeout_s
        self.compactions = 0
        self.compacting_since: float | None = None  # time.monotonic() when the running compaction began

    def run(self) -> None:
        """The loop of the daemon's background thread, until the daemon stops."""
        last_maint = time.monotonic()
        last_spool = time.monotonic()
        last_check = last_compact = last_sync = time.monotonic()
        # ENGRAM_COMPACT_CHECK_S=0 turns automatic compaction off (bench/growth.py measures the difference).
        check_s = float(os.environ.get("ENGRAM_COMPACT_CHECK_S") or COMPACT_CHECK_S)
        while not self.stop_event.wait(0.25):
            now = time.monotonic()
            if check_s > 0 and now - last_check >= check_s and self.compaction_wanted(now, last_compact):
                last_check = last_compact = now
                self.compact_due()
            if now - last_spool >= SPOOL_POLL_S:
                last_spool = now
                try:
                    self.inbox.ingest_spool()
                except Exception:
                    log.exception("spool ingestion failed")
            if now - last_maint >= self.settings.maintenance_interval_s:
                last_maint = now
                try:
                    service = self._service()  # the sweep takes the request lock a slice at a time itself
                    if service is not None:
                        report = service.maintain()
                        log.info("maintenance: %s", report.model_dump_json())
                except Exception:
                    log.exception("maintenance sweep failed")
            if self.settings.sync_interval_s and now - last_sync >= self.settings.sync_interval_s:
                last_sync = now
                self.sync_due()
            # An idle plain connection does not keep the daemon up (it is closed after CONN_IDLE_S anyway);
            # an MCP connection is a live agent session and does.
            if self._busy():
                self.activity.last_activity = now
            elif self.idle_timeout_s and now - self.activity.last_activity > self.idle_timeout_s:
                log.info("idle for %.0f s: exiting", self.idle_timeout_s)
                self._on_idle()
                return

    def sync_due(self) -> None:
        """The scheduled sync (sync_interval_s) of each channel set up with `engram sync init`; offline is no
        error (the change files wait), any other failure is logged and tried again next time."""
        service = self._service()
        if service is None or self.stop_event.is_set():
            return
        for ch in service.sync_status().channels:
            if not ch.configured:
                continue
            try:
                report = service.sync_run(team=ch.channel == "team")
                log.info("scheduled %s sync: %s", ch.channel, "; ".join(report.steps) or "nothing to do")
            except Exception:
                log.exception("scheduled %s sync failed", ch.channel)

    def compaction_wanted(self, now: float, last_compact: float) -> bool:
        """Idle, or a due store has waited COMPACT_FORCE_S while requests kept coming (not during a bulk write)."""
        return self.idle_for_compaction(now) or (
            now - last_compact >= COMPACT_FORCE_S and not self.activity.bulk_writing(now)
        )

    def idle_for_compaction(self, now: float) -> bool:
        """No request is being answered and none was for COMPACT_IDLE_S."""
        return self.activity.quiet_for(COMPACT_IDLE_S, now)

    def compact_due(self) -> None:
        try:
            service = self._service()
            if service is None or self.stop_event.is_set():
                return
            with self.compacting():  # takes the request lock a piece at a time itself (maintenance.compact)
                report = service.compact(only_due=True)
            if report.stores:
                self.drop_applied_events()
            for st in report.stores:
                self.compactions += 1
                log.info(
                    "compacted %s: %d -> %d bytes in %.0f ms",
                    st.path,
                    st.before_bytes,
                    st.after_bytes,
                    st.took_ms,
                )
        except Exception:
            log.exception("compaction failed")

    def compact(self, params: dict[str, Any]) -> CompactReport:
        """`engram compact`: the service's compact, then the journal loses the text of applied events."""
        from ..service import call_api

        service = self._service()
        if service is None:
            raise RuntimeError("the daemon is shutting down; retry in a moment")
        with self.compacting():  # takes the request lock a piece at a time itself (maintenance.compact)
            report: CompactReport = call_api(service, "compact", params)
        self.drop_applied_events()
        return report

    def drop_applied_events(self) -> None:
        """After a compaction: the journal loses the text of applied events too (unless the daemon has closed
        meanwhile: a compaction that stopped for `engram stop` ends after the journal was closed)."""
        with self.lock:
            if self._service() is not None:
                self.inbox.drop_applied_text()

    @contextlib.contextmanager
    def compacting(self) -> Iterator[None]:
        """Marks a compaction as running (`engram stop` says it waits for it). Hook events wait for its end: they
        are journaled, and a write would make the copy it makes between requests stale."""
        self.compacting_since = time.monotonic()
        self.not_compacting.clear()
        try:
            yield
        finally:
            self.compacting_since = None
            self.not_compacting.set()
