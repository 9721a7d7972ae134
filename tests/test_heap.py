"""The daemon's C heap: two malloc arenas at most (heap.py), and `status` says how many it has and its RSS."""

from __future__ import annotations

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support import REPO_ROOT, DaemonProc, new_project

from engram_core import heap

GLIBC = heap.arenas() is not None
glibc_only = pytest.mark.skipif(not GLIBC, reason="malloc arenas are glibc's: elsewhere heap.py does nothing")

# Eight threads allocating at once, then the arena count: each thread that allocates while the others do gets an
# arena of its own unless the cap holds.
PROBE = """
import sys, threading
from engram_core import heap
if sys.argv[1] == "capped":
    assert heap.limit_arenas()
start = threading.Barrier(8)
held = []
def work():
    start.wait()
    held.extend(bytearray(200_000) for _ in range(100))
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(heap.arenas())
"""


def _arenas(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return int(out.stdout.strip())


@glibc_only
def test_limit_arenas_caps_a_threaded_process_at_two() -> None:
    assert _arenas("default") > 2  # the probe can tell: without the cap, threads get arenas of their own
    assert _arenas("capped") == 2


@glibc_only
def test_the_daemon_runs_on_two_arenas_and_reports_them(daemon: DaemonProc, tmp_path: Path) -> None:
    proj = str(new_project(tmp_path, "heap"))

    def one(i: int) -> None:
        c = daemon.client()
        try:
            c.call(
                "store",
                memory={"content": f"heap arena check number {i} about the widget cache"},
                project=proj,
            )
            c.call("recall", query=f"widget cache {i}", project=proj)
        finally:
            c.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(16)))
    c = daemon.client()
    status = c.call("status")
    c.close()
    assert status["heap_arenas"] == 2
    assert status["rss_mb"] > 50  # the model and the stores are loaded


def test_a_sweep_hands_the_rows_it_read_back(
    service, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # noqa: ANN001
    import engram_core.memory.maintenance as maintenance

    service.store(
        memory={"content": "the sweep reads every row of the open stores"}, project=str(project_dir)
    )
    calls: list[int] = []
    monkeypatch.setattr(maintenance, "release_freed_memory", lambda: calls.append(1))
    service.maintain(project=str(project_dir))
    assert calls == [1]
