"""Faults: kill -9 of the daemon mid-stream, and a short version of the 8-process soak (bench/soak.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from support import HOOK_SCRIPT, REPO_ROOT, DaemonProc, new_project

sys.path.insert(0, str(REPO_ROOT / "bench"))


def test_kill9_mid_stream_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    from engram_core.wire.client import DaemonUnavailable, RemoteService

    d = DaemonProc(tmp_path / "home", model=False).start()
    proj = str(new_project(tmp_path, "faulty"))
    acked: list[tuple[str, str]] = []
    hook_runs: list[str] = []
    # Failures are collected and asserted in the main thread: an assert (or any error) in a worker thread only
    # prints a warning, and the test would pass.
    hook_failures: list[str] = []
    thread_errors: list[str] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        remote = RemoteService(d.home, start=False)
        i = 0
        while not stop.is_set():
            i += 1
            content = f"writer {n} fact {i}"
            try:
                r = remote.call("store", memory={"content": content}, project=proj)
                acked.append((r["memory"]["id"], content))
            except DaemonUnavailable:
                time.sleep(0.05)
        remote.close()

    def hooker() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            ev = {
                "session_id": "sess-fault",
                "cwd": proj,
                "hook_event_name": "PostToolUse",
                "tool_name": "Edit",
                "tool_input": {"file_path": f"{proj}/f{i}.py", "old_string": "a", "new_string": "b"},
                "tool_response": {},
            }
            p = subprocess.run(
                ["python3", "-S", str(HOOK_SCRIPT), "PostToolUse"],
                input=json.dumps(ev).encode(),
                env=d.env,
                capture_output=True,
                timeout=30,
            )
            if p.returncode != 0:
                hook_failures.append(
                    f"hook {i} exited {p.returncode}: {p.stderr.decode(errors='replace')[-500:]}"
                )
                continue
            hook_runs.append(f"Modified f{i}.py:")

    def collecting(fn, *args: object):  # noqa: ANN001, ANN202
        def run() -> None:
            try:
                fn(*args)
            except BaseException as exc:  # noqa: BLE001 - reported by the main thread
                thread_errors.append(f"{fn.__name__}{args}: {exc!r}")

        return run

    threads = [threading.Thread(target=collecting(writer, n)) for n in range(3)] + [
        threading.Thread(target=collecting(hooker))
    ]
    for t in threads:
        t.daemon = True
        t.start()
    try:
        time.sleep(2.0)
        d.kill9()
        killed_at = len(acked)
        time.sleep(
            1.0
        )  # hooks now spool (and one of them restarts the daemon), writers get DaemonUnavailable
        d.start()
        time.sleep(2.0)
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    try:
        assert not [t.name for t in threads if t.is_alive()], "a worker did not stop"
        assert not thread_errors, thread_errors
        assert not hook_failures, hook_failures  # the hook never fails the agent, daemon killed or not
        assert hook_runs
        c = d.client()
        c.call("flush", timeout_s=60)
        assert killed_at > 0 and len(acked) > killed_at
        for mid, content in acked:
            assert c.call("get", memory_id=mid, project=proj)["content"] == content
        items = c.call("list_memories", scope="session", session="sess-fault", project=proj, limit=5000)[
            "items"
        ]
        contents = [m["content"].split(" ", 2)[1].rstrip(":") for m in items]
        expected = [h.split(" ", 1)[1].rstrip(":") for h in hook_runs]
        assert sorted(contents) == sorted(e for e in expected)  # every hook event once, spooled or not
        status = c.call("status")
        assert status["events_failed"] == 0
        assert not list((d.home / "spool").glob("*.jsonl"))
        c.close()
    finally:
        d.stop()


def test_short_soak_eight_processes_with_kill(tmp_path: Path) -> None:
    import soak  # bench/soak.py

    result = soak.run(procs=8, seconds=8, kill_at=4, model=False, home=tmp_path / "home")
    assert result["missing_writes"] == 0, result["missing_detail"]
    assert result["hook_duplicates"] == 0
    assert result["errors"] == 0, result["error_detail"]
    assert result["acknowledged_writes"] > 0 and result["spool_left"] == 0
