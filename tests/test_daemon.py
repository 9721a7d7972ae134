"""The daemon over its real socket: start on demand, one per root, stale socket, protocol, idle exit, fuzz."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import REPO_ROOT, DaemonProc


def raw_exchange(sock_path: Path, payload: bytes, timeout: float = 10.0) -> list[dict]:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(str(sock_path))
    try:
        try:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon refused and closed early (oversized line): its answer is still readable
        buf = b""
        while True:
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not chunk:
                break
            buf += chunk
    finally:
        s.close()
    return [json.loads(line) for line in buf.splitlines() if line.strip()]


def total_memories(d: DaemonProc) -> int:
    c = d.client()
    try:
        return sum(s["total"] for s in c.call("stats")["scopes"])
    finally:
        c.close()


def test_client_starts_daemon_on_demand_and_stop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engram_core.wire.client import connect

    home = tmp_path / "home"
    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "none")
    monkeypatch.setenv("ENGRAM_DAEMON_IDLE_TIMEOUT_S", "0")
    remote = connect(home, start=True, timeout=60)
    try:
        assert remote.started_daemon
        assert remote.info["protocol"] == 1 and remote.info["pid"] > 0
        stats = remote.stats()
        assert type(stats).__name__ == "Stats"  # rebuilt into the pydantic model the service returns
    finally:
        remote.close()
    env = {**os.environ, "ENGRAM_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-m", "engram_core.cli", "stop", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["stopped"] is True
    assert not (home / "engram.sock").exists()


def _proc_state(pid: int) -> str | None:
    """The state letter of a process in /proc ('Z' for a zombie), None once it is gone (reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def test_the_daemon_a_client_started_is_reaped_when_it_exits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process is the daemon's parent: unless the client waits for it, a daemon that shuts down (or exits
    idle) stays a zombie for as long as the client's process lives (a TUI, an MCP server, a test session)."""
    from engram_core.wire.client import connect

    monkeypatch.setenv("ENGRAM_EMBEDDING_PROVIDER", "none")
    remote = connect(tmp_path / "home", start=True, timeout=60)
    pid = remote.info["pid"]
    assert remote.started_daemon and remote.daemon_process is not None and remote.daemon_process.pid == pid
    stat = Path(f"/proc/{pid}/stat").read_text()
    assert int(stat.rsplit(")", 1)[1].split()[1]) == os.getpid()  # our child: ours to reap
    remote.call("shutdown")
    remote.close()
    # A pidfd turns readable when the daemon has exited (zombie or not): the barrier for "it exited".
    fd = os.pidfd_open(pid)
    try:
        import select

        assert select.select([fd], [], [], 60)[0], "the daemon did not exit after shutdown"
    finally:
        os.close(fd)
    # Exited; the client's reaper thread collects it at once. A zombie would stay 'Z' for good.
    deadline = time.monotonic() + 10
    while (state := _proc_state(pid)) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert state is None, f"daemon {pid} left as a zombie (state {state})"
    assert remote.daemon_process.wait(timeout=10) == 0


