"""Engram on the real path at 15k, 50k and 100k memories, with the baselines in the same run (issue #15).

    python bench/realpath.py --work /tmp/rp                       # 15k (10k project + 5k user), 50k, 100k
    python bench/realpath.py --work /tmp/rp --quick               # the same steps at 1.2k, 1k, 2k: a few minutes
    python bench/realpath.py --work /tmp/rp --reuse               # measure the stores already in /tmp/rp
    python bench/realpath.py --work /tmp/rp --sizes 15000 --no-baselines

Data: realistic coding-memory text from bench/realpath_text.py (seed 7), imported through the real `engram import`
CLI with the default settings (organise layer on), run from inside a project directory with a private HOME and
ENGRAM_HOME. A size listed in --mixed (default 15000) is a store of its own holding 2/3 project and 1/3 user
memories (15000 = 10000 + 5000); every other size is project memories in one shared store that grows: 50k are
imported and measured, then a further 50k are imported into the same store and it is measured at 100k.
With --reuse, a store already in WORK is measured as it is (a store holding fewer memories than asked gets the
rest imported: an interrupted run resumes).

At each size, through the CLI, the daemon socket, the MCP bridge and the files on disk only:
  import: memories/s and wall time (the daemon started beforehand: the figure is the import itself);
  daemon cold start: socket ready / first recall answered, the first start after the import and a normal one;
  recall through the daemon socket, paced (a pause before each, as an agent asks) and back to back, p50/p95;
  `engram recall` as a process (and a bare `python -c pass` beside it);
  the MCP `recall_memories` tool call through the bridge `.mcp.json` runs, and a trivial tool call through the
  same bridge (`memory_aggregate` of nothing: the call's own cost), p50/p95 and the difference;
  a recall issued while `engram maintain` runs (does the sweep block it?);
  daemon RSS after the recalls; disk per memory (data root, project store) before and after `engram compact`.
Baselines in the same run, on the same texts and the same vectors (Engram's model on every stored text, which is
what Engram stores), each in a process of its own with a timeout: SurrealDB's own HNSW + FULLTEXT indexes (a separate surrealkv store,
one table per scope, both queried as Engram does), Chroma (the `bench` extra), SQLite FTS5, numpy top-10, the
query embedding alone and the model's batch embedding rate alone: query p50/p95, disk per memory, build time.

Progress goes to stderr (stage, how far, time elapsed, load). Results: JSON on stdout and bench/results/
realpath-<size>.json per size as each finishes (realpath-quick-<size>.json with --quick) plus one file with all
sizes (--out). Every stage records its wall time and the load average at its start and end. Every subprocess has
a timeout; the daemons this script starts are stopped and reaped at the end, on error and on SIGINT/SIGTERM.

Baseline workers (run by the script itself): `python bench/realpath.py --baseline NAME --data DIR`.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import platform
import queue
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import realpath_text  # noqa: E402

PY = sys.executable
# What a user types: the `engram` script beside this interpreter (PYTHONPATH puts this checkout first).
ENGRAM = (
    [str(Path(PY).parent / "engram")]
    if (Path(PY).parent / "engram").is_file()
    else [PY, "-m", "engram_core.cli"]
)
T0 = time.monotonic()
DIM = 384
# An installed Engram runs from cached bytecode: pip compiles it at install time, and a checkout run through
# `./dev run` writes it on first use. This machine sets PYTHONDONTWRITEBYTECODE=1 for every process, which makes
# each measured process compile Engram's modules from source again (~13 ms of an `engram recall`, ~0.1 s of a
# daemon start). The run compiles them once (`compile_engram`) and the processes it measures read that bytecode;
# the `engram recall` row also reports the cost without it (`without_cached_bytecode`).
NO_BYTECODE = "PYTHONDONTWRITEBYTECODE"


# ── small helpers ───────────────────────────────────────────
def load() -> float:
    return round(os.getloadavg()[0], 2)


def loads() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def log(msg: str) -> None:
    el = time.monotonic() - T0
    print(
        f"[realpath {time.strftime('%H:%M:%S', time.gmtime())} UTC, +{el / 60:.1f} min, load {load():.2f}] {msg}",
        file=sys.stderr,
        flush=True,
    )


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(round(q * (len(s) - 1))))], 2)


def summary(xs: list[float]) -> dict[str, Any]:
    if not xs:
        return {"n": 0}
    return {
        "p50_ms": pct(xs, 0.5),
        "p95_ms": pct(xs, 0.95),
        "min_ms": round(min(xs), 2),
        "max_ms": round(max(xs), 2),
        "mean_ms": round(statistics.fmean(xs), 2),
        "n": len(xs),
    }


def du(p: Path) -> int:
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.exists() else 0


def rss_mb(pid: int) -> float:
    return _status_mb(pid, "VmRSS:")


def _status_mb(pid: int, key: str) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def alive(pid: int) -> bool:
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:  # our own child: reap it, or it stays a zombie
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
        return not Path(f"/proc/{pid}/stat").read_text().split(") ")[-1].startswith("Z")
    except OSError:
        return False


def run(cmd: list[str], timeout: float, **kw: Any) -> subprocess.CompletedProcess[str]:
    """subprocess.run with a timeout that kills the child's whole process group."""
    proc = subprocess.Popen(
        cmd, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw
    )
    CHILDREN.add(proc)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise TimeoutError(
            f"{' '.join(cmd[:4])}… did not finish within {timeout:.0f} s; stderr: {err[-500:]}"
        ) from None
    finally:
        CHILDREN.discard(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def kill_group(proc: subprocess.Popen[Any]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc.poll() is not None:
            return
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)


CHILDREN: set[subprocess.Popen[Any]] = set()  # running subprocesses, killed on the way out
SETUPS: list[Setup] = []  # every data root whose daemon this run may have started


# ── one store: its private HOME, ENGRAM_HOME and project directory ─────────
class Setup:
    """WORK/{home,engram-home,proj}: a private HOME and data root, and the project the memories belong to (a git
    directory, so `engram` finds it as a project). bench/realpath_recall.py uses the same layout."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "home"
        self.eh = work / "engram-home"
        self.proj = work / "proj"
        self.data = work / "data.jsonl"
        self.state_file = work / "state.json"
        self.daemon: subprocess.Popen[bytes] | None = None
        SETUPS.append(self)

    def env(self) -> dict[str, str]:
        cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")  # the exported model, once
        env = {k: v for k, v in os.environ.items() if k != NO_BYTECODE}
        return {
            **env,
            "HOME": str(self.home),
            "ENGRAM_HOME": str(self.eh),
            "XDG_CACHE_HOME": cache,
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "CLAUDE_PROJECT_DIR": str(self.proj),
        }

    def make(self) -> None:
        for d in (self.home, self.proj / ".git"):
            d.mkdir(parents=True, exist_ok=True)
        self.eh.mkdir(mode=0o700, exist_ok=True)  # owner-only: Engram refuses a data root others can open

    def state(self) -> dict[str, Any]:
        return json.loads(self.state_file.read_text()) if self.state_file.is_file() else {"imported": 0}

    def engram(
        self, *args: str, check: bool = True, timeout: float = 600
    ) -> subprocess.CompletedProcess[str]:
        out = run([*ENGRAM, *args], timeout, cwd=self.proj, env=self.env())
        if check and out.returncode != 0:
            raise RuntimeError(f"engram {' '.join(args[:2])} exited {out.returncode}: {out.stderr[-2000:]}")
        return out

    def pid_from_file(self) -> int | None:
        f = self.eh / "engram.pid"
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int(f.read_text().split()[0])
        return None

    def client(self, timeout: float = 600) -> Any:
        from engram_core.wire.client import RemoteService

        return RemoteService(self.eh, start=False, request_timeout=timeout).connect()

    def start(self, timeout: float = 900) -> tuple[float, Any]:
        """Start the daemon as our child; returns (seconds until its socket answered, a connected client)."""
        from engram_core.wire.client import DaemonUnavailable

        if self.daemon is not None and self.daemon.poll() is None:
            raise RuntimeError("a daemon of this bench is already running here")
        t0 = time.perf_counter()
        self.daemon = subprocess.Popen(
            [PY, "-m", "engram_core.daemon", "--home", str(self.eh)],
            env=self.env(),
            cwd=self.proj,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        while True:
            try:
                return time.perf_counter() - t0, self.client()
            except DaemonUnavailable:
                pass
            if self.daemon.poll() is not None:
                raise RuntimeError(
                    f"the daemon exited at start ({self.daemon.returncode}); see {self.eh}/engram.log"
                )
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"the daemon's socket did not answer within {timeout:.0f} s")
            time.sleep(0.005)

    def stop(self, timeout: float = 900) -> float:
        """Stop the daemon and wait until its process is gone (it writes the snapshots while closing, and a new
        daemon cannot open the stores before); returns the seconds it took."""
        t0 = time.perf_counter()
        pids = {p for p in (self.pid_from_file(), self.daemon.pid if self.daemon else None) if p}
        if pids:
            with contextlib.suppress(Exception):
                self.engram("stop", "--timeout", str(int(timeout)), check=False, timeout=timeout + 30)
        deadline = time.monotonic() + timeout
        for pid in pids:
            while alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if alive(pid):  # a daemon this run started (our child, or the one `engram import` started here)
                log(f"daemon {pid} did not stop within {timeout:.0f} s: SIGTERM, then SIGKILL")
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    with contextlib.suppress(OSError):
                        os.kill(pid, sig)
                    end = time.monotonic() + 20
                    while alive(pid) and time.monotonic() < end:
                        time.sleep(0.1)
        if self.daemon is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.daemon.wait(5)
            self.daemon = None
        return time.perf_counter() - t0

    def disk(self) -> dict[str, int]:
        store_dir = self.proj / ".claude" / "engram"
        snaps = [
            *store_dir.glob("*.npz"),
            *store_dir.glob("*.json"),
            *self.eh.glob("*.npz"),
            *self.eh.glob("*.json"),
        ]
        return {
            "data_root_bytes": du(self.eh) + du(store_dir),
            "engram_home_bytes": du(self.eh),
            "project_store_bytes": du(store_dir),
            "project_db_bytes": du(store_dir / "project.db"),
            "user_db_bytes": du(self.eh / "user.db"),
            "snapshot_bytes": sum(du(f) for f in snaps if f.name != "launcher.json"),
        }

    def log_counts(self) -> dict[str, int]:
        """Background work the daemon logged (a sweep or a compaction inside a measurement shows in its p95)."""
        try:
            text = (self.eh / "engram.log").read_text(errors="replace")
        except OSError:
            return {"maintenance": 0, "compactions": 0, "compaction_s": 0}
        lines = [x for x in text.splitlines() if " engram.daemon: " in x]
        took = [re.search(r" in (\d+) ms$", x) for x in lines if " compacted " in x]
        return {
            "maintenance": sum("maintenance:" in x for x in lines),
            "compactions": sum(" compacted " in x for x in lines),
            "compaction_s": round(sum(int(m.group(1)) for m in took if m) / 1000, 1),
        }


# ── stages ──────────────────────────────────────────────────
class Run:
    def __init__(self) -> None:
        self.timeline: list[dict[str, Any]] = []

    @contextlib.contextmanager
    def stage(
        self, label: str, name: str, s: Setup | None = None, fatal: bool = False
    ) -> Iterator[dict[str, Any]]:
        """Times a stage and records the load around it. A failure is recorded in the row; only a fatal stage's
        failure (an import, the daemon start the rest needs) ends the run."""
        row: dict[str, Any] = {"load_start": loads()}
        before = s.log_counts() if s else None
        log(f"{label}: {name} …")
        t = time.perf_counter()
        try:
            yield row
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            log(f"{label}: {name} FAILED: {row['error']}")
            if fatal:
                raise
        finally:
            row["seconds"] = round(time.perf_counter() - t, 2)
            row["load_end"] = loads()
            if s and before:
                after = s.log_counts()
                bg = {k: round(after[k] - before[k], 1) for k in after if after[k] - before[k]}
                if bg:
                    row["daemon_background_during_stage"] = bg
            self.timeline.append(
                {
                    "size": label,
                    "stage": name,
                    "seconds": row["seconds"],
                    "load_start": row["load_start"],
                    "load_end": row["load_end"],
                }
            )
            log(f"{label}: {name} done in {row['seconds']:.1f} s")


def write_data(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def do_import(s: Setup, rows: list[dict[str, Any]], label: str, timeout: float) -> dict[str, Any]:
    """`engram import FILE --json` from inside the project, the daemon already up (its start is measured on its
    own). Progress: the store's count (`stats` on the socket, once a minute; it waits for the chunk being written)."""
    part = s.work / f"import-{s.state()['imported']}-{s.state()['imported'] + len(rows)}.jsonl"
    write_data(part, rows)
    start_s, client = s.start()
    st0 = client.call("stats", project=str(s.proj))
    before = sum(x["total"] for x in st0["scopes"])
    client.close()
    t = time.perf_counter()
    proc = subprocess.Popen(
        [*ENGRAM, "import", str(part), "--json"],
        cwd=s.proj,
        env=s.env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    CHILDREN.add(proc)
    out_q: queue.Queue[tuple[str, str]] = queue.Queue()
    threading.Thread(target=lambda: out_q.put(proc.communicate()), daemon=True).start()
    last, polls, poll_s = t, 0, 0.0
    try:
        while True:
            try:
                out, err = out_q.get(timeout=5)
                break
            except queue.Empty:
                pass
            now = time.perf_counter()
            if now - t > timeout:
                kill_group(proc)
                raise TimeoutError(f"engram import did not finish within {timeout:.0f} s")
            if now - last >= 60:
                last = now
                try:
                    polls += 1
                    with s.client(timeout=30) as c:
                        tp = time.perf_counter()
                        st = c.call("stats", project=str(s.proj))
                        poll_s += time.perf_counter() - tp
                    total = sum(x["total"] for x in st["scopes"])
                    done = total - before
                    rate = done / (now - t)
                    left = (len(rows) - done) / rate if rate > 0 else float("nan")
                    log(
                        f"{label}: import {done:,}/{len(rows):,} ({rate:.0f}/s, ~{left / 60:.1f} min left; "
                        f"{(now - t) / 60:.1f} min so far)"
                    )
                except Exception as exc:  # progress only: never fail the import for it
                    log(f"{label}: import running, {(now - t) / 60:.1f} min so far (no count: {exc})")
    finally:
        CHILDREN.discard(proc)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"engram import exited {proc.returncode}: {err[-2000:]}")
    report = json.loads(out)
    stop_s = s.stop()
    part.unlink()
    st = s.state()
    st["imported"] += len(rows)
    st.setdefault("imports", []).append({"memories": len(rows), "seconds": round(took, 1)})
    s.state_file.write_text(json.dumps(st))
    return {
        "memories": len(rows),
        "stored": report.get("stored"),
        "merged": report.get("merged"),
        "failed": len(report.get("failed") or []),
        "seconds": round(took, 1),
        "memories_per_second": round(len(rows) / took, 1),
        "daemon_start_before_s": round(start_s, 2),
        "daemon_stop_after_s": round(stop_s, 2),
        "progress_polls": polls,
        "progress_polls_s": round(poll_s, 2),
        "note": "wall time of `engram import` (CLI start included), the daemon started beforehand; progress "
        "polls: a `stats` call on the socket once a minute",
    }


def cold_start(s: Setup, query: str) -> dict[str, Any]:
    """Start the daemon; seconds until its socket answers and until the first recall is answered."""
    ready, client = s.start()
    t = time.perf_counter()
    client.call("recall", query=query, project=str(s.proj), limit=10)
    first = ready + time.perf_counter() - t
    client.close()
    assert s.daemon is not None
    return {
        "ready_s": round(ready, 2),
        "first_recall_answered_s": round(first, 2),
        "load": load(),
        "pid": s.daemon.pid,
    }


def recall_daemon(s: Setup, queries: list[str], gap_s: float, budget_s: float = 600) -> dict[str, Any]:
    client = s.client()
    times: list[float] = []
    t0 = time.perf_counter()
    for q in queries:
        if gap_s:
            time.sleep(gap_s)
        t = time.perf_counter()
        client.call("recall", query=q, project=str(s.proj), limit=10)
        times.append((time.perf_counter() - t) * 1000)
        if time.perf_counter() - t0 > budget_s:
            break
    client.close()
    out = {**summary(times), "gap_ms": int(gap_s * 1000), "load": load()}
    if len(times) < len(queries):
        out["stopped_by_budget_s"] = budget_s
    return out


def recall_cli(s: Setup, queries: list[str], budget_s: float = 600) -> dict[str, Any]:
    times: list[float] = []
    t0 = time.perf_counter()
    for q in queries:
        t = time.perf_counter()
        s.engram("recall", q, "--json", "--project", str(s.proj), timeout=300)
        times.append((time.perf_counter() - t) * 1000)
        if time.perf_counter() - t0 > budget_s:
            break
    bare = []
    for _ in range(10):
        t = time.perf_counter()
        run([PY, "-c", "pass"], 60)
        bare.append((time.perf_counter() - t) * 1000)
    # The same command when no bytecode is cached (an empty cache prefix, nothing written): every module compiled.
    cold: list[float] = []
    with tempfile.TemporaryDirectory() as empty:
        env = {**s.env(), NO_BYTECODE: "1", "PYTHONPYCACHEPREFIX": empty}
        for q in queries[:10]:
            t = time.perf_counter()
            out = run([*ENGRAM, "recall", q, "--json", "--project", str(s.proj)], 300, cwd=s.proj, env=env)
            cold.append((time.perf_counter() - t) * 1000)
            if out.returncode != 0:
                raise RuntimeError(f"engram recall exited {out.returncode}: {out.stderr[-1000:]}")
    return {
        **summary(times),
        "bare_python_c_pass": summary(bare),
        "without_cached_bytecode": summary(cold),
        "load": load(),
    }


def compile_engram() -> dict[str, Any]:
    """Compile this checkout's modules once, as an install does (see NO_BYTECODE)."""
    t = time.perf_counter()
    out = run(
        [PY, "-m", "compileall", "-q", str(ROOT / "engram_core"), str(ROOT / "hooks")],
        300,
        env={k: v for k, v in os.environ.items() if k != NO_BYTECODE},
    )
    if out.returncode != 0:
        raise RuntimeError(f"compileall exited {out.returncode}: {out.stderr[-1000:]}")
    return {
        "seconds": round(time.perf_counter() - t, 2),
        "bytecode": "cached, as an install leaves it",
        f"{NO_BYTECODE}_on_this_machine": os.environ.get(NO_BYTECODE),
    }


class Bridge:
    """The MCP server as Claude Code starts it from `.mcp.json`: `python3 -S engram_core/mcp/run_bridge.py`, JSON-RPC
    lines on stdio. Every answer is awaited with a timeout."""

    def __init__(self, s: Setup, timeout: float = 300) -> None:
        self.python = shutil.which("python3") or PY
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [self.python, "-S", str(ROOT / "engram_core" / "mcp" / "run_bridge.py")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=s.env(),
            cwd=s.proj,
            start_new_session=True,
        )
        CHILDREN.add(self.proc)
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ids = 0

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(b"")

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.ids += 1
        self.send({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params})
        deadline = time.monotonic() + self.timeout
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if not line:
                raise RuntimeError("the MCP bridge closed its output")
            got = json.loads(line)
            if got.get("id") == self.ids:
                return got

    def tool(self, name: str, args: dict[str, Any]) -> tuple[float, str | None]:
        t = time.perf_counter()
        got = self.ask("tools/call", {"name": name, "arguments": args})
        ms = (time.perf_counter() - t) * 1000
        res = got.get("result") or {}
        if "error" in got or res.get("isError"):
            return ms, json.dumps(got)[:500]
        return ms, None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
        CHILDREN.discard(self.proc)


def recall_mcp(
    s: Setup, queries: list[str], socket_queries: list[str], gap_s: float, budget_s: float = 600
) -> dict[str, Any]:
    """`recall_memories` and a trivial tool (`memory_aggregate` of no lists: no store, no model) alternately through
    one bridge, paced; then as many other questions on the daemon socket, paced (other questions: a repeated one
    would find its vector in the model's cache). The call's own cost is the trivial tool's."""
    b = Bridge(s)
    try:
        t = time.perf_counter()
        b.ask(
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "realpath-bench", "version": "0"},
            },
        )
        init_ms = (time.perf_counter() - t) * 1000
        b.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        b.tool("memory_aggregate", {"results": []})  # warm: the first call of a connection joins its context
        rec, triv, errors = [], [], []
        t0 = time.perf_counter()
        for q in queries:
            time.sleep(gap_s)
            ms, err = b.tool("recall_memories", {"query": q})
            rec.append(ms)
            time.sleep(gap_s)
            ms2, err2 = b.tool("memory_aggregate", {"results": []})
            triv.append(ms2)
            errors += [e for e in (err, err2) if e]
            if time.perf_counter() - t0 > budget_s:
                break
    finally:
        b.close()
    same = recall_daemon(s, socket_queries[: len(rec)], gap_s, budget_s)
    out: dict[str, Any] = {
        "bridge": f"{b.python} -S engram_core/mcp/run_bridge.py",
        "initialize_ms": round(init_ms, 1),
        "recall_memories": summary(rec),
        "trivial_tool_memory_aggregate": summary(triv),
        "socket_recall_paced_right_after": same,
        "gap_ms": int(gap_s * 1000),
        "load": load(),
    }
    if rec and triv:
        out["recall_over_trivial_p50_ms"] = round(
            out["recall_memories"]["p50_ms"] - out["trivial_tool_memory_aggregate"]["p50_ms"], 2
        )
        out["recall_over_socket_recall_p50_ms"] = round(out["recall_memories"]["p50_ms"] - same["p50_ms"], 2)
    if errors:
        out["errors"] = {"n": len(errors), "first": errors[0]}
    return out


