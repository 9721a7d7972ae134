"""The daemon builds its MCP server in the background (~0.8 s of imports holding the GIL) only once no request has
run for a moment: built beside the first recall after a start, it made that recall wait."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from engram_core.daemon import server
from engram_core.daemon.server import WARM_MCP_QUIET_S, Daemon
from engram_core.mcp import server as mcp_server


class _SignallingStop(threading.Event):
    """The stop event; its wait() says that the warm-up is holding back."""

    def __init__(self) -> None:
        super().__init__()
        self.waited = threading.Event()

    def wait(self, timeout: float | None = None) -> bool:
        self.waited.set()
        return super().wait(timeout)


def test_the_mcp_server_is_built_only_once_no_request_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon = Daemon(tmp_path / "home", warm_model=False)
    daemon.service = SimpleNamespace(embedder=SimpleNamespace(available=True))
    stop = _SignallingStop()
    daemon.stop_event = stop
    built = threading.Event()
    running_when_built: list[int] = []

    def shared_server() -> None:
        running_when_built.append(daemon.activity.requests_running)
        built.set()

    monkeypatch.setattr(mcp_server, "shared_server", shared_server)
    with daemon.activity.lock:  # a request (the first recall after a start) is being answered
        daemon.activity.requests_running = 1
        daemon.activity.last_request = time.monotonic()
    warm = threading.Thread(target=daemon._warm, daemon=True)
    warm.start()
    # Either it builds at once (the fault) or it holds back; whichever comes first decides.
    deadline = time.monotonic() + 30
    while not (built.is_set() or stop.waited.is_set()) and time.monotonic() < deadline:
        built.wait(0.01)
    assert not built.is_set(), f"built while {running_when_built} request(s) ran"
    assert daemon.model_state == "ready"
    with daemon.activity.lock:  # the request is answered, and has been for the quiet interval
        daemon.activity.requests_running = 0
        daemon.activity.last_request = time.monotonic() - WARM_MCP_QUIET_S
    assert built.wait(30)
    warm.join(10)
    assert running_when_built == [0]


def test_a_daemon_without_requests_still_builds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = Daemon(tmp_path / "home", warm_model=False)
    daemon.service = SimpleNamespace(embedder=SimpleNamespace(available=True))
    built = threading.Event()
    monkeypatch.setattr(mcp_server, "shared_server", built.set)
    monkeypatch.setattr(server, "WARM_MCP_QUIET_S", 0.0)
    daemon._warm()
    assert built.is_set()
