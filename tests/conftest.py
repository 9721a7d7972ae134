"""Shared fixtures: the real embedding model (loaded once per test session) and real stores in temp dirs."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedder():  # noqa: ANN201 - LocalEmbedder, imported lazily so collection stays fast
    """The real all-MiniLM-L6-v2, loaded once for the whole run (import ~5 s, then ~15 ms a text)."""
    from engram_core.embeddings import LocalEmbedder

    emb = LocalEmbedder()
    emb.embed(["warm up"])
    return emb


@pytest.fixture
def engram_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "engram-home"
    monkeypatch.setenv("ENGRAM_HOME", str(home))
    return home


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A fresh project folder (a .git marker makes it the project root)."""
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    return root


@pytest.fixture
def service(engram_home: Path, embedder) -> Iterator:  # noqa: ANN001
    """An in-process EngramService on real embedded SurrealDB stores in a temp ENGRAM_HOME."""
    from engram_core.service import EngramService

    svc = EngramService(engram_home, embedder=embedder)
    yield svc
    svc.close()


# ── daemon fixtures (tests/test_daemon.py, test_hooks.py, test_mcp.py, test_cli.py, test_faults.py) ──
REPO_ROOT = Path(__file__).resolve().parent.parent
HOOK_SCRIPT = REPO_ROOT / "hooks" / "engram_hook.py"


class DaemonProc:
    """A real `engram serve` subprocess on a temp ENGRAM_HOME, talked to over its real socket.

    The idle timeout is not 0 so that a daemon a hook restarted behind the test's back (kill -9 tests) cannot
    outlive a crashed test run for long."""

    def __init__(self, home: Path, *, model: bool = True, idle_timeout: float = 900, env: dict | None = None) -> None:
        import sys

        self.home = home
        self.python = sys.executable
        self.env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_DAEMON_IDLE_TIMEOUT_S": str(idle_timeout),
                    **({} if model else {"ENGRAM_EMBEDDING_PROVIDER": "none"}), **(env or {})}
        self.proc: Any = None

    @property
    def sock(self) -> Path:
        return self.home / "engram.sock"

    def start(self, timeout: float = 60.0):  # noqa: ANN201
        import subprocess
        import time

        self.proc = subprocess.Popen([self.python, "-m", "engram_core.daemon", "--home", str(self.home)],
                                     env=self.env, cwd=str(REPO_ROOT), stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                err = self.proc.stderr.read().decode()
                self._close_pipes()
                if self.proc.returncode != 0 or "already running" not in err:
                    raise RuntimeError(f"daemon exited {self.proc.returncode}: {err[-2000:]}")
                self.proc = None  # another starter (a hook, a client) won the race: wait for and use its daemon
            if self.answers():
                return self
            time.sleep(0.05)
        raise RuntimeError("daemon did not come up")

    def answers(self) -> bool:
        from engram_core.client import DaemonUnavailable, RemoteService

        try:
            RemoteService(self.home, start=False).connect().close()
            return True
        except (DaemonUnavailable, OSError):
            return False

    def client(self, typed: bool = False):  # noqa: ANN201
        from engram_core.client import RemoteService

        return RemoteService(self.home, start=False, typed=typed).connect()

    def stop(self, timeout: float = 20.0) -> None:
        import signal
        import time

        if self.proc is None and self.answers():  # a daemon we adopted: ask it to stop
            c = self.client()
            c.call("shutdown")
            c.close()
            deadline = time.monotonic() + timeout
            while self.sock.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        self._close_pipes()

    def kill9(self) -> None:
        import signal
        import time

        from engram_core.client import daemon_pid

        pid = self.proc.pid if self.proc is not None else daemon_pid(self.home)
        assert pid
        os.kill(pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
        else:
            while self.answers():
                time.sleep(0.02)
        self._close_pipes()

    def _close_pipes(self) -> None:
        if self.proc is not None:
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()


def new_project(base: Path, name: str) -> Path:
    root = base / name
    (root / ".git").mkdir(parents=True, exist_ok=True)
    return root


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    """One real daemon with the real model for the whole session (the model load costs ~5 s)."""
    d = DaemonProc(tmp_path_factory.mktemp("engram-daemon")).start()
    c = d.client()
    c.call("store", memory={"content": "warm-up memory for the shared daemon", "scope": "user"})
    c.close()
    yield d
    d.stop()


@pytest.fixture
def light_daemon(tmp_path: Path) -> Iterator[DaemonProc]:
    """A daemon of its own without the embedding model (fast start) for lifecycle and fault tests."""
    d = DaemonProc(tmp_path / "home", model=False)
    yield d
    d.stop()