def recall_during_maintain(s: Setup, queries: list[str], timeout: float) -> dict[str, Any]:
    """`engram maintain` (the sweep the daemon runs every 10 min) and, while it runs, a recall every 100 ms on the
    socket: how long does a recall wait for the sweep?"""
    client = s.client(timeout=timeout)
    client.call("recall", query=queries[0], project=str(s.proj), limit=10)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*ENGRAM, "maintain", "--json"],
        cwd=s.proj,
        env=s.env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    CHILDREN.add(proc)
    during: list[float] = []
    offsets: list[float] = []
    i = 1
    try:
        while proc.poll() is None:
            if time.perf_counter() - t0 > timeout:
                kill_group(proc)
                raise TimeoutError(f"engram maintain did not finish within {timeout:.0f} s")
            time.sleep(0.1)
            t = time.perf_counter()
            client.call("recall", query=queries[i % len(queries)], project=str(s.proj), limit=10)
            during.append((time.perf_counter() - t) * 1000)
            offsets.append(round(t - t0, 2))
            i += 1
        maintain_s = time.perf_counter() - t0
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            kill_group(proc)
        CHILDREN.discard(proc)
        client.close()
    res: dict[str, Any] = {
        "maintain_wall_s": round(maintain_s, 2),
        "maintain_exit": proc.returncode,
        "recalls_while_maintain_ran": summary(during),
        "longest_recall_started_at_s": offsets[during.index(max(during))] if during else None,
        "load": load(),
    }
    if proc.returncode != 0:
        res["maintain_stderr"] = err[-1000:]
    else:
        with contextlib.suppress(ValueError):
            res["maintain_report"] = json.loads(out)
    return res


