"""`engram serve`: the one process that owns the stores, the embedding model and the background work.

Everything else (CLI, TUI, MCP servers, hooks) is a client speaking :mod:`engram_core.wire.protocol` over
``$ENGRAM_HOME/engram.sock``. Why one owner: an embedded SurrealDB store can be opened by one process only,
and the embedding model costs seconds and hundreds of MB to load (docs/daemon.md).

The daemon is the transport: the socket, the request dispatch and its own lifecycle. Hook events go to its
:class:`~.inbox.HookInbox` (journal, queue, retries, spool, `/clear` pairing); compaction, maintenance, sync and
the idle exit to its :class:`~.background.Background`.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import inspect
import json
import logging
import os
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
from ..config import ensure_private_dir, load_settings
from ..models import CompactReport, DaemonStatus, FlushReport, ShutdownAck
from ..redaction import redact_text
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
from .background import BULK_WRITES, Activity, Background
from .inbox import HookInbox

log = logging.getLogger("engram.daemon")
LOGGERS = ("engram", "engram_core")  # what engram.log receives

# Socket bounds (see _Handler).
MAX_CONNECTIONS = 64
CONN_IDLE_S = 300.0
LINE_TIMEOUT_S = 10.0
WRITE_TIMEOUT_S = 60.0
MAX_PARTIAL_BYTES = 32 * 1024 * 1024
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
        self.started = time.time()
        self.activity = Activity()
        self.requests = 0
        self.errors = 0
        self.connections = 0
        self.mcp_connections = 0
        self.partial_bytes = 0  # bytes of request lines received but not yet complete, all connections
        self.conn_lock = threading.Lock()
        # ENGRAM_CONN_IDLE_S / ENGRAM_LINE_TIMEOUT_S override the socket bounds (the tests shorten them).
        self.conn_idle_s = float(os.environ.get("ENGRAM_CONN_IDLE_S") or CONN_IDLE_S)
        self.line_timeout_s = float(os.environ.get("ENGRAM_LINE_TIMEOUT_S") or LINE_TIMEOUT_S)
        self.model_state = "not loaded"
        # One API request at a time: each is atomic (correctness over concurrency). Background work takes it a
        # slice at a time through lock.background(), after every waiting request (request_lock.py).
        self.lock = RequestLock()
        self.stop_event = threading.Event()
        not_compacting = threading.Event()
        not_compacting.set()
        self.inbox = HookInbox(self.home, lambda: self.service, self.stop_event, not_compacting)
        self.background = Background(
            settings=self.settings,
            activity=self.activity,
            inbox=self.inbox,
            lock=self.lock,
            service=lambda: self.service,
            stop_event=self.stop_event,
            not_compacting=not_compacting,
            busy=lambda: self.mcp_connections > 0 or self.inbox.busy(),
            on_idle=self.request_stop,
            idle_timeout_s=self.idle_timeout_s,
        )
        self._lock_fd = self._acquire_lock()
        self._service_factory = service_factory
        self._warm_model = warm_model
        self.service: Any = None
        self.server: socketserver.ThreadingUnixStreamServer | None = None
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
        from ..service import EngramService

        t0 = time.perf_counter()
        self.inbox.open()
        self.service = (self._service_factory or (lambda h: EngramService(h)))(self.home)
        self.service.api_lock = self.lock
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
        self.inbox.start()
        threading.Thread(target=self.background.run, name="engram-background", daemon=True).start()
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
            if self.activity.quiet_for(WARM_MCP_QUIET_S):
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
        self.inbox.stop()
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
        self.inbox.close()
        with contextlib.suppress(OSError):
            os.ftruncate(self._lock_fd, 0)
            os.close(self._lock_fd)
        log.info("engram daemon stopped")

    # ── requests ─────────────────────────────────────────────
    def handle_line(self, line: bytes) -> bytes:
        self.requests += 1
        with self.activity.answering():
            return self._answer(line)

    def _answer(self, line: bytes) -> bytes:
        req_id: Any = None
        try:
            req_id, method, params, client_v = parse_request(line)
            if client_v != PROTOCOL_VERSION:
                return error(req_id, "ProtocolMismatch", mismatch_message(PROTOCOL_VERSION, client_v))
            if method not in BULK_WRITES:
                return ok(req_id, self.dispatch(method, params))
            with self.activity.bulk_write():
                return ok(req_id, self.dispatch(method, params))
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
        inbox = self.inbox
        return DaemonStatus(
            **{
                **self.m_hello(),
                "uptime_s": round(time.time() - self.started, 1),
                "socket": str(self.sock_path),
                "idle_timeout_s": self.idle_timeout_s,
                "requests": self.requests,
                "errors": self.errors,
                "connections": self.connections,
                "events_queued": inbox.queue.qsize(),
                "events_applied": inbox.events_applied,
                "events_failed": inbox.events_failed,
                "spool_ingested": inbox.spool_ingested,
                "compactions": self.background.compactions,
                "spool_waiting": len(list(inbox.spool_dir.glob("*.jsonl"))),
                "spool_rejected": inbox.rejected_spool(),
                "journal_pending": len(inbox.journal.pending) if inbox.journal else 0,
                "events_parked": len(inbox.parked),
                "parked": list(inbox.parked.values())[:20],
                "sessions_active": len(svc.scopes.live_sessions()) if svc is not None else 0,
                "projects_open": len(svc.scopes.open_projects()) if svc is not None else 0,
                "embedding": getattr(getattr(svc, "embedder", None), "name", None),
                "rss_mb": heap.rss_mb(),
                "heap_arenas": heap.arenas(),
            }
        )

    def m_shutdown(self, **_: Any) -> ShutdownAck:
        since = self.background.compacting_since
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
        return self.inbox.flush(float(timeout_s))

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
        return self.background.compact(params)

    def m_hook_event(self, event: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        return self.inbox.hook_event(event)

    def session_successor(self, session: str) -> str:
        """The session that now carries on `session` in its Claude Code process (after `/clear`), else itself."""
        return self.inbox.session_successor(session)

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
            self.inbox.session_started(session_id, cwd, source)
        return answer

    def m_hook_prompt(
        self, prompt: str = "", session_id: str | None = None, cwd: str | None = None, **_: Any
    ) -> dict[str, Any]:
        """UserPromptSubmit recall (hook_events.prompt_context): off unless prompt_recall is set."""
        from ..integrations.claude_code import hook_events

        return hook_events.prompt_context(self.service, prompt, session_id, cwd)


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
            daemon.activity.last_activity = time.monotonic()

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
