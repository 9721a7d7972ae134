"""`engram serve`: the one process that owns the stores, the embedding model and the background work.

Everything else (CLI, TUI, MCP servers, hooks) is a client speaking :mod:`engram_core.wire.protocol` over
``$ENGRAM_HOME/engram.sock``. Why one owner: an embedded SurrealDB store can be opened by one process only,
and the embedding model costs seconds and hundreds of MB to load (docs/daemon.md).

Durability (docs/daemon.md): a surrealkv write that has returned survives ``kill -9`` of the
process (the engine has handed it to the kernel), so synchronous API calls need no journal of ours. Hook events
are different: the daemon acknowledges them *before* applying them (a hook must not wait for an embedding), so
they go through :class:`Journal` (append + fsync, then apply, then mark done) and are replayed on start.
The same journal makes spool ingestion exactly-once: an event id already begun is never applied again.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import inspect
import json
import logging
import os
import queue
import signal
import socket
import socketserver
import sys
import threading
import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from .. import __version__, heap
from ..config import ensure_private_child, ensure_private_dir, find_project_root, load_settings
from ..models import CompactReport, DaemonStatus, FlushReport, ShutdownAck
from ..redaction import redact_text, redact_value
from ..request_lock import RequestLock
from ..wire.protocol import (
    MAX_LINE,
    PROTOCOL_VERSION,
    ProtocolError,
    error,
    mismatch_message,
    ok,
    parse_request,
    pid_path,
    private_open,
    socket_path,
)
from ..wire.types import WireTypeError, type_expr

log = logging.getLogger("engram.daemon")
LOGGERS = ("engram", "engram_core")  # what engram.log receives

JOURNAL_NAME = "journal.jsonl"
SPOOL_DIR = "spool"
SPOOL_REJECTED = "rejected"  # spool entries that cannot be ingested, moved aside once
KEEP_DONE_IDS = 50_000
SPOOL_POLL_S = 2.0
# A new session's database (work that holds the GIL for stretches) is created when its first other event arrives
# or after this delay, not while Claude Code waits on its MCP server's `initialize`.
SESSION_REGISTER_DELAY_S = 2.0
# Socket bounds (see _Handler).
MAX_CONNECTIONS = 64
CONN_IDLE_S = 300.0
LINE_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 60.0
MAX_PARTIAL_BYTES = 32 * 1024 * 1024
# A hook event that fails to apply is retried after these delays, then parked and retried every PARKED_RETRY_S.
RETRY_DELAYS_S = (1.0, 5.0, 15.0)
PARKED_RETRY_S = 300.0
# Compaction (service.compact) runs when a store is due and no request came for COMPACT_IDLE_S, checked every
# COMPACT_CHECK_S; a daemon that is never idle still compacts a due store after COMPACT_FORCE_S.
COMPACT_CHECK_S = 10.0
COMPACT_IDLE_S = 2.0
COMPACT_FORCE_S = 120.0
# Except during a bulk write: an import is never idle, so the forced rule would compact the growing store again and
# again, and `engram import` compacts what it grew at its end anyway (docs/daemon.md, "Compaction").
BULK_WRITES = frozenset({"import_lines", "restore_memories"})
BULK_QUIET_S = 60.0
# The MCP server is built in the background once no request has run for WARM_MCP_QUIET_S (at most
# WARM_MCP_WITHIN_S after the model loaded): see Daemon._warm.
WARM_MCP_QUIET_S = 0.5
WARM_MCP_WITHIN_S = 30.0


class AlreadyRunning(RuntimeError):
    def __init__(self, pid: int | None, home: Path) -> None:
        super().__init__(
            f"an Engram daemon is already running for {home} (pid {pid or '?'}); "
            "use `engram status` or `engram stop`"
        )
        self.pid = pid


# ── journal of acknowledged-but-not-yet-applied events ───────────────────────
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


# ── what the client needs to rebuild results (wire/types.py) ─────────────────
def method_info() -> tuple[dict[str, str], dict[str, list[str]]]:
    """Per API method: its return type as an expression over engram_core.models names, and its parameter names
    (after self/service). A method without a return type the client can rebuild stops the daemon at start."""
    from ..api import parameter_names
    from ..service import API_METHODS

    returns: dict[str, str] = {}
    params: dict[str, list[str]] = {}
    for name, fn in API_METHODS.items():
        raw = inspect.unwrap(fn)
        hints = typing.get_type_hints(raw)
        if "return" not in hints:
            raise WireTypeError(f"API method {name} declares no return type: the client could not rebuild it")
        try:
            returns[name] = type_expr(hints["return"])
        except WireTypeError as exc:
            raise WireTypeError(f"API method {name}: {exc}") from None
        params[name] = parameter_names(name)
    for name, fn in inspect.getmembers(Daemon, inspect.isfunction):  # its own: m_status answers "status"
        if name.startswith("m_"):
            returns[name[2:]] = type_expr(typing.get_type_hints(fn)["return"])
            params.setdefault(
                name[2:],
                [
                    p.name
                    for p in inspect.signature(fn).parameters.values()
                    if p.name != "self" and p.kind is p.POSITIONAL_OR_KEYWORD
                ],
            )
    return returns, params


# ── the daemon ───────────────────────────────────────────────────────────────
class Daemon:
    def __init__(
        self,
        home: Path,
        *,
        idle_timeout_s: float | None = None,
        warm_model: bool = True,
        service_factory: Callable[[Path], Any] | None = None,
    ) -> None:
        self.home = ensure_private_dir(home)
        self.settings = load_settings(home=self.home)
        self.idle_timeout_s = (
            self.settings.daemon_idle_timeout_s if idle_timeout_s is None else idle_timeout_s
        )
        self.sock_path = socket_path(self.home)
        self.spool_dir = ensure_private_child(self.home, SPOOL_DIR)
        ensure_private_child(self.spool_dir, "tmp")
        self.started = time.time()
        self.last_activity = time.monotonic()
        self.last_request = time.monotonic()
        # Requests being answered now: a store is not compacted while one runs (an import chunk lasts seconds, and
        # an idle rule counted from its start would compact between chunks).
        self.requests_running = 0
        self.bulk_running = 0
        self.last_bulk_write = -BULK_QUIET_S
        self._running_lock = threading.Lock()
        self.compactions = 0
        self.requests = 0
        self.errors = 0
        self.events_applied = 0
        self.events_failed = 0
        self.spool_ingested = 0
        self.spool_rejected: dict[str, str] = {}  # name -> why, this run
        self.connections = 0
        self.mcp_connections = 0
        self.partial_bytes = 0  # bytes of request lines received but not yet complete, all connections
        self.conn_lock = threading.Lock()
        # ENGRAM_CONN_IDLE_S / ENGRAM_LINE_TIMEOUT_S override the socket bounds (the tests shorten them).
        self.conn_idle_s = float(os.environ.get("ENGRAM_CONN_IDLE_S") or CONN_IDLE_S)
        self.line_timeout_s = float(os.environ.get("ENGRAM_LINE_TIMEOUT_S") or LINE_TIMEOUT_S)
        self.model_state = "not loaded"
        self.compacting_since: float | None = None  # time.monotonic() when the running compaction began
        self._not_compacting = threading.Event()
        self._not_compacting.set()
        # One API request at a time: each is atomic (correctness over concurrency). Background work takes it a
        # slice at a time through lock.background(), after every waiting request (request_lock.py).
        self.lock = RequestLock()
        self.stop_event = threading.Event()
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
        self.after_turn: Any = None  # hook_events.AfterTurnPass, made at start (it imports the core)
        # `/clear` gives the hooks a new session id but keeps the MCP server (and its CLAUDE_CODE_SESSION_ID):
        # unmatched clear ends and starts, and the session that replaced each ended one (session_successor).
        self._clears: dict[str, list[tuple[str | None, str, float]]] = {"end": [], "start": []}
        self._successors: dict[str, str] = {}
        self._clear_lock = threading.Lock()
        # Journaled session_start events not yet queued: session id -> (event id, event, timer).
        self._pending_starts: dict[str, tuple[str, dict[str, Any], threading.Timer]] = {}
        self._pending_starts_lock = threading.Lock()
        self._lock_fd = self._acquire_lock()
        self._service_factory = service_factory
        self._warm_model = warm_model
        self.service: Any = None
        self.server: socketserver.ThreadingUnixStreamServer | None = None
        self.journal: Journal | None = None
        self.api_returns: dict[str, str] = {}
        self.api_params: dict[str, list[str]] = {}

    # lock file: flock held for the daemon's life, so a crash releases it by itself
    def _acquire_lock(self) -> int:
        path = pid_path(self.home)
        fd = private_open(path, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                pid = int(os.read(fd, 32).decode().strip() or 0)
            except ValueError:
                pid = None
            os.close(fd)
            raise AlreadyRunning(pid, self.home) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        return fd

    def start(self) -> None:
        from ..integrations.claude_code import hook_events
        from ..service import EngramService

        t0 = time.perf_counter()
        self.journal = Journal(self.home / JOURNAL_NAME)
        self.service = (self._service_factory or (lambda h: EngramService(h)))(self.home)
        self.service.api_lock = self.lock
        self.after_turn = hook_events.AfterTurnPass()
        self.api_returns, self.api_params = method_info()
        self._write_launcher()
        # We hold the flock, so whatever socket file is there belongs to a dead daemon.
        if self.sock_path.exists() or self.sock_path.is_symlink():
            log.info("removing stale socket %s", self.sock_path)
            self.sock_path.unlink()
        old_umask = os.umask(0o177)
        try:
            server = _Server(str(self.sock_path), _Handler)
        finally:
            os.umask(old_umask)
        os.chmod(self.sock_path, 0o600)
        server.daemon_ref = self
        self.server = server
        threading.Thread(target=self._worker, name="engram-events", daemon=True).start()
        replay = list(self.journal.pending.items())
        for eid, ev in replay:
            self._enqueue(eid, ev, replay=True)
        if replay:
            log.info("replaying %d journaled event(s)", len(replay))
        self.ingest_spool()
        threading.Thread(target=self._background, name="engram-background", daemon=True).start()
        if self._warm_model:
            threading.Thread(target=self._warm, name="engram-warm", daemon=True).start()
        log.info(
            "engram daemon %s ready on %s in %.0f ms (pid %d)",
            __version__,
            self.sock_path,
            (time.perf_counter() - t0) * 1000,
            os.getpid(),
        )

    def _write_launcher(self) -> None:
        """Hooks run under a bare python3 without our packages: tell them which interpreter starts the daemon."""
        path = self.home / "launcher.json"
        tmp = path.with_suffix(".tmp")
        fd = private_open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "w") as fh:
            json.dump({"python": sys.executable, "module": "engram_core.daemon", "version": __version__}, fh)
        os.replace(tmp, path)

    def _warm(self) -> None:
        # The model first: it loads mostly outside the GIL, beside the first request's store opening, so the
        # first recall does not wait for it. The MCP server comes after: its imports hold the GIL.
        embedder = self.service.embedder
        self.model_state = "loading"
        try:
            ok_ = bool(getattr(embedder, "available", False))
            self.model_state = "ready" if ok_ else f"unavailable ({getattr(embedder, 'name', '?')})"
        except Exception as exc:
            self.model_state = f"error: {exc}"
        # The MCP SDK too, so that a bridge's `initialize` is answered at once; but only once no request has run
        # for a moment, since its imports hold the GIL and would slow the first recall (which opens the project
        # store and its mirrors). A bridge that comes first builds it itself.
        deadline = time.monotonic() + WARM_MCP_WITHIN_S
        while time.monotonic() < deadline and not self.stop_event.is_set():
            with self._running_lock:
                quiet = (
                    self.requests_running == 0 and time.monotonic() - self.last_request >= WARM_MCP_QUIET_S
                )
            if quiet:
                break
            self.stop_event.wait(0.05)
        try:
            from ..mcp import server as mcp_server

            t = time.perf_counter()
            built = mcp_server.shared_server()
            log.info("MCP server built in %.0f ms", (time.perf_counter() - t) * 1000)
        except Exception:
            log.exception("the MCP server could not be built")
            return
        if built is None:
            return
        try:
            # what a bridge answers by itself while the next daemon starts (its first session's tools)
            t = time.perf_counter()
            mcp_server.publish_answers(self, self.home)
            log.info("MCP answers published in %.0f ms", (time.perf_counter() - t) * 1000)
        except Exception:
            log.exception("the MCP answers could not be published")

    def serve_forever(self) -> None:
        assert self.server is not None
        try:
            self.server.serve_forever(poll_interval=0.2)
        finally:
            self.close()

    def request_stop(self) -> None:
        if self.stop_event.is_set():
            return
        self.stop_event.set()
        if (
            self.service is not None
        ):  # a compaction or a sweep gives up at its next step (MemoryCore.stopping)
            self.service.stopping.set()
        if self.server is not None:
            threading.Thread(target=self.server.shutdown, daemon=True).start()

    def close(self) -> None:
        self.stop_event.set()
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
        # Let the worker finish what it acknowledged; anything left stays in the journal for the next start.
        self.wait_drained(10.0)
        if self.server is not None:
            with contextlib.suppress(OSError):
                self.server.server_close()
        with contextlib.suppress(FileNotFoundError):
            self.sock_path.unlink()
        with self.lock:
            if self.service is not None:
                with contextlib.suppress(Exception):
                    self.service.close()
                self.service = None
        if self.journal is not None:
            self.journal.close()
        with contextlib.suppress(OSError):
            os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)
        log.info("engram daemon stopped")

    # ── requests ─────────────────────────────────────────────
    def handle_line(self, line: bytes) -> bytes:
        self.requests += 1
        self.last_activity = self.last_request = time.monotonic()
        with self._running_lock:
            self.requests_running += 1
        try:
            return self._answer(line)
        finally:
            with self._running_lock:
                self.requests_running -= 1
                self.last_request = time.monotonic()  # idle is counted from the end of the last answer

    def _answer(self, line: bytes) -> bytes:
        req_id: Any = None
        try:
            req_id, method, params, client_v = parse_request(line)
            if client_v != PROTOCOL_VERSION:
                return error(req_id, "ProtocolMismatch", mismatch_message(PROTOCOL_VERSION, client_v))
            if method not in BULK_WRITES:
                return ok(req_id, self.dispatch(method, params))
            with self._running_lock:
                self.bulk_running += 1
            try:
                return ok(req_id, self.dispatch(method, params))
            finally:
                with self._running_lock:
                    self.bulk_running -= 1
                    self.last_bulk_write = time.monotonic()
        except ProtocolError as exc:
            self.errors += 1
            return error(req_id, "ValidationError", redact_text(str(exc)))
        except Exception as exc:
            from ..api import classify

            self.errors += 1
            # error messages quote their input (pydantic does), and callers log them (the hook's hooks.log)
            kind, message = classify(exc)
            return error(req_id, kind, redact_text(message))

    def dispatch(self, method: str, params: dict[str, Any]) -> Any:
        special = getattr(self, "m_" + method, None)
        if special is not None:
            return special(**params) if params else special()
        from ..api import UnknownMethod
        from ..service import API_METHODS, UNLOCKED_API, call_api

        if method not in API_METHODS:
            raise UnknownMethod(method)
        if method in UNLOCKED_API:  # takes service.api_lock (our lock) itself, only around shared state
            service = self.service
            if service is None:
                raise RuntimeError("the daemon is shutting down; retry in a moment")
            return call_api(service, method, params)
        with self.lock:
            if self.service is None:
                raise RuntimeError("the daemon is shutting down; retry in a moment")
            return call_api(self.service, method, params)

    def m_hello(self, **_: Any) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL_VERSION,
            "pid": os.getpid(),
            "version": __version__,
            "home": str(self.home),
            "methods": self.api_returns,
            "params": self.api_params,
            "model": self.model_state,
        }

    def m_ping(self, **_: Any) -> str:
        return "pong"

    def m_status(self, **_: Any) -> DaemonStatus:
        svc = self.service
        return DaemonStatus(
            **{
                **self.m_hello(),
                "uptime_s": round(time.time() - self.started, 1),
                "socket": str(self.sock_path),
                "idle_timeout_s": self.idle_timeout_s,
                "requests": self.requests,
                "errors": self.errors,
                "connections": self.connections,
                "events_queued": self.queue.qsize(),
                "events_applied": self.events_applied,
                "events_failed": self.events_failed,
                "spool_ingested": self.spool_ingested,
                "compactions": self.compactions,
                "spool_waiting": len(list(self.spool_dir.glob("*.jsonl"))),
                "spool_rejected": self.rejected_spool(),
                "journal_pending": len(self.journal.pending) if self.journal else 0,
                "events_parked": len(self.parked),
                "parked": list(self.parked.values())[:20],
                "sessions_active": len(svc.scopes.live_sessions()) if svc is not None else 0,
                "projects_open": len(svc.scopes.open_projects()) if svc is not None else 0,
                "embedding": getattr(getattr(svc, "embedder", None), "name", None),
                "rss_mb": heap.rss_mb(),
                "heap_arenas": heap.arenas(),
            }
        )

    def m_shutdown(self, **_: Any) -> ShutdownAck:
        since = self.compacting_since
        waiting = (
            None
            if since is None
            else (
                f"a compaction running for {time.monotonic() - since:.0f} s: it stops at its next step and leaves "
                "the store as it was"
            )
        )
        self.request_stop()
        return ShutdownAck(stopping=True, pid=os.getpid(), waiting_for=waiting)

    def m_flush(self, timeout_s: float = 30.0) -> FlushReport:
        """Wait until every acknowledged hook event has been applied (tests, `engram status --flush`)."""
        self.ingest_spool()
        self.retry_now()
        for session in list(self._pending_starts):
            self._release_start(session)
        drained = self.wait_drained(float(timeout_s))
        return FlushReport(
            drained=drained, queued=self.queue.qsize(), applied=self.events_applied, parked=len(self.parked)
        )

    def attach_mcp(self, line: bytes, conn: socket.socket, rfile: Any, wfile: Any) -> None:
        """`mcp_attach`: answer this one request, then serve MCP JSON-RPC on the connection (the bridge's)."""
        req_id: Any = None
        try:
            req_id, method, params, _v = parse_request(line)
            if method != "mcp_attach":
                raise ProtocolError(f"unexpected method {method!r}")
            from ..mcp import server as mcp_server

            mcp_server.shared_server()
        except Exception as exc:
            from ..api import classify

            self.errors += 1
            wfile.write(error(req_id, *classify(exc)))
            wfile.flush()
            return
        conn.settimeout(None)  # an MCP connection idles between tool calls for as long as the session lasts
        wfile.write(ok(req_id, {"mcp": True, "pid": os.getpid(), "version": __version__}))
        wfile.flush()
        mcp_server.serve_connection(self, rfile, wfile, params)

    def m_compact(self, **params: Any) -> CompactReport:
        """The service's compact, then the journal loses the text of applied events (see Journal.rewrite)."""
        from ..service import call_api

        service = self.service
        if service is None:
            raise RuntimeError("the daemon is shutting down; retry in a moment")
        with self._compacting():  # takes the request lock a piece at a time itself (maintenance.compact)
            report: CompactReport = call_api(service, "compact", params)
        self._drop_applied_events()
        return report

    def _drop_applied_events(self) -> None:
        """After a compaction: the journal loses the text of applied events too (unless the daemon has closed
        meanwhile: a compaction that stopped for `engram stop` ends after the journal was closed)."""
        with self.lock:
            if self.service is not None and self.journal is not None:
                self.journal.rewrite()

    @contextlib.contextmanager
    def _compacting(self) -> typing.Iterator[None]:
        """Marks a compaction as running (`engram stop` says it waits for it). Hook events wait for its end: they
        are journaled, and a write would make the copy it makes between requests stale."""
        self.compacting_since = time.monotonic()
        self._not_compacting.clear()
        try:
            yield
        finally:
            self.compacting_since = None
            self._not_compacting.set()

    def m_hook_event(self, event: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        event = redact_value(event)  # whole, before an error message can quote it
        from ..integrations.claude_code import hook_events

        hook_events.check(
            event
        )  # before the journal: a malformed event is refused, never acknowledged then dropped
        assert isinstance(event, dict)
        eid = event_id_of(json.dumps(event, sort_keys=True), event)
        accepted = self._accept(eid, event)
        return {"accepted": accepted, "event_id": eid, "duplicate": not accepted}

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

    def m_hook_session_start(
        self,
        session_id: str | None = None,
        cwd: str | None = None,
        source: str | None = None,
        budget: int | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        """Return the context to inject (session_context.py) and register the session.

        Registering creates the session's database (docs/daemon.md, "Why its timings are what they are"), which
        the context does not need: it is journaled now and queued when the session's next event arrives (or after
        SESSION_REGISTER_DELAY_S), ahead of that event. Right after SessionStart, Claude Code waits for its MCP
        server's `initialize`, which that work would slow (it holds the GIL for stretches); the first prompt
        comes after that. An MCP server that joins first starts the session itself; starting is idempotent."""
        from ..integrations.claude_code import hook_events

        answer = hook_events.session_start_context(self.service, session_id, cwd, budget)
        if session_id:
            self._accept(
                "ss_" + os.urandom(16).hex(),
                {"kind": "session_start", "session_id": session_id, "cwd": cwd, "source": source},
                defer=True,
            )
        return answer

    def m_hook_prompt(
        self, prompt: str = "", session_id: str | None = None, cwd: str | None = None, **_: Any
    ) -> dict[str, Any]:
        """UserPromptSubmit recall (hook_events.prompt_context): off unless prompt_recall is set."""
        from ..integrations.claude_code import hook_events

        return hook_events.prompt_context(self.service, prompt, session_id, cwd)

    # ── hook events: journal, queue, apply ───────────────────
    def _accept(self, eid: str, event: dict[str, Any], defer: bool = False) -> bool:
        """Journal the event, then queue it (``defer``: a session_start, queued later by _release_start)."""
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
            timer = threading.Timer(SESSION_REGISTER_DELAY_S, self._release_start, (session,))
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
            self._release_start(session)
        self._enqueue(eid, event)
        return True

    def _release_start(self, session: str) -> None:
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
            while not self._not_compacting.wait(0.25) and not self.stop_event.is_set():
                pass  # see _compacting
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

        svc = self.service
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
                        if self._accept(event_id_of(raw, event), event):
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

    # ── background: idle exit, spool, maintenance ────────────
    def _background(self) -> None:
        last_maint = time.monotonic()
        last_spool = time.monotonic()
        last_check = last_compact = last_sync = time.monotonic()
        # ENGRAM_COMPACT_CHECK_S=0 turns automatic compaction off (bench/growth.py measures the difference).
        check_s = float(os.environ.get("ENGRAM_COMPACT_CHECK_S") or COMPACT_CHECK_S)
        while not self.stop_event.wait(0.25):
            now = time.monotonic()
            if check_s > 0 and now - last_check >= check_s and self.compaction_wanted(now, last_compact):
                last_check = last_compact = now
                self._compact_due()
            if now - last_spool >= SPOOL_POLL_S:
                last_spool = now
                try:
                    self.ingest_spool()
                except Exception:
                    log.exception("spool ingestion failed")
            if now - last_maint >= self.settings.maintenance_interval_s:
                last_maint = now
                try:
                    service = self.service  # the sweep takes the request lock a slice at a time itself
                    if service is not None:
                        report = service.maintain()
                        log.info("maintenance: %s", report.model_dump_json())
                except Exception:
                    log.exception("maintenance sweep failed")
            if self.settings.sync_interval_s and now - last_sync >= self.settings.sync_interval_s:
                last_sync = now
                self._sync_due()
            # An idle plain connection does not keep the daemon up (it is closed after CONN_IDLE_S anyway);
            # an MCP connection is a live agent session and does.
            busy = self.mcp_connections > 0 or self._inflight > 0
            if busy:
                self.last_activity = now
            elif self.idle_timeout_s and now - self.last_activity > self.idle_timeout_s:
                log.info("idle for %.0f s: exiting", self.idle_timeout_s)
                self.request_stop()
                return

    def _sync_due(self) -> None:
        """The scheduled sync (sync_interval_s) of each channel set up with `engram sync init`; offline is no
        error (the change files wait), any other failure is logged and tried again next time."""
        service = self.service
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
            now - last_compact >= COMPACT_FORCE_S and not self.bulk_writing(now)
        )

    def bulk_writing(self, now: float) -> bool:
        """An import or restore is running, or its last chunk ended less than BULK_QUIET_S ago."""
        with self._running_lock:
            return self.bulk_running > 0 or now - self.last_bulk_write < BULK_QUIET_S

    def idle_for_compaction(self, now: float) -> bool:
        """No request is being answered and none was for COMPACT_IDLE_S."""
        with self._running_lock:
            return self.requests_running == 0 and now - self.last_request >= COMPACT_IDLE_S

    def _compact_due(self) -> None:
        try:
            service = self.service
            if service is None or self.stop_event.is_set():
                return
            with self._compacting():  # takes the request lock a piece at a time itself (maintenance.compact)
                report = service.compact(only_due=True)
            if report.stores:
                self._drop_applied_events()
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


class _Server(socketserver.ThreadingUnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default listen backlog is 5: a handful of clients connecting at once would get EAGAIN.
    request_queue_size = 128
    daemon_ref: Daemon


class _SlowRequest(Exception):
    pass


class _Handler(socketserver.StreamRequestHandler):
    """One client connection. Bounded: at most MAX_CONNECTIONS at once, a connection with no request for
    CONN_IDLE_S is closed (clients reconnect by themselves), a request line must arrive whole within
    LINE_TIMEOUT_S of its first byte, and half-received lines of all connections together hold at most
    MAX_PARTIAL_BYTES. An MCP connection (`mcp_attach`) is exempt from the idle limit: it lasts the session."""

    server: _Server

    def handle(self) -> None:
        daemon = self.server.daemon_ref
        with daemon.conn_lock:
            refused = daemon.connections >= MAX_CONNECTIONS
            if not refused:
                daemon.connections += 1
        if refused:
            daemon.errors += 1
            with contextlib.suppress(OSError):
                self.wfile.write(
                    error(
                        None,
                        "EngramError",
                        f"the daemon already has {MAX_CONNECTIONS} connections "
                        "open; close some clients and retry",
                    )
                )
                self.wfile.flush()
            return
        try:
            while not daemon.stop_event.is_set():
                line = self._read_line(daemon)
                if not line:
                    return
                if len(line) > MAX_LINE:
                    daemon.errors += 1
                    self.wfile.write(
                        error(
                            None,
                            "ValidationError",
                            f"request larger than {MAX_LINE} bytes refused; nothing was done",
                        )
                    )
                    self.wfile.flush()
                    return  # the rest of the line cannot be skipped cheaply: close this connection only
                if not line.strip():
                    continue
                if b'"mcp_attach"' in line[:200]:
                    with daemon.conn_lock:
                        daemon.mcp_connections += 1
                    try:
                        daemon.attach_mcp(line, self.connection, self.rfile, self.wfile)
                    finally:
                        with daemon.conn_lock:
                            daemon.mcp_connections -= 1
                    return  # the connection carried MCP until the bridge closed it
                self.wfile.write(daemon.handle_line(line))
                self.wfile.flush()
        except _SlowRequest as exc:
            daemon.errors += 1
            with contextlib.suppress(OSError):
                self.wfile.write(error(None, "ValidationError", str(exc)))
                self.wfile.flush()
        except (ConnectionError, OSError):  # a timeout included: an idle connection is closed
            return
        finally:
            with daemon.conn_lock:
                daemon.connections -= 1
            daemon.last_activity = time.monotonic()

    def _read_line(self, daemon: Daemon) -> bytes:
        """The next request line ('' at end of stream), under the connection's time and memory bounds."""
        parts: list[bytes] = []
        size = 0
        start: float | None = None
        try:
            while True:
                timeout = (
                    daemon.conn_idle_s
                    if start is None
                    else daemon.line_timeout_s - (time.monotonic() - start)
                )
                if timeout <= 0:
                    raise _SlowRequest(
                        f"a request line must arrive whole within {daemon.line_timeout_s:g} s; "
                        "nothing was done"
                    )
                self.connection.settimeout(timeout)
                try:
                    chunk = cast(Any, self.rfile).peek(
                        1
                    )  # at most one read from the socket, under the timeout
                except TimeoutError:
                    if start is None:
                        raise  # idle: close quietly
                    raise _SlowRequest(
                        f"a request line must arrive whole within {daemon.line_timeout_s:g} s; "
                        "nothing was done"
                    ) from None
                if not chunk:
                    return b"".join(parts)
                nl = chunk.find(b"\n")
                taken = self.rfile.read(nl + 1 if nl >= 0 else len(chunk))
                if start is None:
                    start = time.monotonic()
                with daemon.conn_lock:
                    if daemon.partial_bytes + len(taken) > MAX_PARTIAL_BYTES and nl < 0:
                        raise _SlowRequest("the daemon is receiving too many large requests at once; retry")
                    daemon.partial_bytes += len(taken)
                parts.append(taken)
                size += len(taken)
                if nl >= 0 or size > MAX_LINE:
                    return b"".join(parts)
        finally:
            with daemon.conn_lock:
                daemon.partial_bytes -= size
            # Answers: a client that stops reading must not hold this thread for ever.
            self.connection.settimeout(WRITE_TIMEOUT_S)


class _RedactingFormatter(logging.Formatter):
    """Log lines are redacted whole, traceback included: errors quote their input (pydantic does)."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class RedactingStream:
    """stdout/stderr of the daemon (they go to engram.log when a client started it): what bypasses logging,
    such as a thread's uncaught traceback, is redacted too. Buffered by line, so a secret split over two
    writes is still seen whole; a multi-line secret is redacted line by line (PEM bodies by the END line)."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            done, sep, self._pending = self._pending.rpartition("\n")
            if sep:
                self._stream.write(redact_text(done + sep))
                self._stream.flush()
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._pending:
                self._stream.write(redact_text(self._pending))
                self._pending = ""
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _setup_logging(home: Path, verbose: bool) -> None:
    handler: logging.Handler
    if os.environ.get("ENGRAM_LOG_STDERR") or verbose:
        handler = logging.StreamHandler(sys.stderr)
    else:
        path = home / "engram.log"
        fd = private_open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        os.close(fd)
        handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(_RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    # The daemon's own loggers ("engram.*") and the core's, which log under their module names.
    for name in LOGGERS:
        root = logging.getLogger(name)
        root.handlers[:] = [handler]
        root.setLevel(logging.INFO)


def serve(home: Path, idle_timeout_s: float | None = None, verbose: bool = False) -> int:
    """Run the daemon in this process until stopped; 0 also when one is already running (it says so).
    Once the daemon has run, the process ends here (`_leave`): it never returns to the caller."""
    heap.limit_arenas()  # before any thread starts
    ensure_private_dir(home)
    sys.stdout, sys.stderr = RedactingStream(sys.stdout), RedactingStream(sys.stderr)
    _setup_logging(home, verbose)
    # Short GIL slices: the accept/handler threads answer hooks promptly while a worker thread is busy.
    sys.setswitchinterval(0.001)
    # The engine releases the GIL while it works, so a console query running to its deadline holds no hook,
    # store or recall (ENGRAM_ENGINE_THREAD=0: the synchronous binding, which holds the GIL: for comparison).
    if os.environ.get("ENGRAM_ENGINE_THREAD", "1") != "0":
        from ..storage import use_engine_thread

        use_engine_thread()
    try:
        daemon = Daemon(home, idle_timeout_s=idle_timeout_s)
    except AlreadyRunning as exc:
        print(str(exc), file=sys.stderr)
        return 0
    try:
        daemon.start()
    except Exception as exc:
        log.exception("daemon start failed")
        print(f"engram serve: could not start: {exc}", file=sys.stderr)
        daemon.close()
        _leave(1)

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal %d: stopping", signum)
        daemon.request_stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    daemon.serve_forever()  # closes every store before it returns
    _leave(0)
    return 0


def _leave(code: int) -> None:
    """End the process without interpreter finalization: the engine's asynchronous binding may abort the process
    there (SIGABRT from its runtime threads, even after every store was closed; docs/daemon.md has the figures).
    Everything is closed and journaled by now; flush what is buffered."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    from ..paths import engram_home

    parser = argparse.ArgumentParser(
        prog="engram serve", description="Run the Engram daemon in the foreground."
    )
    parser.add_argument(
        "--home", type=Path, default=None, help="data root (default: $ENGRAM_HOME or ~/.claude/engram)"
    )
    parser.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="exit after this many seconds without clients (0 = never; default from settings)",
    )
    parser.add_argument("--verbose", action="store_true", help="log to stderr")
    args = parser.parse_args(argv)
    return serve(args.home or engram_home(), args.idle_timeout, args.verbose)