def run_baseline(name: str, data: Path, timeout: float, label: str) -> dict[str, Any]:
    """One baseline worker in a process of its own (its progress lines pass through to stderr)."""
    t = time.perf_counter()
    proc = subprocess.Popen(
        [PY, str(Path(__file__).resolve()), "--baseline", name, "--data", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "ANONYMIZED_TELEMETRY": "False",
        },
    )
    CHILDREN.add(proc)
    err_tail: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            err_tail.append(line)
            del err_tail[:-30]
            if line.startswith("[baseline"):
                log(f"{label}: {line.strip()}")

    th = threading.Thread(target=pump, daemon=True)
    th.start()
    try:
        out = proc.stdout.read() if proc.stdout else ""  # type: ignore[union-attr]
        proc.wait(timeout=max(1.0, timeout - (time.perf_counter() - t)))
    except subprocess.TimeoutExpired:
        kill_group(proc)
        return {"error": f"timed out after {timeout:.0f} s", "stderr_tail": "".join(err_tail)[-1500:]}
    finally:
        CHILDREN.discard(proc)
    th.join(5)
    if proc.returncode != 0:
        return {"error": f"exit {proc.returncode}", "stderr_tail": "".join(err_tail)[-1500:]}
    res = json.loads(out)
    res["worker_wall_s"] = round(time.perf_counter() - t, 2)
    return res


