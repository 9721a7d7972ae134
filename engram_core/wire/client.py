"""A client of the daemon with the same methods as :class:`engram_core.service.EngramService`.

``connect()`` finds the daemon of this data root (starting it, detached, when none answers) and returns a
:class:`RemoteService`; ``remote.recall(query, project=…)`` sends the call and returns the method's declared
result type, rebuilt from the JSON (a ``RecallResult``, as in process), so front-end code works the same against
the in-process service or the daemon. ``call(method, …)`` is the raw form: the daemon's JSON as it came (the CLI
prints it).

Kept light on purpose: standard library plus, lazily, pydantic and ``engram_core.models``. Never surrealdb, torch
or numpy: those belong to the daemon (a test holds this). The daemon tells us, in its ``hello``, each method's
parameter names and return type (``wire/types.py``); that is how results are rebuilt without importing the
service.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..paths import engram_home
from .protocol import (
    MAX_LINE,
    PROTOCOL_VERSION,
    ProtocolError,
    RemoteError,
    mismatch_message,
    parse_response,
    pid_path,
    request,
    socket_path,
)
from .types import WireTypeError, type_from_expr

if TYPE_CHECKING:
    from ..models import DaemonStatus, FlushReport, ShutdownAck

DEFAULT_START_TIMEOUT = 60.0
DEFAULT_REQUEST_TIMEOUT = 600.0


class DaemonUnavailable(RuntimeError):
    """No daemon answers and none could be started (or starting was not allowed)."""


class ProtocolMismatch(RuntimeError):
    """Client and daemon speak different protocol versions."""


class RemoteNotFound(RemoteError, LookupError):
    """The daemon answered NotFound (an unknown id or an unknown method)."""


class RemoteEngramError(RemoteError, ValueError):
    """The daemon refused the request (EngramError or ValidationError): the message says what to fix."""


class RemoteInternalError(RemoteError):
    """The daemon failed unexpectedly; its log ($ENGRAM_HOME/engram.log) has the details."""


def _raise_for(err: dict[str, Any]) -> None:
    type_ = str(err.get("type") or "Internal")
    message = str(err.get("message") or "the daemon gave no message")
    if type_ == "ProtocolMismatch":
        raise ProtocolMismatch(message)
    if type_ == "NotFound":
        raise RemoteNotFound(type_, message)
    if type_ in ("EngramError", "ValidationError"):
        raise RemoteEngramError(type_, message)
    raise RemoteInternalError(type_, message)


class RemoteService:
    """The daemon's API as methods; thread-safe (one request at a time on one connection)."""

    def __init__(
        self,
        home: Path | str | None = None,
        *,
        start: bool = True,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> None:
        self.home = engram_home(home)
        self.start = start
        self.start_timeout = start_timeout
        self.request_timeout = request_timeout
        self._sock: socket.socket | None = None
        self._buf = b""
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._adapters: dict[str, Any] = {}
        self.info: dict[str, Any] = {}
        self.started_daemon = False
        # The daemon this client started, if any: reaped by a thread of ours when it exits, so that a shutdown
        # or an idle exit does not leave a zombie for as long as this process lives (init reaps it after us).
        self.daemon_process: subprocess.Popen[bytes] | None = None

    # ── connection ───────────────────────────────────────────
    @property
    def socket_path(self) -> Path:
        return socket_path(self.home)

    def _open(self, timeout: float = 2.0) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        try:
            s.connect(str(self.socket_path))
        except OSError:
            s.close()
            raise
        s.settimeout(self.request_timeout)
        return s

    def connect(self) -> RemoteService:
        with self._lock:
            if self._sock is not None:
                return self
            for attempt in (1, 2):
                try:
                    self._sock = self._open()
                except OSError as exc:
                    if not self.start:
                        raise DaemonUnavailable(
                            f"no Engram daemon is running for {self.home} "
                            f"({exc.strerror or exc}); start it with `engram serve`"
                        ) from None
                    self._sock = self._start_and_wait()
                self._buf = b""
                try:
                    self._hello()
                    return self
                except OSError as exc:  # the daemon died between accept and hello (killed, stopping)
                    self.close()
                    if attempt == 2:
                        raise DaemonUnavailable(
                            f"the Engram daemon went away during the handshake: {exc}"
                        ) from None
            return self

    def _hello(self) -> None:
        info = self._roundtrip("hello", {})
        if info.get("protocol") != PROTOCOL_VERSION:
            raise ProtocolMismatch(mismatch_message(info.get("protocol")))
        self.info = info

    def _start_and_wait(self) -> socket.socket:
        """Start `engram serve` detached and wait for its socket; a concurrent starter may win, that is fine."""
        from ..config import ensure_private_dir

        ensure_private_dir(self.home)
        log_path = self.home / "engram.log"
        fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        env = {**os.environ, "ENGRAM_HOME": str(self.home)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "engram_core.daemon", "--home", str(self.home)],
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            env=env,
            close_fds=True,
        )
        os.close(fd)
        self.started_daemon = True
        self.daemon_process = proc
        threading.Thread(target=proc.wait, name="engram-daemon-reaper", daemon=True).start()
        deadline = time.monotonic() + self.start_timeout
        last: OSError | None = None
        while time.monotonic() < deadline:
            try:
                return self._open()
            except OSError as exc:
                last = exc
            code = proc.poll()
            if code not in (None, 0):
                raise DaemonUnavailable(f"the Engram daemon failed to start (exit {code}); see {log_path}")
            time.sleep(0.05)
        raise DaemonUnavailable(
            f"the Engram daemon did not answer within {self.start_timeout:.0f} s ({last}); see {log_path}"
        )

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                with contextlib.suppress(OSError):
                    self._sock.close()
            self._sock = None
            self._buf = b""

    def __enter__(self) -> RemoteService:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ── calls ────────────────────────────────────────────────
    def _roundtrip(self, method: str, params: dict[str, Any]) -> Any:
        assert self._sock is not None
        req_id = next(self._ids)
        data = request(req_id, method, params)
        if len(data) > MAX_LINE:  # the daemon would refuse it and close while we still send: a broken pipe
            raise RemoteError(
                "ValidationError",
                f"{method}: the request is {len(data) / 2**20:.1f} MB as sent, "
                f"more than the daemon takes ({MAX_LINE // 2**20} MB); nothing was sent",
            )
        self._sock.sendall(data)
        while b"\n" not in self._buf:
            chunk = self._sock.recv(1 << 16)
            if not chunk:
                raise ConnectionResetError(errno.ECONNRESET, "the daemon closed the connection")
            self._buf += chunk
            if len(self._buf) > 4 * MAX_LINE:
                raise ProtocolError("the daemon's answer is larger than any answer should be")
        line, self._buf = self._buf.split(b"\n", 1)
        msg = parse_response(line)
        if msg.get("v") not in (None, PROTOCOL_VERSION) and not msg.get("ok"):
            raise ProtocolMismatch(mismatch_message(msg.get("v")))
        if not msg.get("ok"):
            _raise_for(msg.get("error") or {})
        return msg.get("result")

    def call(self, method: str, **params: Any) -> Any:
        """Raw call: the daemon's JSON result. A broken connection is retried once (reconnecting, restarting)."""
        params = {k: v for k, v in params.items() if v is not None or k in ("budget",)}
        with self._lock:
            for attempt in (1, 2):
                try:
                    self.connect()
                    return self._roundtrip(method, params)
                except OSError as exc:  # refused, reset, broken pipe, vanished socket, timeout
                    self.close()
                    if attempt == 2 or isinstance(exc, TimeoutError):
                        if isinstance(exc, TimeoutError):
                            raise DaemonUnavailable(
                                f"the Engram daemon did not answer {method!r} within "
                                f"{self.request_timeout:.0f} s"
                            ) from None
                        raise DaemonUnavailable(f"lost the Engram daemon during {method!r}: {exc}") from None
            raise AssertionError("unreachable")

    def methods(self) -> dict[str, str]:
        self.connect()
        return dict(self.info.get("methods") or {})

    def has(self, method: str) -> bool:
        """Does the daemon serve ``method``? Once connected, answered from the table its hello sent, without a
        request or the connection's lock (a UI thread asking never waits behind a long call)."""
        if not self.info:
            self.connect()
        return method in (self.info.get("methods") or {})

    def _adapter(self, method: str) -> Any:
        """A pydantic TypeAdapter of ``method``'s declared return type, built once from the daemon's hello."""
        if method not in self._adapters:
            from pydantic import TypeAdapter

            expr = self.methods().get(method)
            if expr is None:
                raise RemoteNotFound("NotFound", f"the Engram daemon has no method {method!r}")
            try:
                self._adapters[method] = TypeAdapter(type_from_expr(expr))
            except WireTypeError as exc:
                raise ProtocolMismatch(
                    f"{exc}: run `engram stop` and retry (the next command starts a daemon of this version)"
                ) from None
        return self._adapters[method]

    def invoke(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if args:
            names = (self.info.get("params") or {}).get(method)
            if names is None:
                self.connect()
                names = (self.info.get("params") or {}).get(method)
            if names is None or len(args) > len(names):
                raise TypeError(
                    f"{method}() takes keyword arguments over the daemon; got {len(args)} positional"
                )
            kwargs = {**dict(zip(names, args, strict=False)), **kwargs}
        adapter = self._adapter(method)
        return adapter.validate_python(self.call(method, **kwargs))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        # Once connected, only what the daemon serves is a method: getattr(remote, "clock", None) is None.
        if self.info and name not in (self.info.get("methods") or {}):
            raise AttributeError(f"the Engram daemon serves no method {name!r}")

        def method(*args: Any, **kwargs: Any) -> Any:
            return self.invoke(name, *args, **kwargs)

        method.__name__ = name
        return method

    # the daemon's own methods, named so that editors and readers find them (typed like the rest)
    def status(self) -> DaemonStatus:
        return cast("DaemonStatus", self.invoke("status"))

    def shutdown(self) -> ShutdownAck:
        return cast("ShutdownAck", self.invoke("shutdown"))

    def flush(self, timeout_s: float = 30.0) -> FlushReport:
        return cast("FlushReport", self.invoke("flush", timeout_s=timeout_s))


def connect(
    home: Path | str | None = None,
    *,
    start: bool = True,
    timeout: float = DEFAULT_START_TIMEOUT,
) -> RemoteService:
    """A connected client of this data root's daemon, starting it when allowed and needed."""
    return RemoteService(home, start=start, start_timeout=timeout).connect()


def daemon_alive(home: Path | str | None = None) -> bool:
    """Whether a daemon process still holds this data root's lock file (it does until its very end: after its
    socket is gone it may still be closing its stores, and a new daemon cannot start before it lets go)."""
    import fcntl

    try:
        fd = os.open(pid_path(engram_home(home)), os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing also lets go of a lock taken here
    return False


def daemon_pid(home: Path | str | None = None) -> int | None:
    """The pid written by the running daemon, if its lock file names one."""
    try:
        text = pid_path(engram_home(home)).read_text().strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
