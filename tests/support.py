"""Helpers shared by the daemon, hook, MCP, CLI and fault tests (imported as `support`, not from a conftest:
tests/ and tests/tui/ both have a conftest.py, and `from conftest import` would get whichever loaded first)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


REPO_ROOT = Path(__file__).resolve().parent.parent
HOOK_SCRIPT = REPO_ROOT / "hooks" / "engram_hook.py"
HOOK_ENTRY = REPO_ROOT / "hooks" / "run_hook.py"  # what hooks.json runs: detaches the work of HOOK_SCRIPT


def wait_for_hook_children(engram_home: Path, session_ids: list[str], timeout: float = 30.0) -> None:
    """Until the detached children of these sessions' hooks (hooks/run_hook.py) have delivered or spooled their
    events: each session's ticket file reads "issued served", and is gone once the daemon ended the session.
    Claude Code does not wait for them, so a test that looks at the daemon right after a hook must."""
    import time

    deadline = time.monotonic() + timeout
    for sid in session_ids:
        path = engram_home / "hookstate" / f"{sid}.lock"
        while time.monotonic() < deadline:
            try:
                issued, served = (int(x) for x in path.read_text().split())
            except FileNotFoundError:
                break
            except ValueError:  # being written
                issued, served = 1, 0
            if served >= issued:
                break
            time.sleep(0.01)


class DaemonProc:
    """A real `engram serve` subprocess on a temp ENGRAM_HOME, talked to over its real socket.

    The idle timeout is not 0 so that a daemon a hook restarted behind the test's back (kill -9 tests) cannot
    outlive a crashed test run for long."""

    def __init__(
        self, home: Path, *, model: bool = True, idle_timeout: float = 900, env: dict | None = None
    ) -> None:
        import sys

        self.home = home
        self.python = sys.executable
        self.env = {
            **os.environ,
            "ENGRAM_HOME": str(home),
            "ENGRAM_DAEMON_IDLE_TIMEOUT_S": str(idle_timeout),
            **({} if model else {"ENGRAM_EMBEDDING_PROVIDER": "none"}),
            **(env or {}),
        }
        self.proc: Any = None

    @property
    def sock(self) -> Path:
        return self.home / "engram.sock"

    def start(self, timeout: float = 60.0):  # noqa: ANN201
        import subprocess
        import time

        # Its output goes to a file beside the data root, not to a pipe: nobody drains a pipe while the tests run,
        # and a daemon that logged 64 KB (a long suite's store upgrades) blocked on its next log line.
        self.output = self.home.parent / f"{self.home.name}.daemon-output.log"
        with open(self.output, "ab") as out:
            self.proc = subprocess.Popen(
                [self.python, "-m", "engram_core.daemon", "--home", str(self.home)],
                env=self.env,
                cwd=str(REPO_ROOT),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                err = self.output.read_text(errors="replace")
                if self.proc.returncode != 0 or "already running" not in err:
                    raise RuntimeError(f"daemon exited {self.proc.returncode}: {err[-2000:]}")
                self.proc = (
                    None  # another starter (a hook, a client) won the race: wait for and use its daemon
                )
            if self.answers():
                return self
            time.sleep(0.05)
        raise RuntimeError("daemon did not come up")

    def answers(self) -> bool:
        from engram_core.wire.client import DaemonUnavailable, RemoteService

        try:
            RemoteService(self.home, start=False).connect().close()
            return True
        except (DaemonUnavailable, OSError):
            return False

    def client(self):  # noqa: ANN201
        from engram_core.wire.client import RemoteService

        return RemoteService(self.home, start=False).connect()

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
        # A daemon a hook or client started behind the test's back (after a kill -9) must not outlive it.
        from engram_core.wire.client import daemon_pid

        pid = daemon_pid(self.home)
        try:  # the pid file may be stale and its number reused: only a daemon on this home is ours to stop
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") if pid else ""
        except OSError:
            cmd = ""
        if pid and "engram_core.daemon" in cmd and str(self.home) in cmd:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    os.kill(pid, 0)  # raises ProcessLookupError once it is gone
                    time.sleep(0.05)

    def kill9(self) -> None:
        import signal
        import time

        from engram_core.wire.client import daemon_pid

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


# Fixed at import, before any test points HOME at a temp dir: one install per machine, not per test.
_NPM_CACHE = Path(os.environ.get("ENGRAM_TEST_NPM_CACHE") or Path.home() / ".cache" / "engram-test" / "npm")


def npm_cli(package: str, binary: str) -> Path | None:
    """A real agent CLI from the npm registry, installed once per machine into a cache directory.

    Returns None (the caller skips, printing why) only where node/npm are missing; an install that fails with
    npm present is an error, not a skip."""
    import shutil
    import subprocess

    if shutil.which("node") is None or shutil.which("npm") is None:
        return None
    cache = _NPM_CACHE
    prefix = cache / package.replace("/", "+")
    exe = prefix / "node_modules" / ".bin" / binary
    if not exe.exists():
        prefix.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
            check=True,
            timeout=600,
            capture_output=True,
        )
    return exe


# The MCP server's tools (the real Claude Code tests count them in the first request).
MCP_TOOLS = {
    "store_memory",
    "recall_memories",
    "get_memory",
    "update_memory",
    "forget_memory",
    "promote_memory",
    "memory_stats",
    "search_knowledge_graph",
    "reflect_and_consolidate",
    "engram_explore",
    "engram_execute",
    "recall_skill",
    "mark_retrieval_useful",
    "memory_peek",
    "memory_partition",
    "memory_aggregate",
    "evolve_memory_system",
    "list_consolidations",
    "propose_consolidation_summary",
    "approve_consolidation",
    "reject_consolidation",
    "list_contradictions",
    "resolve_contradiction",
    "reopen_contradiction",
    "add_entities",
    "relate_entities",
    "end_episode",
    "session_summary",
}