# ── the measurements at one size ──────────────────────────────
def measure(
    s: Setup,
    size: int,
    label: str,
    r: Run,
    a: argparse.Namespace,
    *,
    n_project: int,
    n_user: int,
    rows: list[dict[str, Any]],
    import_rows: list[dict[str, Any]] | None,
    data_dir: Path,
) -> dict[str, Any]:
    res: dict[str, Any] = {"size": size, "project": n_project, "user": n_user, "store": str(s.work)}
    # Distinct questions for every row: the daemon's model caches the vectors of the last 256 single texts.
    need = 2 * a.queries + 2 * a.mcp_queries + a.cli_queries + 2 + 200
    qs = list(dict.fromkeys(realpath_text.questions(2 * need, 11)))[:need]
    cut = list(np.cumsum([2, a.queries, a.queries, a.mcp_queries, a.mcp_queries, a.cli_queries]))
    starts, paced, b2b, mcp_q, mcp_socket, cli_q, maint_q = (
        qs[i:j] for i, j in zip([0, *cut], [*cut, len(qs)], strict=True)
    )
    scale = max(1.0, size / 10_000)
    if import_rows:
        with r.stage(label, f"import {len(import_rows):,}", s, fatal=True) as row:
            row.update(
                do_import(
                    s, import_rows, label, timeout=a.import_timeout_per_k * len(import_rows) / 1000 + 600
                )
            )
        res["import"] = row
        res["disk_as_imported"] = {**s.disk(), "note": "after the import's daemon stopped"}
    else:
        s.stop()
    stored = s.state()["imported"]
    with r.stage(
        label, "daemon start, the first after the import" if import_rows else "daemon start (a first)", s
    ) as row:
        try:
            row.update(cold_start(s, starts[0]))
        finally:
            row["stop_after_s"] = round(s.stop(), 2)
    res["cold_start_first_after_import" if import_rows else "cold_start_first_of_run"] = row
    with r.stage(label, "daemon start, normal", s, fatal=True) as row:
        row.update(cold_start(s, starts[1]))
    res["cold_start"] = row
    pid = row["pid"]
    res["rss_mb_after_start"] = rss_mb(pid)
    with r.stage(label, f"recall paced ({len(paced)}, {a.gap_ms} ms before each)", s) as row:
        row.update(recall_daemon(s, paced, a.gap_ms / 1000, a.budget_s))
    res["recall_paced"] = row
    with r.stage(label, f"recall back to back ({len(b2b)})", s) as row:
        row.update(recall_daemon(s, b2b, 0, a.budget_s))
    res["recall_back_to_back"] = row
    with r.stage(label, f"MCP tool calls through the bridge ({len(mcp_q)} of each)", s) as row:
        row.update(recall_mcp(s, mcp_q, mcp_socket, a.gap_ms / 1000, a.budget_s))
    res["mcp"] = row
    res["rss_mb_after_recalls"] = rss_mb(pid)
    res["rss_mb_peak"] = _status_mb(pid, "VmHWM:")
    with r.stage(label, f"`engram recall` as a process ({a.cli_queries})", s) as row:
        row.update(recall_cli(s, cli_q, a.budget_s))
    res["recall_cli_process"] = row
    with r.stage(label, "recall while `engram maintain` runs", s) as row:
        row.update(recall_during_maintain(s, maint_q, timeout=600 * scale))
    res["maintenance_vs_recall"] = row
    res["rss_mb_after_maintain"] = rss_mb(pid)
    with r.stage(label, "daemon stop", s) as row:
        row["stop_s"] = round(s.stop(), 2)
    disk = s.disk()
    res["disk"] = {
        **disk,
        "memories": stored,
        "bytes_per_memory_data_root": round(disk["data_root_bytes"] / stored),
        "bytes_per_project_memory_project_store": round(disk["project_store_bytes"] / max(1, n_project)),
    }
    if not a.no_compact:
        with r.stage(label, "engram compact", s) as row:
            try:
                client = s.start()[1]
                client.call(
                    "recall", query=starts[0], project=str(s.proj), limit=10
                )  # opens the project store
                client.close()
                out = s.engram("compact", "--json", timeout=1200 * scale)  # every store the daemon has open
                with contextlib.suppress(ValueError):
                    row["report"] = json.loads(out.stdout)
            finally:
                row["stop_s"] = round(s.stop(), 2)
        res["compact"] = row
        d2 = s.disk()
        res["disk_after_compact"] = {
            **d2,
            "bytes_per_memory_data_root": round(d2["data_root_bytes"] / stored),
            "bytes_per_project_memory_project_store": round(d2["project_store_bytes"] / max(1, n_project)),
        }
    if not a.no_baselines:
        data_dir.mkdir(parents=True, exist_ok=True)
        (data_dir / "texts.json").write_text(
            json.dumps({"texts": [x["content"] for x in rows], "scopes": [x["scope"] for x in rows]}),
            encoding="utf-8",
        )
        (data_dir / "queries.json").write_text(json.dumps(qs[2 : 2 + a.baseline_queries]), encoding="utf-8")
        bl: dict[str, Any] = {}
        for name in ("embedding", "numpy", "sqlite_fts5", "chroma", "surrealdb"):
            with r.stage(label, f"baseline {name}") as row:
                row.update(run_baseline(name, data_dir, a.baseline_timeout_per_k * size / 1000 + 300, label))
            bl[name] = row
        res["baselines"] = bl
    return res