def test_second_serve_refuses_and_first_keeps_serving(light_daemon: DaemonProc) -> None:
    light_daemon.start()
    second = subprocess.run(
        [sys.executable, "-m", "engram_core.daemon", "--home", str(light_daemon.home)],
        env=light_daemon.env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert second.returncode == 0
    assert "already running" in second.stderr
    assert str(light_daemon.proc.pid) in second.stderr
    assert light_daemon.answers()


def test_stale_socket_from_a_dead_daemon_is_replaced(light_daemon: DaemonProc) -> None:
    home = light_daemon.home
    home.mkdir(parents=True, mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(home / "engram.sock"))
    stale.close()  # the file stays, nobody listens: what a crashed daemon leaves
    (home / "engram.pid").write_text("999999")
    light_daemon.start()
    c = light_daemon.client()
    assert c.info["pid"] == light_daemon.proc.pid
    c.close()


def test_kill9_leaves_stale_socket_and_next_start_replaces_it(light_daemon: DaemonProc) -> None:
    light_daemon.start()
    light_daemon.kill9()
    assert light_daemon.sock.exists()
    light_daemon.start()
    assert light_daemon.answers()


def test_protocol_mismatch_is_said_plainly(daemon: DaemonProc, monkeypatch: pytest.MonkeyPatch) -> None:
    replies = raw_exchange(
        daemon.sock, json.dumps({"v": 99, "id": 1, "method": "hello", "params": {}}).encode() + b"\n"
    )
    assert replies[0]["ok"] is False
    assert replies[0]["error"]["type"] == "ProtocolMismatch"
    assert "protocol 1" in replies[0]["error"]["message"] and "engram stop" in replies[0]["error"]["message"]

    from engram_core.wire import protocol
    from engram_core.wire.client import ProtocolMismatch, RemoteService

    monkeypatch.setattr(protocol, "PROTOCOL_VERSION", 2)
    with pytest.raises(ProtocolMismatch, match="engram stop"):
        RemoteService(daemon.home, start=False).connect()


def test_idle_exit(tmp_path: Path) -> None:
    d = DaemonProc(tmp_path / "home", model=False, idle_timeout=1)
    d.start()
    c = d.client()
    c.call("ping")
    c.close()
    try:
        d.proc.wait(timeout=15)
    finally:
        d.stop()
    assert d.proc.returncode == 0
    assert not d.sock.exists()


def test_permissions(daemon: DaemonProc) -> None:
    assert stat.S_IMODE(os.stat(daemon.home).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(daemon.sock).st_mode) == 0o600
    for name in ("engram.pid", "journal.jsonl", "launcher.json"):
        assert stat.S_IMODE(os.stat(daemon.home / name).st_mode) == 0o600, name
    assert stat.S_IMODE(os.stat(daemon.home / "spool").st_mode) == 0o700


def test_errors_are_typed_one_liners(daemon: DaemonProc) -> None:
    req = [
        {"v": 1, "id": 1, "method": "get", "params": {"memory_id": "01NOPE"}},
        {"v": 1, "id": 2, "method": "store", "params": {"memory": {"content": "  "}}},
        {"v": 1, "id": 3, "method": "recall", "params": {"query": "x", "scope": "galaxy"}},
        {"v": 1, "id": 4, "method": "no_such_method", "params": {}},
        {"v": 1, "id": 5, "method": "store", "params": {"memory": {"content": "x"}, "bogus": 1}},
    ]
    replies = raw_exchange(daemon.sock, b"".join(json.dumps(r).encode() + b"\n" for r in req))
    types = [r["error"]["type"] for r in replies]
    assert types == ["NotFound", "ValidationError", "ValidationError", "NotFound", "ValidationError"]
    for r in replies:
        assert "Traceback" not in r["error"]["message"] and "\n" not in r["error"]["message"].strip()


def test_oversized_request_refused_connection_closed_daemon_alive(daemon: DaemonProc) -> None:
    before = total_memories(daemon)
    big = (
        json.dumps(
            {"v": 1, "id": 1, "method": "store", "params": {"memory": {"content": "x" * (9 * 1024 * 1024)}}}
        ).encode()
        + b"\n"
    )
    replies = raw_exchange(daemon.sock, big, timeout=30)
    assert replies and replies[0]["ok"] is False and "larger than" in replies[0]["error"]["message"]
    assert total_memories(daemon) == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
            max_leaves=12,
        ).map(lambda v: json.dumps(v).encode()),
        st.fixed_dictionaries(
            {
                "v": st.sampled_from([1, 0, "1", None]),
                "id": st.integers(),
                "method": st.sampled_from(["store", "forget", "get", "update", "import_lines", "x", ""]),
                "params": st.dictionaries(
                    st.sampled_from(["memory", "memory_id", "patch", "lines"]),
                    st.one_of(st.text(max_size=5), st.integers(), st.none()),
                    max_size=3,
                ),
            }
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_protocol_fuzz_daemon_survives_and_stores_nothing(daemon: DaemonProc, payload: bytes) -> None:
    before = total_memories(daemon)
    raw_exchange(daemon.sock, payload.replace(b"\n", b" ") + b"\n")
    c = daemon.client()
    assert c.call("ping") == "pong"
    c.close()
    assert total_memories(daemon) == before


def test_concurrent_clients_each_request_atomic(daemon: DaemonProc, tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from support import new_project

    proj = str(new_project(tmp_path, "conc"))

    def one(i: int) -> str:
        c = daemon.client()
        try:
            return c.call(
                "store", memory={"content": f"concurrent fact number {i} about widgets"}, project=proj
            )["memory"]["id"]
        finally:
            c.close()

    with ThreadPoolExecutor(8) as pool:
        ids = list(pool.map(one, range(24)))
    assert len(set(ids)) == 24
    c = daemon.client()
    page = c.call("list_memories", scope="project", project=proj, limit=100)
    c.close()
    assert page["total"] == 24


def test_client_module_stays_light() -> None:
    code = (
        "import sys, engram_core.wire.client, engram_core.cli, engram_core.wire.protocol;"
        "bad=[m for m in ('surrealdb','torch','numpy','sentence_transformers','pydantic') if m in sys.modules];"
        "print(','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout + out.stderr


def test_status_answers_while_model_loads(tmp_path: Path, embedder, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The model file is a FIFO the test holds shut: the loader blocks opening it (a real barrier, not a race
    against a fast load), and status must answer "loading" meanwhile; once the bytes flow, "ready"."""
    from engram_core.retrieval.embeddings import onnx_model_path
    from engram_core.wire.client import RemoteService

    real = onnx_model_path()  # the `embedder` fixture loaded (and if need be exported) the real model
    assert real.exists()
    cache = tmp_path / "models"
    cache.mkdir()
    monkeypatch.setenv("ENGRAM_MODEL_CACHE", str(cache))
    fifo = onnx_model_path()
    os.mkfifo(fifo)
    d = DaemonProc(
        tmp_path / "home",
        model=True,
        env={"ENGRAM_MODEL_CACHE": str(cache), "ENGRAM_EMBEDDING_BACKEND": "onnx"},
    ).start()
    try:
        c = RemoteService(d.home, start=False, request_timeout=10).connect()
        states = [c.call("status")["model"]]
        deadline = time.monotonic() + 60
        while states[-1] == "not loaded" and time.monotonic() < deadline:  # the MCP server is built first
            time.sleep(0.05)
            states.append(c.call("status")["model"])
        assert states[-1] == "loading", states
        # Still blocked on the FIFO: every answer in between says so, and none waits for the model.
        assert [c.call("status")["model"] for _ in range(3)] == ["loading"] * 3
        with open(fifo, "wb") as fh:  # noqa: PTH123 - opens once the loader has: then the model streams in
            fh.write(real.read_bytes())
        while states[-1] == "loading" and time.monotonic() < deadline:
            time.sleep(0.05)
            states.append(c.call("status")["model"])
        assert states[-1] == "ready", states
        c.close()
    finally:
        d.stop()


def test_engram_log_receives_the_core_modules_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The core's modules log under their own names (engram_core.storage.engine, .bookkeeping…): their lines reach
    engram.log too, redacted like the daemon's own (they went nowhere before)."""
    import logging

    from engram_core.daemon.server import LOGGERS, _setup_logging

    monkeypatch.delenv("ENGRAM_LOG_STDERR", raising=False)
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level) for name in LOGGERS}
    try:
        _setup_logging(tmp_path, verbose=False)
        logging.getLogger("engram_core.storage.engine").info(
            "merged at close; token ghp_R8x2LmQ9vT4kZp7NwY3cJh6Fd1Sa0BgE5uXo"
        )
        logging.getLogger("engram_core.bookkeeping").warning("a bookkeeping write failed")
        for handler in logging.getLogger("engram_core").handlers:
            handler.flush()
        text = (tmp_path / "engram.log").read_text()
        assert "engram_core.storage.engine: merged at close" in text and "a bookkeeping write failed" in text
        assert "ghp_R8x2" not in text
    finally:
        for name, (handlers, level) in saved.items():
            for handler in logging.getLogger(name).handlers:
                if handler not in handlers:
                    handler.close()
            logging.getLogger(name).handlers[:] = handlers
            logging.getLogger(name).setLevel(level)
