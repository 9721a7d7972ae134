"""The MCP server process Claude Code starts: a standard-library pump between its stdio and the Engram daemon.

Run as ``python3 -S <plugin root>/engram_core/mcp/run_bridge.py`` (what ``.mcp.json`` says: no PATH lookup, no
packages, any python3 >= 3.8, ~20 ms to start) or as ``engram mcp``. It connects to the daemon's socket (starting
the daemon with the interpreter the daemon recorded in ``launcher.json`` when none answers), sends one
``mcp_attach`` line with this session's context, and from then on relays MCP JSON-RPC lines both ways. The MCP
protocol itself is served inside the daemon with the official SDK (:mod:`engram_core.mcp.server`), where the
SDK, the stores and the model are already loaded: that is why ``initialize`` is answered in milliseconds.

Context sent: ``CLAUDE_CODE_SESSION_ID`` (Claude Code gives the MCP server the same id its hooks see, so both
write to one Engram session), the project (``ENGRAM_PROJECT``, ``CLAUDE_PROJECT_DIR`` or the working directory).

First requests: the daemon writes, at each start, what its MCP server answers to ``initialize`` and to each
list (``tools/list``, ...) for every protocol version (``mcp_answers.json`` in the data root, see
:func:`engram_core.mcp.server.publish_answers`). With that file the bridge answers those requests itself while it
connects (starting the daemon) in the background, so the first session after an idle exit gets Engram's tools
(Claude Code waits only a few seconds for a plugin's MCP server; tests/claude_code/test_cold_start.py); any other request waits for the daemon and is then sent, in
order, after the client's ``initialize`` is replayed to it. Without the file (the first start ever, an unknown
protocol version) the bridge connects first, as before.

Exit: at once on SIGINT or SIGTERM (Claude Code sends SIGINT, then SIGTERM 100 ms later), and within a second
of stdin's end. Nothing is lost by exiting: every write is the daemon's, acknowledged after it is stored.
If the daemon goes away mid-session, requests in flight at that moment are answered with an error; the next
request starts it again (not the moment it went away: ``engram stop`` must leave it stopped until it is
needed), replays the client's ``initialize`` on the new connection and carries on.

Deliberately no imports from this package: it must run where only the plugin folder is (hooks' python3).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from typing import Any, BinaryIO

PROTOCOL_VERSION = 1
START_TIMEOUT_S = 60.0  # a cold daemon start on a loaded 2-core machine took over 30 s
EOF_GRACE_S = 0.8
REPLAY_ID = "engram-bridge-replay-initialize"
ANSWERS_FILE = "mcp_answers.json"  # written by the daemon: engram_core.mcp.server.publish_answers
ANSWERED = (
    "initialize",
    "notifications/initialized",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
)


class BridgeError(RuntimeError):
    """The daemon cannot be reached or refused to attach: the message says why and what to do."""


def home() -> str:
    raw = os.environ.get("ENGRAM_HOME")
    return os.path.expanduser(raw) if raw else os.path.join(os.path.expanduser("~"), ".claude", "engram")


def context() -> dict[str, Any]:
    return {
        "session": os.environ.get("CLAUDE_CODE_SESSION_ID") or os.environ.get("CLAUDE_SESSION_ID") or None,
        "project": os.environ.get("ENGRAM_PROJECT") or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd(),
        "pid": os.getpid(),
    }


def _launch_command(h: str) -> list[str]:
    """How to start the daemon: the interpreter it recorded, $ENGRAM_PYTHON, this interpreter if it has the
    package (`engram mcp`), or `engram` on PATH."""
    python = os.environ.get("ENGRAM_PYTHON")
    if not python:
        try:
            with open(os.path.join(h, "launcher.json"), encoding="utf-8") as fh:
                python = json.load(fh).get("python")
        except (OSError, ValueError):
            python = None
    if not python and "engram_core" in sys.modules:
        python = sys.executable
    if python and os.path.exists(python):
        return [python, "-m", "engram_core.daemon", "--home", h]
    import shutil  # here, not at the top: only a daemon start needs it (the start-up Claude Code waits for)

    engram = shutil.which("engram")
    if engram:
        return [engram, "serve", "--home", h]
    raise BridgeError(
        f"cannot start the Engram daemon: no {os.path.join(h, 'launcher.json')}, no $ENGRAM_PYTHON "
        "and no `engram` on PATH; run `engram setup claude-code` (or `engram serve`) once"
    )


def published_answers(h: str) -> dict[str, Any] | None:
    """Protocol version -> {method: result} the daemon last published, or None (no file, unreadable)."""
    try:
        with open(os.path.join(h, ANSWERS_FILE), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    versions = data.get("versions") if isinstance(data, dict) else None
    return versions if isinstance(versions, dict) and versions else None


def _foreign(h: str) -> bool:
    """engram_core/paths.py's foreign_root, loaded by path (no package here): nothing is written in a data root
    Engram did not create."""
    try:
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        if here not in sys.path:
            sys.path.append(here)
        import paths

        return bool(paths.foreign_root(h))
    except Exception:
        return False


def _open(h: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(os.path.join(h, "engram.sock"))
    except OSError:
        s.close()
        raise
    return s


def connect(h: str, timeout: float = START_TIMEOUT_S) -> socket.socket:
    try:
        return _open(h)
    except OSError:
        pass
    import subprocess  # here, not at the top: only a daemon start needs it

    cmd = _launch_command(h)
    if _foreign(h):
        raise BridgeError(
            f"{h} is not Engram's data directory (others may open it and it holds none of Engram's "
            "files): point ENGRAM_HOME at a new path; `engram doctor` says more"
        )
    os.makedirs(h, mode=0o700, exist_ok=True)
    fd = os.open(os.path.join(h, "engram.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=fd,
            stderr=fd,
            start_new_session=True,
            close_fds=True,
            env=dict(os.environ, ENGRAM_HOME=h),
        )
    except OSError as exc:
        raise BridgeError(f"cannot start the Engram daemon ({' '.join(cmd)}): {exc}") from None
    finally:
        os.close(fd)
    # Reaped when it exits (engram stop, a crash): the bridge lives as long as the agent's session, and an
    # unwaited child would stay a zombie that long.
    threading.Thread(target=proc.wait, name="engram-daemon-reaper", daemon=True).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return _open(h)
        except OSError:
            pass
        code = proc.poll()
        if code not in (None, 0):  # 0: another starter won the race and this one said so
            raise BridgeError(f"the Engram daemon failed to start (exit {code}); see {h}/engram.log")
        time.sleep(0.02)
    raise BridgeError(f"the Engram daemon did not answer within {timeout:.0f} s; see {h}/engram.log")


def attach(sock: socket.socket, ctx: dict[str, Any]) -> socket.socket:
    """Switch the connection to MCP: one request line, one answer line, then JSON-RPC."""
    line = json.dumps({"v": PROTOCOL_VERSION, "id": 0, "method": "mcp_attach", "params": ctx}) + "\n"
    sock.settimeout(START_TIMEOUT_S)  # a daemon that accepts but never answers must not hang the session
    sock.sendall(line.encode())
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(1)  # byte by byte: what follows the answer is MCP traffic, not ours to consume
        if not chunk:
            raise BridgeError("the Engram daemon closed the connection while attaching")
        buf += chunk
    msg = json.loads(buf)
    if not msg.get("ok"):
        err = msg.get("error") or {}
        if err.get("type") == "NotFound":
            raise BridgeError("this Engram daemon is older than the MCP bridge: run `engram stop` and retry")
        raise BridgeError(f"the Engram daemon refused MCP: {err.get('message')}")
    sock.settimeout(None)
    return sock


class Bridge:
    def __init__(
        self, h: str, ctx: dict[str, Any], stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
    ) -> None:
        self.home = h
        self.ctx = ctx
        self.stdin = stdin or sys.stdin.buffer
        self.stdout = stdout or sys.stdout.buffer
        self.out_lock = threading.Lock()
        # Held while a request is recorded and sent, and while a lost connection's requests are answered:
        # each request is answered once, by the daemon or by the bridge, never both.
        self.send_lock = threading.Lock()
        self.sock: socket.socket | None = None  # None once the daemon went away: the next request reconnects
        # The client's initialize and initialized, replayed after a reconnect.
        self.init_lines: list[bytes] = []
        # Held while the client's first lines are answered from the published answers or replayed to a new
        # connection: a line answered here is replayed, never lost between the two.
        self.init_lock = threading.Lock()
        self.published: dict[str, Any] | None = None  # protocol version -> {method: result}, read at start
        # The client's version's answers, once its initialize was answered.
        self.answers: dict[str, Any] | None = None
        # JSON-RPC id sent and not yet answered → the connection it went on.
        self.pending: dict[str, socket.socket | None] = {}
        self.stdin_closed = False
        self.done = threading.Event()

    def write(self, data: bytes) -> None:
        with self.out_lock:
            self.stdout.write(data)
            self.stdout.flush()

    def error_reply(self, req_id: object, message: str) -> None:
        self.write(
            (
                json.dumps({"jsonrpc": "2.0", "id": req_id, "error": {"code": -32603, "message": message}})
                + "\n"
            ).encode()
        )

    def connect(self) -> None:
        """Attach to the daemon (starting it when none answers) and replay the client's initialize. Caller holds
        send_lock, or is the only thread (start-up)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                sock = attach(connect(self.home), self.ctx)
                break
            except OSError as exc:
                # A daemon dying (kill -9) closes our connection before its listening socket: a connect in
                # between is reset. Try again (the next attempt starts a daemon) until the deadline.
                if time.monotonic() > deadline:
                    raise BridgeError(
                        f"the Engram daemon does not answer ({exc}); see {self.home}/engram.log"
                    ) from None
                time.sleep(0.1)
        with self.init_lock:
            if self.init_lines:
                first = json.loads(self.init_lines[0])
                first["id"] = REPLAY_ID
                sock.sendall((json.dumps(first) + "\n").encode() + b"".join(self.init_lines[1:]))
            self.sock = sock
        threading.Thread(target=self.from_daemon, args=(sock,), daemon=True).start()

    def connect_early(self) -> None:
        """Connect (starting the daemon) while the client's first requests are answered from the published
        answers; a request that needs the daemon waits on send_lock meanwhile."""
        with self.send_lock:
            if self.sock is None:
                try:
                    self.connect()
                except BridgeError as exc:  # each request that needs the daemon says it (send tries again)
                    sys.stderr.write(f"engram mcp: {exc}\n")
                    sys.stderr.flush()

    def answered_here(self, msg: dict[str, Any], line: bytes) -> bool:
        """Answer ``initialize`` and the lists from the published answers while no daemon is connected."""
        method = msg.get("method")
        if self.published is None or method not in ANSWERED:
            return False
        with self.init_lock:
            if self.sock is not None:
                return False
            if method == "initialize":
                params = msg.get("params")
                version = params.get("protocolVersion") if isinstance(params, dict) else None
                answers = self.published.get(version) if isinstance(version, str) else None
                if not isinstance(answers, dict) or "initialize" not in answers or "id" not in msg:
                    return False
                self.answers = answers
            elif self.answers is None or (
                method != "notifications/initialized" and (method not in self.answers or "id" not in msg)
            ):
                return False
            if method in ("initialize", "notifications/initialized"):
                self.init_lines.append(line)  # replayed to the daemon when the connection is made
            if "id" in msg:
                self.write(
                    (
                        json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": self.answers[method]}) + "\n"
                    ).encode()
                )
            return True

    def from_daemon(self, sock: socket.socket) -> None:
        f = sock.makefile("rb")
        try:
            for line in f:
                try:
                    msg = json.loads(line)
                except ValueError:
                    msg = None
                if isinstance(msg, dict) and "id" in msg and "method" not in msg:
                    if msg["id"] == REPLAY_ID:
                        continue
                    self.pending.pop(json.dumps(msg["id"]), None)
                self.write(line)
        except OSError:
            pass
        if self.stdin_closed:
            self.done.set()
            return
        # The daemon went away under a live session: answer what it took with it. The next request starts it
        # again, not this moment: after `engram stop` the daemon must stay stopped until it is needed.
        with self.send_lock:
            if self.sock is sock:
                self.sock = None
            for key, on in list(self.pending.items()):
                if on is sock:
                    del self.pending[key]
                    self.error_reply(json.loads(key), "the Engram daemon stopped during this call; retry it")
        try:  # noqa: SIM105 - no contextlib import on the start-up path
            sock.close()
        except OSError:
            pass
        sys.stderr.write("engram mcp: lost the Engram daemon; the next request starts it again\n")
        sys.stderr.flush()

    def send(self, line: bytes, req_id: object) -> None:
        key = json.dumps(req_id) if req_id is not None else None
        with self.send_lock:
            for _attempt in range(2):  # a connection found dead while sending: once more on a new one
                if self.sock is None:
                    try:
                        self.connect()
                    except BridgeError as exc:
                        sys.stderr.write(f"engram mcp: {exc}\n")
                        sys.stderr.flush()
                        if key is not None:
                            self.error_reply(req_id, f"Engram is unavailable: {exc}")
                        return
                    sys.stderr.write("engram mcp: reconnected\n")
                    sys.stderr.flush()
                if key is not None:
                    self.pending[key] = self.sock
                try:
                    assert self.sock is not None
                    self.sock.sendall(line)
                    return
                except OSError:
                    if key is not None:
                        self.pending.pop(key, None)
                    self.sock = None  # its reader answers what else went on it when it finds it closed
            if key is not None:
                self.error_reply(
                    req_id, "Engram is unavailable: the daemon closed every connection; retry it"
                )

    def run(self) -> int:
        self.published = published_answers(self.home)
        if self.published is not None:
            threading.Thread(target=self.connect_early, name="engram-connect", daemon=True).start()
        else:
            try:
                self.connect()
            except BridgeError as exc:
                sys.stderr.write(f"engram mcp: {exc}\n")
                sys.stderr.flush()
                return self.refuse(str(exc))
        while True:
            line = self.stdin.readline()
            if not line:
                break
            if not line.strip():
                continue
            line = line if line.endswith(b"\n") else line + b"\n"
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            req_id = None
            if isinstance(msg, dict) and "id" in msg and "method" in msg:
                req_id = msg["id"]
            if isinstance(msg, dict) and self.answered_here(msg, line):
                continue
            self.send(line, req_id)
            # Recorded after it is sent: a reconnect inside that send replays only the lines before it.
            if isinstance(msg, dict) and msg.get("method") in ("initialize", "notifications/initialized"):
                self.init_lines.append(line)
        self.stdin_closed = True
        sock = self.sock
        if sock is not None:
            try:  # noqa: SIM105
                sock.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            self.done.wait(EOF_GRACE_S)  # let the daemon answer what was already sent
        return 0

    def refuse(self, reason: str) -> int:
        """No daemon: answer every request with the reason, so Claude Code's log says what is wrong."""
        for line in iter(self.stdin.readline, b""):
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if isinstance(msg, dict) and "id" in msg and "method" in msg:
                self.error_reply(msg["id"], f"Engram is unavailable: {reason}")
        return 1


def _exit_now(signum: int, _frame: object) -> None:
    os._exit(0)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGINT, _exit_now)
    signal.signal(signal.SIGTERM, _exit_now)
    code = Bridge(home(), context()).run()
    sys.stdout.flush()
    os._exit(code)  # reader threads may still block on the socket: do not wait for them


if __name__ == "__main__":
    main(sys.argv[1:])
