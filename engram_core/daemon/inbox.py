"""The daemon's hook-event inbox: accept (journal first), queue, apply on one worker thread, retry, ingest the spool.

Hook events are acknowledged before they are applied (a hook must not wait for an embedding), so each is journaled
(:class:`~.journal.Journal`) before its ack and replayed at the next start if it was not applied. An event that
fails to apply is retried, then parked, never dropped. The spool holds events hooks could not deliver; `/clear`
pairing tells the MCP server which session now carries on an old one. No socket here: the daemon is the transport.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import ensure_private_child, find_project_root
from ..models import FlushReport
from ..redaction import redact_value
from .journal import JOURNAL_NAME, Journal, event_id_of

log = logging.getLogger("engram.daemon")

SPOOL_DIR = "spool"
SPOOL_REJECTED = "rejected"  # spool entries that cannot be ingested, moved aside once
# A new session's database (work that holds the GIL for stretches) is created when its first other event arrives
# or after this delay, not while Claude Code waits on its MCP server's `initialize`.
SESSION_REGISTER_DELAY_S = 2.0
# A hook event that fails to apply is retried after these delays, then parked and retried every PARKED_RETRY_S.
RETRY_DELAYS_S = (1.0, 5.0, 15.0)
PARKED_RETRY_S = 300.0


class HookInbox:
    """Hook events from acknowledgement to applied. ``service`` gives the daemon's service (None once closed);
    ``not_compacting`` is clear while a compaction runs, and the worker waits for it (see Background.compacting).
    """

    def __init__(
        self,
        home: Path,
        service: Callable[[], Any],
        stop_event: threading.Event,
        not_compacting: threading.Event,
    ) -> None:
        self.home = home
        self._service = service
        self.stop_event = stop_event
        self.not_compacting = not_compacting
        self.spool_dir = ensure_private_child(home, SPOOL_DIR)
        ensure_private_child(self.spool_dir, "tmp")
        self.journal: Journal | None = None
        self.events_applied = 0
        self.events_failed = 0
        self.spool_ingested = 0
        self.spool_rejected: dict[str, str] = {}  # name -> why, this run
        self.queue: queue.Queue[tuple[str, dict[str, Any]] | None] = queue.Queue()
        # Events that failed to apply: attempts so far, the timers of their next try, and the parked ones.
        self._retries: dict[str, int] = {}
        self._timers: dict[str, threading.Timer] = {}
        self.parked: dict[str, dict[str, Any]] = {}
        # ENGRAM_EVENT_RETRY_S="1,5,15" overrides RETRY_DELAYS_S (the fault tests park an event in a second).
        raw = os.environ.get("ENGRAM_EVENT_RETRY_S", "")
        self.retry_delays = tuple(float(x) for x in raw.split(",") if x.strip()) or RETRY_DELAYS_S
        self._inflight = 0
        self._inflight_cv = threading.Condition()
        self.after_turn: Any = None  # hook_events.AfterTurnPass, made by open() (it imports the core)
        # `/clear` gives the hooks a new session id but keeps the MCP server (and its CLAUDE_CODE_SESSION_ID):
        # unmatched clear ends and starts, and the session that replaced each ended one (session_successor).
        self._clears: dict[str, list[tuple[str | None, str, float]]] = {"end": [], "start": []}
        self._successors: dict[str, str] = {}
        self._clear_lock = threading.Lock()
        # Journaled session_start events not yet queued: session id -> (event id, event, timer).
        self._pending_starts: dict[str, tuple[str, dict[str, Any], threading.Timer]] = {}
        self._pending_starts_lock = threading.Lock()

    # ── lifecycle ────────────────────────────────────────────
    def open(self) -> None:
        """Read the journal (what was acknowledged and not applied waits in it)."""
        from ..integrations.claude_code import hook_events

        self.journal = Journal(self.home / JOURNAL_NAME)
        self.after_turn = hook_events.AfterTurnPass()

    def start(self) -> None:
        """Start the worker, queue the journaled events again, take in the spool."""
        assert self.journal is not None
        threading.Thread(target=self._worker, name="engram-events", daemon=True).start()
        replay = list(self.journal.pending.items())
        for eid, ev in replay:
            self._enqueue(eid, ev, replay=True)
        if replay:
            log.info("replaying %d journaled event(s)", len(replay))
        self.ingest_spool()

    def stop(self) -> None:
        """Let the worker finish what it acknowledged; anything left stays in the journal for the next start."""
        with self._pending_starts_lock:  # journaled: the next start replays them
            for _eid, _event, timer in self._pending_starts.values():
                timer.cancel()
            self._pending_starts.clear()
        # Events waiting for a retry stay in the journal for the next start; a flush must not wait for them.
        for eid, timer in list(self._timers.items()):
            timer.cancel()
            if self._timers.pop(eid, None) is not None and eid not in self.parked:
                with self._inflight_cv:
                    self._inflight -= 1
                    self._inflight_cv.notify_all()
        self.queue.put(None)
        self.wait_drained(10.0)

    def close(self) -> None:
        if self.journal is not None:
            self.journal.close()

    def busy(self) -> bool:
        """Acknowledged events not yet applied or parked (they keep the daemon from exiting idle)."""
        return self._inflight > 0

    def drop_applied_text(self) -> None:
        """The journal loses the text of applied events (after a compaction: see Journal.rewrite)."""
        if self.journal is not None:
            self.journal.rewrite()

    # ── accepting ────────────────────────────────────────────
    def hook_event(self, event: dict[str, Any] | None) -> dict[str, Any]:
        """One event from a hook: checked, journaled, queued; a second one with the same id is a duplicate."""
        event = redact_value(event)  # whole, before an error message can quote it
        from ..integrations.claude_code import hook_events

        hook_events.check(
            event
        )  # before the journal: a malformed event is refused, never acknowledged then dropped
        assert isinstance(event, dict)
        eid = event_id_of(json.dumps(event, sort_keys=True), event)
        accepted = self.accept(eid, event)
        return {"accepted": accepted, "event_id": eid, "duplicate": not accepted}

    def session_started(self, session_id: str, cwd: str | None, source: str | None) -> None:
        """Journal the session's registration, queued when its next event arrives (see Daemon.m_hook_session_start)."""
        self.accept(
            "ss_" + os.urandom(16).hex(),
            {"kind": "session_start", "session_id": session_id, "cwd": cwd, "source": source},
            defer=True,
        )

    def accept(self, eid: str, event: dict[str, Any], defer: bool = False) -> bool:
        """Journal the event, then queue it (``defer``: a session_start, queued later by release_start)."""
        assert self.journal is not None
        # Redacted whole, before the journal (a file) sees it: raw socket events and spooled ones alike.
        event = redact_value(event)
        if not self.journal.begin(eid, event):
            return False
        session = str(event.get("session_id") or "")
        if session and "clear" in (event.get("reason"), event.get("source")):
            cwd = event.get("cwd")
            self._note_clear(str(event.get("kind")), str(find_project_root(cwd)) if cwd else None, session)
        if defer and session:
            timer = threading.Timer(SESSION_REGISTER_DELAY_S, self.release_start, (session,))
            timer.daemon = True
            with self._pending_starts_lock:
                earlier = self._pending_starts.pop(session, None)
                if earlier is not None:  # a second SessionStart (resume): the first goes ahead of it
                    earlier[2].cancel()
                    self._enqueue(earlier[0], earlier[1])
                self._pending_starts[session] = (eid, event, timer)
            timer.start()
            return True
        if session:
            self.release_start(session)
        self._enqueue(eid, event)
        return True

    def _note_clear(self, kind: str, project: str | None, session: str) -> None:
        """Pair SessionEnd(reason clear) with SessionStart(source clear) of the same project, whichever reaches
        the daemon first (an end may come late through the spool): the new session succeeds the old one."""
        if kind not in ("session_end", "session_start"):
            return
        kind, other = ("end", "start") if kind == "session_end" else ("start", "end")
        now = time.monotonic()
        with self._clear_lock:
            waiting = self._clears[other]
            for i in range(len(waiting) - 1, -1, -1):
                proj, sid, at = waiting[i]
                if proj == project and now - at < 60 and sid != session:
                    old, new = (session, sid) if kind == "end" else (sid, session)
                    self._successors[old] = new
                    del waiting[i]
                    return
            self._clears[kind] = [*self._clears[kind][-50:], (project, session, now)]

    def session_successor(self, session: str) -> str:
        """The session that now carries on `session` in its Claude Code process (after `/clear`), else itself."""
        seen = {session}
        while session in self._successors and self._successors[session] not in seen:
            session = self._successors[session]
            seen.add(session)
        return session

    def release_start(self, session: str) -> None:
        """Queue the session's journaled session_start, if it still waits (before the caller queues its event)."""
        with self._pending_starts_lock:
            pending = self._pending_starts.pop(session, None)
            if pending is not None:
                pending[2].cancel()
                self._enqueue(pending[0], pending[1])

    def _enqueue(self, eid: str, event: dict[str, Any], replay: bool = False) -> None:
        with self._inflight_cv:
            self._inflight += 1
        self.queue.put((eid, {**event, "_replay": replay} if replay else event))

    # ── applying ─────────────────────────────────────────────
    def flush(self, timeout_s: float) -> FlushReport:
        """Wait until every acknowledged hook event has been applied (tests, `engram status --flush`)."""
        self.ingest_spool()
        self.retry_now()
        for session in list(self._pending_starts):
            self.release_start(session)
        drained = self.wait_drained(float(timeout_s))
        return FlushReport(
            drained=drained, queued=self.queue.qsize(), applied=self.events_applied, parked=len(self.parked)
        )

    def wait_drained(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self._inflight_cv:
            while self._inflight > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._inflight_cv.wait(left)
        return True

    def _worker(self) -> None:
        while True:
            item = self.queue.get()
            if item is None:
                if self.stop_event.is_set() and self.queue.empty():
                    return
                continue
            eid, event = item
            while not self.not_compacting.wait(0.25) and not self.stop_event.is_set():
                pass  # see Background.compacting
            try:
                self.apply_event(eid, event)
            except Exception as exc:
                self._failed(eid, event, exc)
                continue
            self.events_applied += 1
            assert self.journal is not None
            self.journal.finish(eid)
            with self._inflight_cv:
                was_parked = self.parked.pop(eid, None) is not None
                attempts = self._retries.pop(eid, 0)
                if not was_parked:
                    self._inflight -= 1
                self._inflight_cv.notify_all()
            if attempts:
                log.info("hook event %s applied after %d failed attempt(s)", eid, attempts)

    def _failed(self, eid: str, event: dict[str, Any], exc: Exception) -> None:
        """An acknowledged event that did not apply (a full disk, a store that cannot open…) stays in the journal
        and is retried: soon at first, then, parked with its error in `engram status`, every PARKED_RETRY_S and at
        every start. It is never dropped."""
        from pydantic import ValidationError

        from ..service import EngramError

        self.events_failed += 1
        attempts = self._retries.get(eid, 0) + 1
        self._retries[eid] = attempts
        message = f"{exc.__class__.__name__}: {exc}"
        # A refusal (a folder that is gone, a session that ended) will not change in seconds: parked at once.
        permanent = isinstance(exc, EngramError | ValidationError | LookupError)
        if attempts <= len(self.retry_delays) and not permanent:
            delay = self.retry_delays[attempts - 1]
            log.warning(
                "hook event %s not applied (attempt %d, retrying in %.0f s): %s",
                eid,
                attempts,
                delay,
                message,
            )
        else:
            delay = PARKED_RETRY_S
            with self._inflight_cv:
                if eid not in self.parked:
                    self._inflight -= 1  # a flush does not wait for a parked event; status shows it
                    log.error(
                        "hook event %s parked after %d attempts (kept in the journal, retried every %.0f s "
                        "and at the next start): %s",
                        eid,
                        attempts,
                        delay,
                        message,
                    )
                self.parked[eid] = {
                    "event_id": eid,
                    "kind": event.get("kind"),
                    "attempts": attempts,
                    "error": message[:500],
                    "since": time.time(),
                }
                self._inflight_cv.notify_all()
        # A retry checks whether the memory was written after all before writing it again.
        retry = {**event, "_replay": True}
        timer = threading.Timer(delay, self._retry, (eid, retry))
        timer.daemon = True
        self._timers[eid] = timer
        timer.start()

    def _retry(self, eid: str, event: dict[str, Any]) -> None:
        if self._timers.pop(eid, None) is not None and not self.stop_event.is_set():
            self.queue.put((eid, event))

    def retry_now(self) -> int:
        """Apply the waiting and parked events now (`flush`): space may be back."""
        n = 0
        for eid, timer in list(self._timers.items()):
            timer.cancel()
            if self._timers.pop(eid, None) is not None:
                assert self.journal is not None
                event = self.journal.pending.get(eid)
                if event is not None:
                    with self._inflight_cv:  # a flush waits for it again; failing again parks it again
                        if self.parked.pop(eid, None) is not None:
                            self._inflight += 1
                    self.queue.put((eid, {**event, "_replay": True}))
                    n += 1
        return n

    def apply_event(self, eid: str, event: dict[str, Any]) -> None:
        """Apply one event (hook_events.apply says what it means); the after-turn pass it asks for runs aside."""
        from ..integrations.claude_code import hook_events

        svc = self._service()
        if svc is None:
            raise RuntimeError("service closed")
        due = hook_events.apply(svc, eid, event)
        if due is not None and self.after_turn is not None and self.after_turn.due(due):
            threading.Thread(
                target=hook_events.AfterTurnPass.run,
                args=(svc, due.project),
                name="engram-after-turn",
                daemon=True,
            ).start()

    # ── spool: events hooks could not deliver ────────────────
    def ingest_spool(self) -> int:
        """Rename-then-process each published spool file; event ids already journaled are skipped."""
        from ..integrations.claude_code import hook_events

        n = 0
        for path in sorted(self.spool_dir.glob("*.jsonl")):
            claimed = (
                path.with_name("ingesting-" + path.name) if not path.name.startswith("ingesting-") else path
            )
            try:
                if claimed != path:
                    os.replace(path, claimed)
            except FileNotFoundError:
                continue
            if not claimed.is_file() or claimed.is_symlink():
                self._reject_spool(
                    claimed, "not a regular file" + (" (a directory)" if claimed.is_dir() else "")
                )
                continue
            try:
                with open(claimed, "rb") as fh:
                    for raw in fh:
                        if not raw.strip():
                            continue
                        try:
                            event = json.loads(raw)
                        except ValueError:
                            log.warning("spool %s: a line that is not JSON was skipped", claimed.name)
                            continue
                        if not isinstance(event, dict):
                            continue
                        if event.get("kind") == "session_start":
                            continue  # its context could not be injected any more; the session starts lazily
                        try:
                            hook_events.check(event)
                        except ValueError as exc:
                            log.warning("spool %s: an event was skipped: %s", claimed.name, exc)
                            continue
                        if self.accept(event_id_of(raw, event), event):
                            n += 1
                claimed.unlink()
            except OSError as exc:
                # moved aside once: a file that cannot be read now will not be readable at the next poll either
                self._reject_spool(claimed, f"{exc.__class__.__name__}: {exc.strerror or exc}")
        # Spool files claimed by a daemon that died mid-ingest: the journal dedups what it had already taken.
        self.spool_ingested += n
        if n:
            log.info("ingested %d spooled event(s)", n)
        return n

    def _reject_spool(self, path: Path, why: str) -> None:
        """An entry the spool cannot ingest goes to spool/rejected/ once, with the reason in the log and in
        `engram status`; it is never retried (else it would be polled, and logged, every few seconds forever)."""
        name = path.name.removeprefix("ingesting-")
        dest = ensure_private_child(self.spool_dir, SPOOL_REJECTED) / name
        if os.path.lexists(dest):
            dest = dest.with_name(f"{time.time_ns()}-{name}")
        try:
            os.replace(path, dest)
        except OSError as exc:
            log.error(
                "spool entry %s cannot be ingested (%s) nor moved aside (%s): remove it", path, why, exc
            )
            return
        self.spool_rejected[name] = why
        log.warning("spool entry %s cannot be ingested (%s): moved to %s and not retried", name, why, dest)

    def rejected_spool(self) -> list[str]:
        """What `engram status` says about each entry moved aside (this run's reason, else only its name)."""
        folder = self.spool_dir / SPOOL_REJECTED
        names = sorted(os.listdir(folder)) if folder.is_dir() else []
        return [f"{n}: {self.spool_rejected.get(n, 'moved aside by an earlier run')}" for n in names[:20]]
