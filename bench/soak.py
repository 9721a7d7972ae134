"""Soak: N processes (MCP-style clients, hook runs, CLI runs) writing and recalling against one daemon.

    python bench/soak.py [--procs 8] [--seconds 60] [--kill-at 30] [--model | --no-model] [--out bench/results/soak.json]

Every acknowledged write is checked afterwards (by id for client and CLI writes, by its unique content for hook
events, which may have been spooled). With ``--kill-at S`` the daemon is killed with SIGKILL after S seconds and
started again; clients retry, hooks spool, and the spool must be drained exactly once.
Prints one JSON object and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HOOK = REPO / "hooks" / "engram_hook.py"
KINDS = ("client", "client", "client", "client", "hook", "hook", "cli", "cli")


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))], 2)


# ── workers ──────────────────────────────────────────────────────────────────
def worker(kind: str, wid: int, out: Path, deadline: float, project: str) -> None:
    from engram_core.wire.client import DaemonUnavailable, RemoteService

    log = open(out, "a", buffering=1)  # noqa: SIM115 - one line per acknowledged operation, flushed
    n = 0
    remote = RemoteService(start=False) if kind == "client" else None
    python3 = os.environ.get("SOAK_HOOK_PYTHON", "python3")
    while time.time() < deadline:
        n += 1
        content = f"soak {kind} {wid} op {n}: the build step {n % 7} needs flag -O{n % 3}"
        t0 = time.perf_counter()
        try:
            if kind == "client":
                assert remote is not None
                if n % 3 == 0:
                    remote.call("recall", query=f"build step {n % 7}", project=project, limit=5)
                    log.write(json.dumps({"op": "recall", "ms": (time.perf_counter() - t0) * 1000}) + "\n")
                    continue
                r = remote.call("store", memory={"content": content, "tags": ["soak"]}, project=project)
                log.write(
                    json.dumps(
                        {
                            "op": "store",
                            "id": r["memory"]["id"],
                            "content": content,
                            "ms": (time.perf_counter() - t0) * 1000,
                        }
                    )
                    + "\n"
                )
            elif kind == "cli":
                p = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "engram_core.cli",
                        "store",
                        content,
                        "--json",
                        "--project",
                        project,
                    ],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
                if p.returncode != 0:
                    log.write(
                        json.dumps({"op": "error", "kind": kind, "error": p.stderr.strip()[-300:]}) + "\n"
                    )
                    time.sleep(0.2)
                    continue
                r = json.loads(p.stdout)
                log.write(
                    json.dumps(
                        {
                            "op": "store",
                            "id": r["memory"]["id"],
                            "content": content,
                            "ms": (time.perf_counter() - t0) * 1000,
                        }
                    )
                    + "\n"
                )
            else:
                fname = f"src/soak_{wid}_{n}.py"
                event = {
                    "session_id": f"soak-session-{wid}",
                    "transcript_path": "/tmp/t.jsonl",
                    "cwd": project,
                    "hook_event_name": "PostToolUse",
                    "tool_name": "Edit",
                    "tool_use_id": f"tu_{wid}_{n}",
                    "tool_input": {
                        "file_path": f"{project}/{fname}",
                        "old_string": "a = 1",
                        "new_string": f"a = {n}",
                    },
                    "tool_response": {"filePath": f"{project}/{fname}"},
                }
                p = subprocess.run(
                    [python3, str(HOOK), "PostToolUse"],
                    input=json.dumps(event),
                    text=True,
                    capture_output=True,
                    timeout=30,
                )
                ms = (time.perf_counter() - t0) * 1000
                if p.returncode != 0:
                    log.write(
                        json.dumps({"op": "error", "kind": kind, "error": f"hook exit {p.returncode}"}) + "\n"
                    )
                    continue
                log.write(
                    json.dumps(
                        {
                            "op": "hook",
                            "session": f"soak-session-{wid}",
                            "content_prefix": f"Modified {fname}:",
                            "ms": ms,
                        }
                    )
                    + "\n"
                )
        except DaemonUnavailable:
            # Not acknowledged: nothing to check. The daemon is down (killed); wait for it to come back.
            if remote is not None:
                remote.close()
            log.write(json.dumps({"op": "unavailable", "ms": (time.perf_counter() - t0) * 1000}) + "\n")
            time.sleep(0.1)
        except Exception as exc:
            log.write(
                json.dumps({"op": "error", "kind": kind, "error": f"{exc.__class__.__name__}: {exc}"[:300]})
                + "\n"
            )
            time.sleep(0.05)
    log.close()


# ── orchestration ────────────────────────────────────────────────────────────
def _start_daemon(home: Path, env: dict[str, str]) -> None:
    from engram_core.wire.client import connect

    # The client passes its own environment to the daemon it starts; restore ours afterwards, since the
    # tests import this module and a leaked ENGRAM_* variable would change every later test in the session.
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        connect(home, start=True, timeout=120).close()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run(
    procs: int = 8,
    seconds: float = 60.0,
    kill_at: float | None = None,
    model: bool = True,
    home: Path | None = None,
) -> dict[str, Any]:
    from engram_core.wire.client import RemoteService, daemon_pid

    tmp = Path(tempfile.mkdtemp(prefix="engram-soak-"))
    home = home or tmp / "home"
    project = tmp / "proj"
    (project / ".git").mkdir(parents=True)
    env = {"ENGRAM_HOME": str(home), "ENGRAM_DAEMON_IDLE_TIMEOUT_S": "0"}
    if not model:
        env["ENGRAM_EMBEDDING_PROVIDER"] = "none"
    _start_daemon(home, env)
    warm = RemoteService(home, start=False).connect()
    warm.call(
        "store", memory={"content": "soak warm-up", "scope": "user"}
    )  # loads the model before the clock
    warm.close()
    start = time.time()
    deadline = start + seconds
    outs = []
    children = []
    for i in range(procs):
        kind = KINDS[i % len(KINDS)]
        out = tmp / f"worker-{i}.jsonl"
        outs.append(out)
        children.append(
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    kind,
                    "--id",
                    str(i),
                    "--out",
                    str(out),
                    "--deadline",
                    str(deadline),
                    "--project",
                    str(project),
                ],
                env={**os.environ, **env},
                cwd=str(REPO),
            )
        )
    killed = None
    if kill_at is not None:
        time.sleep(max(0.0, kill_at))
        pid = daemon_pid(home)
        if pid:
            os.kill(pid, signal.SIGKILL)
            killed = {"pid": pid, "at_s": round(time.time() - start, 2)}
            time.sleep(0.5)
            t0 = time.perf_counter()
            _start_daemon(home, env)
            killed["restart_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    for c in children:
        c.wait()
    elapsed = time.time() - start
    remote = RemoteService(home, start=True).connect()
    flush = remote.call("flush", timeout_s=120)
    records = [
        json.loads(line)
        for out in outs
        if out.exists()
        for line in out.read_text().splitlines()
        if line.strip()
    ]
    stores = [r for r in records if r["op"] == "store"]
    hooks = [r for r in records if r["op"] == "hook"]
    errors = [r for r in records if r["op"] == "error"]
    missing = []
    for r in stores:
        try:
            m = remote.call("get", memory_id=r["id"], project=str(project))
            if m["content"] != r["content"]:
                missing.append({"id": r["id"], "why": "content differs"})
        except Exception as exc:
            missing.append({"id": r["id"], "why": str(exc)[:200]})
    hook_missing = 0
    hook_dupes = 0
    sessions = sorted({h["session"] for h in hooks})
    contents: dict[str, int] = {}
    for sid in sessions:
        page = remote.call("list_memories", scope="session", session=sid, project=str(project), limit=5000)
        for m in page["items"]:
            key = m["content"].split(":", 1)[0] + ":"
            contents[key] = contents.get(key, 0) + 1
    for h in hooks:
        n = contents.get(h["content_prefix"], 0)
        if n == 0:
            hook_missing += 1
        elif n > 1:
            hook_dupes += 1
    status = remote.call("status")
    spool_left = len(list((home / "spool").glob("*.jsonl")))
    remote.call("shutdown")
    remote.close()
    lat = {k: [r["ms"] for r in records if r["op"] == k] for k in ("store", "recall", "hook")}
    ops = len(stores) + len(hooks) + len(lat["recall"])
    return {
        "procs": procs,
        "seconds": round(elapsed, 1),
        "model": model,
        "kill": killed,
        "operations": ops,
        "throughput_ops_s": round(ops / elapsed, 1),
        "acknowledged_writes": len(stores) + len(hooks),
        "client_and_cli_writes": len(stores),
        "hook_events": len(hooks),
        "recalls": len(lat["recall"]),
        "missing_writes": len(missing) + hook_missing,
        "missing_detail": missing[:5],
        "hook_duplicates": hook_dupes,
        "errors": len(errors),
        "error_detail": errors[:5],
        "unavailable_retries": sum(1 for r in records if r["op"] == "unavailable"),
        "latency_ms": {k: {"p50": _pct(v, 50), "p95": _pct(v, 95), "n": len(v)} for k, v in lat.items()},
        "spool_ingested": status["spool_ingested"],
        "spool_left": spool_left,
        "flush": flush,
        "events_applied": status["events_applied"],
        "events_failed": status["events_failed"],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--kill-at", type=float, default=None)
    ap.add_argument("--no-model", action="store_true", help="embedding_provider none (BM25 only)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "soak.json"))
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--id", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--project", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.id, Path(args.out), args.deadline, args.project)
        return 0
    result = run(args.procs, args.seconds, args.kill_at, model=not args.no_model)
    text = json.dumps(result, indent=2)
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    existing: dict[str, Any] = {}
    if out.exists():
        try:
            existing = json.loads(out.read_text())
        except ValueError:
            existing = {}
    key = "with_kill" if args.kill_at is not None else "steady"
    existing[key] = result
    out.write_text(json.dumps(existing, indent=2) + "\n")
    return 0 if result["missing_writes"] == 0 and result["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