# ── baseline workers (each run in a process of its own) ───────────
def blog(name: str, msg: str) -> None:
    print(f"[baseline {name}] {msg}", file=sys.stderr, flush=True)


def _data(d: Path) -> tuple[list[str], list[str], np.ndarray, list[str], np.ndarray]:
    tx = json.loads((d / "texts.json").read_text(encoding="utf-8"))
    vecs = np.load(d / "vecs.npy")
    queries = json.loads((d / "queries.json").read_text(encoding="utf-8"))
    qv = np.load(d / "qvecs.npy") if (d / "qvecs.npy").exists() else None
    return tx["texts"], tx["scopes"], vecs, queries, qv  # type: ignore[return-value]


def _by_scope(scopes: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for i, sc in enumerate(scopes):
        out.setdefault(sc, []).append(i)
    return out


def b_embedding(d: Path) -> dict[str, Any]:
    """The model alone: every stored text embedded in chunks of 64 (as an import embeds them), then one query at a
    time. Writes the vectors the other baselines use: Engram's own, since Engram embeds a memory's content with
    this model (checked at fp32: cosine >= 0.9999999 against `engram export`'s embeddings; a new home's model is
    int8, which embeds one text a run: the same vector whatever the batch). They are computed here rather
    than exported because `engram export` of a 15k store fails (its answer exceeds the socket's line limit)."""
    from engram_core.retrieval.embeddings import LocalEmbedder

    tx = json.loads((d / "texts.json").read_text(encoding="utf-8"))
    texts, queries = tx["texts"], json.loads((d / "queries.json").read_text(encoding="utf-8"))
    t = time.perf_counter()
    model = LocalEmbedder()
    model.embed(["warm up"])
    load_s = time.perf_counter() - t
    vecs = np.zeros((len(texts), DIM), dtype=np.float32)
    t = last = time.perf_counter()
    for i in range(0, len(texts), 64):
        vecs[i : i + 64] = np.asarray(model.embed(texts[i : i + 64]), dtype=np.float32)
        if time.perf_counter() - last > 60:
            last = time.perf_counter()
            blog("embedding", f"{i + 64:,}/{len(texts):,} texts ({(i + 64) / (last - t):.0f}/s)")
    batch = len(texts) / (time.perf_counter() - t)
    np.save(d / "vecs.npy", vecs)
    times, qv = [], []
    for q in queries:
        t = time.perf_counter()
        qv.append(model.embed([q])[0])
        times.append((time.perf_counter() - t) * 1000)
    np.save(d / "qvecs.npy", np.asarray(qv, dtype=np.float32))
    return {
        "model_load_s": round(load_s, 2),
        "batch_texts": len(texts),
        "batch_texts_per_second": round(batch, 1),
        "query_embedding": summary(times),
        "load": load(),
    }


def b_numpy(d: Path) -> dict[str, Any]:
    texts, scopes, vecs, _, qv = _data(d)
    mats = [
        vecs[idx] / np.maximum(np.linalg.norm(vecs[idx], axis=1, keepdims=True), 1e-9)
        for idx in _by_scope(scopes).values()
    ]
    times = []
    for v in qv:
        t = time.perf_counter()
        for m in mats:
            sc = m @ v
            k = min(10, len(sc) - 1)
            top = np.argpartition(-sc, k)[:10]
            top[np.argsort(-sc[top])]
        times.append((time.perf_counter() - t) * 1000)
    return {
        "query_both_scopes": summary(times),
        "vectors": len(vecs),
        "bytes_per_memory_float32": DIM * 4,
        "load": load(),
    }


def _fts_query(q: str) -> str:
    words = [w for w in "".join(c if c.isalnum() else " " for c in q).split()]
    return " OR ".join(f'"{w}"' for w in words) or '""'


def b_sqlite_fts5(d: Path) -> dict[str, Any]:
    texts, scopes, _, queries, _ = _data(d)
    path = d / "fts.db"
    path.unlink(missing_ok=True)
    groups = _by_scope(scopes)
    t = time.perf_counter()
    db = sqlite3.connect(path)
    for sc, idx in groups.items():
        db.execute(f"CREATE VIRTUAL TABLE m_{sc} USING fts5(content)")
        db.executemany(f"INSERT INTO m_{sc} VALUES (?)", [(texts[i],) for i in idx])
    db.commit()
    db.close()
    build = time.perf_counter() - t
    t = time.perf_counter()
    db = sqlite3.connect(path)
    db.execute(
        f"SELECT rowid FROM m_{next(iter(groups))} WHERE m_{next(iter(groups))} MATCH ? ORDER BY rank LIMIT 10",
        (_fts_query(queries[0]),),
    ).fetchall()
    first = time.perf_counter() - t
    times = []
    for q in queries:
        t = time.perf_counter()
        for sc in groups:
            db.execute(
                f"SELECT rowid FROM m_{sc} WHERE m_{sc} MATCH ? ORDER BY rank LIMIT 10", (_fts_query(q),)
            ).fetchall()
        times.append((time.perf_counter() - t) * 1000)
    db.close()
    size = path.stat().st_size
    path.unlink()
    return {
        "build_s": round(build, 2),
        "open_and_first_query_s": round(first, 3),
        "query_both_scopes": summary(times),
        "bytes_per_memory": round(size / max(1, len(texts))),
        "load": load(),
    }


def b_chroma(d: Path) -> dict[str, Any]:
    import chromadb

    texts, scopes, vecs, queries, qv = _data(d)
    path = d / "chroma"
    shutil.rmtree(path, ignore_errors=True)
    groups = _by_scope(scopes)
    t = time.perf_counter()
    client = chromadb.PersistentClient(path=str(path))
    for sc, idx in groups.items():
        col = client.create_collection(sc, metadata={"hnsw:space": "cosine"})
        for j in range(0, len(idx), 5000):
            part = idx[j : j + 5000]
            col.add(ids=[str(i) for i in part], embeddings=vecs[part], documents=[texts[i] for i in part])
            blog("chroma", f"added {j + len(part):,}/{len(idx):,} to {sc} ({time.perf_counter() - t:.0f} s)")
    build = time.perf_counter() - t
    cols = [client.get_collection(sc) for sc in groups]
    times = []
    for v in qv:
        t = time.perf_counter()
        for c in cols:
            c.query(query_embeddings=[v.tolist()], n_results=10)
        times.append((time.perf_counter() - t) * 1000)
    del cols, client
    # A new process: open the store and answer a first query (Chroma's cold start).
    code = (
        "import sys, time, numpy as np, chromadb; t=time.perf_counter(); c=chromadb.PersistentClient(path=sys.argv[1]);"
        "col=c.get_collection(sys.argv[2]); col.query(query_embeddings=[np.load(sys.argv[3])[0].tolist()], n_results=10);"
        "print(time.perf_counter()-t)"
    )
    t = time.perf_counter()
    out = subprocess.run(
        [PY, "-c", code, str(path), next(iter(groups)), str(d / "qvecs.npy")],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    cold_wall = time.perf_counter() - t
    size = du(path)
    shutil.rmtree(path, ignore_errors=True)
    return {
        "version": chromadb.__version__,
        "build_s": round(build, 2),
        "add_per_second": round(len(texts) / build, 1) if build else None,
        "query_both_scopes": summary(times),
        "bytes_per_memory": round(size / max(1, len(texts))),
        "new_process_open_and_first_query_s": round(cold_wall, 2),
        "open_and_first_query_in_process_s": round(float(out.stdout.strip() or 0), 3),
        "load": load(),
    }


def b_surrealdb(d: Path) -> dict[str, Any]:
    """SurrealDB's own indexes on the same texts and vectors: a table per scope with FULLTEXT (BM25) and HNSW, queried
    for both scopes as Engram recalls (kNN `<|10,40|>` and `@1@`)."""
    from surrealdb import Surreal

    texts, scopes, vecs, queries, qv = _data(d)
    path = d / "surreal"
    shutil.rmtree(path, ignore_errors=True)
    groups = _by_scope(scopes)
    db = Surreal(f"surrealkv://{path}")
    db.use("bench", "x")
    schema = (
        "DEFINE ANALYZER IF NOT EXISTS a TOKENIZERS blank, class FILTERS ascii, lowercase, snowball(english);"
        "DEFINE TABLE {t} SCHEMALESS; DEFINE INDEX {t}_ft ON {t} FIELDS content FULLTEXT ANALYZER a BM25;"
        f"DEFINE INDEX {{t}}_v ON {{t}} FIELDS embedding HNSW DIMENSION {DIM} DIST COSINE;"
    )
    t = time.perf_counter()
    last = t
    for tb, idx in groups.items():
        db.query(schema.replace("{t}", tb)).execute()
        for j in range(0, len(idx), 500):
            rows = [{"content": texts[i], "embedding": vecs[i].tolist()} for i in idx[j : j + 500]]
            db.query(f"INSERT INTO {tb} $rows RETURN NONE", {"rows": rows}).execute()
            if time.perf_counter() - last > 30:
                last = time.perf_counter()
                blog("surrealdb", f"inserted {j + len(rows):,}/{len(idx):,} into {tb} ({last - t:.0f} s)")
    build = time.perf_counter() - t
    hnsw, ft = [], []
    for q, v in zip(queries, qv, strict=True):
        vl = v.tolist()
        t = time.perf_counter()
        for tb in groups:
            db.query(
                f"SELECT id, vector::distance::knn() AS d FROM {tb} WHERE embedding <|10,40|> $v", {"v": vl}
            ).execute()
        hnsw.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        for tb in groups:
            db.query(
                f"SELECT id, search::score(1) AS s FROM {tb} WHERE content @1@ $q ORDER BY s DESC LIMIT 10",
                {"q": q},
            ).execute()
        ft.append((time.perf_counter() - t) * 1000)
    db.close()
    size = du(path)
    shutil.rmtree(path, ignore_errors=True)
    return {
        "build_s": round(build, 1),
        "insert_per_second": round(len(texts) / build, 1) if build else None,
        "hnsw_both_scopes": summary(hnsw),
        "fulltext_both_scopes": summary(ft),
        "hnsw_plus_fulltext": summary([x + y for x, y in zip(hnsw, ft, strict=True)]),
        "bytes_per_memory": round(size / max(1, len(texts))),
        "load": load(),
    }


BASELINES: dict[str, Callable[[Path], dict[str, Any]]] = {
    "embedding": b_embedding,
    "numpy": b_numpy,
    "sqlite_fts5": b_sqlite_fts5,
    "chroma": b_chroma,
    "surrealdb": b_surrealdb,
}


# ── the run ─────────────────────────────────────────────────
def cleanup() -> None:
    for proc in list(CHILDREN):
        kill_group(proc)
    for s in SETUPS:
        with contextlib.suppress(Exception):
            s.stop(timeout=300)


def _signal(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def git_head() -> str:
    with contextlib.suppress(Exception):
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, help="working directory: one sub-directory per store (required)")
    ap.add_argument(
        "--sizes", default=None, help="comma-separated memory counts (default 15000,50000,100000)"
    )
    ap.add_argument(
        "--mixed",
        default=None,
        help="sizes stored as a store of their own with 2/3 project, 1/3 user "
        "memories (default 15000); the other sizes are project memories in one growing store",
    )
    ap.add_argument(
        "--quick", action="store_true", help="sizes 1200 (mixed), 1000, 2000 and fewer queries: a test"
    )
    ap.add_argument(
        "--reuse",
        action="store_true",
        help="measure the stores already in --work (import only what a store lacks)",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--queries", type=int, default=None, help="recalls per paced / back-to-back row (default 200)"
    )
    ap.add_argument("--mcp-queries", type=int, default=None, help="MCP calls of each kind (default 60)")
    ap.add_argument("--cli-queries", type=int, default=None, help="`engram recall` processes (default 20)")
    ap.add_argument("--baseline-queries", type=int, default=None, help="queries per baseline (default 100)")
    ap.add_argument("--gap-ms", type=int, default=200, help="pause before each paced call (default 200)")
    ap.add_argument(
        "--budget-s", type=float, default=600, help="at most this long per recall row (default 600)"
    )
    ap.add_argument(
        "--import-timeout-per-k", type=float, default=240, help="import timeout, s per 1000 (default 240)"
    )
    ap.add_argument(
        "--baseline-timeout-per-k",
        type=float,
        default=60,
        help="timeout per baseline, s per 1000 memories (default 60)",
    )
    ap.add_argument("--no-baselines", action="store_true")
    ap.add_argument("--no-compact", action="store_true", help="skip `engram compact` and the disk after it")
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="the file with all sizes (default bench/results/"
        "realpath-sizes.json, and realpath-<size>.json per size; realpath-quick*.json with --quick; "
        "with --out X.json: X-<size>.json per size)",
    )
    ap.add_argument("--baseline", choices=sorted(BASELINES), help=argparse.SUPPRESS)
    ap.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.baseline:
        print(json.dumps(BASELINES[a.baseline](a.data)))
        return
    if a.work is None:
        ap.error("--work DIR is required")
    q = a.quick
    sizes = [int(x) for x in (a.sizes or ("1200,1000,2000" if q else "15000,50000,100000")).split(",") if x]
    mixed = {int(x) for x in (a.mixed or ("1200" if q else "15000")).split(",") if x}
    a.queries = a.queries or (30 if q else 200)
    a.mcp_queries = a.mcp_queries or (15 if q else 60)
    a.cli_queries = a.cli_queries or (5 if q else 20)
    a.baseline_queries = a.baseline_queries or (30 if q else 100)
    results_dir = ROOT / "bench" / "results"
    out = a.out or results_dir / ("realpath-quick.json" if q else "realpath-sizes.json")
    # One file per size as each finishes, beside the one with all sizes.
    per_size = (
        (lambda n: out.with_name(f"{out.stem}-{n}.json"))
        if a.out
        else (lambda n: results_dir / f"{'realpath-quick' if q else 'realpath'}-{n}.json")
    )

    signal.signal(signal.SIGTERM, _signal)
    signal.signal(signal.SIGHUP, _signal)
    atexit.register(cleanup)
    a.work.mkdir(parents=True, exist_ok=True)
    r = Run()
    res: dict[str, Any] = {
        "command": " ".join([Path(PY).name, *sys.argv]),
        "commit": git_head(),
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_at_start": loads()},
        "data": {
            "generator": "bench/realpath_text.py",
            "seed": a.seed,
            "queries": "realpath_text.questions(seed 11)",
            "mixed_sizes": sorted(mixed),
        },
        "settings": {
            "gap_ms": a.gap_ms,
            "queries": a.queries,
            "mcp_queries": a.mcp_queries,
            "cli_queries": a.cli_queries,
            "baseline_queries": a.baseline_queries,
        },
        "sizes": {},
        "timeline": r.timeline,
        "bytecode": compile_engram(),
    }
    log(f"sizes {sizes} (mixed: {sorted(mixed & set(sizes))}), work {a.work}, commit {res['commit']}")
    try:
        for size in sizes:
            label = f"{size:,}"
            if size in mixed:
                s = Setup(a.work / f"mixed-{size}")
                n_project, n_user = round(size * 2 / 3), size - round(size * 2 / 3)
                rows = realpath_text.memories(n_project, n_user, a.seed)
            else:
                s = Setup(a.work / "project")
                n_project, n_user = size, 0
                rows = realpath_text.memories(size, 0, a.seed)  # a prefix of any larger size's rows
            have = s.state()["imported"]
            if have and not a.reuse and not any(x.work == s.work for x in SETUPS[:-1]):
                raise SystemExit(
                    f"{s.work} already holds {have} memories: pass --reuse to measure it, or a new --work"
                )
            if not have and (s.proj / ".claude").exists():
                raise SystemExit(
                    f"{s.work} holds a store but no finished import of this bench: pick a new --work"
                )
            if have > size:
                raise SystemExit(
                    f"{s.work} holds {have} memories, more than {size}: measure sizes in increasing order "
                    "or use a new --work"
                )
            s.make()
            write_data(s.data, rows)  # what bench/realpath_recall.py and a later --reuse read
            todo = rows[have:] if size > have else None
            res["sizes"][str(size)] = measure(
                s,
                size,
                label,
                r,
                a,
                n_project=n_project,
                n_user=n_user,
                rows=rows,
                import_rows=todo,
                data_dir=a.work / f"baseline-{size}",
            )
            res["sizes"][str(size)]["timeline"] = [x for x in r.timeline if x["size"] == label]
            per_size(size).parent.mkdir(parents=True, exist_ok=True)
            per_size(size).write_text(json.dumps(res["sizes"][str(size)], indent=2) + "\n")
            shutil.rmtree(a.work / f"baseline-{size}", ignore_errors=True)
    except BaseException as exc:
        res["error"] = f"{type(exc).__name__}: {exc}"
        log(f"stopped: {res['error']}")
        raise
    finally:
        cleanup()
        res["machine"]["load_at_end"] = loads()
        res["finished_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        res["total_minutes"] = round((time.monotonic() - T0) / 60, 1)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(res, indent=2) + "\n")
        print(json.dumps(res, indent=2))
        log(f"wrote {out} ({res['total_minutes']} min)")


if __name__ == "__main__":
    main()
