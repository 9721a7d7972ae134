"""TUI benchmarks; prints JSON and writes bench/results/tui.json.

- cold start to first paint: a fresh `python` process that imports the TUI, connects to an already running
  daemon and paints the first page of the memory table (target <= 1.0 s);
- table first render with 10,000 memories: request -> rows in the table, through the daemon (target <= 0.3 s);
- keystroke-to-update for filtering: a key in the filter box -> the table showing the filtered page;
- keystroke p95: `j` in the table, pressed and handled (Pilot waits until the app has processed it);
- `G` to the last row: from the first page, `G` -> the last page loaded and the cursor on the last memory;
- hybrid search: `s`, the query, enter -> the ranked hits in the table.

`--dir DIR` measures a store already there (DIR/home, project DIR/proj), e.g. one filled with `engram import`.

The 10k store is built in a temp ENGRAM_HOME through the service API with embeddings off (the table does not
read embeddings; writing 10k real embeddings would only make the set-up slower). Usage:
    python bench/tui.py [--memories 10000] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
LOAD_START: list[float] = []
sys.path.insert(0, str(REPO))

CHILD = r"""
import sys, time
t_import = time.perf_counter()
from engram_core.wire import client
from engram_tui.app import EngramApp
from engram_tui.screens.memories import MemoriesScreen
svc = client.connect(sys.argv[1], start=False)
class Timed(EngramApp):
    def on_mount(self):
        super().on_mount()
        self.set_interval(0.005, self.check)
    def check(self):
        s = self.screen
        if isinstance(s, MemoriesScreen) and s.pages_loaded:
            self.call_after_refresh(lambda: self.exit(time.time()))
app = Timed(svc, project=sys.argv[2], offer_demo=False)
done = app.run(headless=True, size=(160, 50))
print(done)
"""


def build_store(home: Path, project: Path, n: int) -> float:
    from engram_core.models import MemoryIn, MemoryType, Scope
    from engram_core.service import EngramService

    t0 = time.perf_counter()
    svc = EngramService(home)
    types = [MemoryType.semantic, MemoryType.procedural, MemoryType.episodic]
    batch: list[MemoryIn] = []
    for i in range(n):
        batch.append(
            MemoryIn(
                content=f"memory {i}: component c{i % 37} uses redis key k{i} for queue q{i % 11}"
                if i % 50 == 0
                else f"memory {i}: module m{i % 53} note {i * 7919 % 10007}",
                memory_type=types[i % 3],
                scope=Scope.project,
                importance=(i % 100) / 100,
                tags=[f"t{i % 7}"],
            )
        )
        if len(batch) == 256:
            svc.store_many(batch, project=str(project))
            batch = []
    if batch:
        svc.store_many(batch, project=str(project))
    svc.close()
    return time.perf_counter() - t0


async def settle(pilot: Any) -> None:
    """Until no call is in flight (the detail of the row under the cursor loads after a move)."""
    while pilot.app.inflight:
        await asyncio.sleep(0.005)
    await pilot.pause()


async def measure_in_app(home: Path, project: Path, runs: int) -> dict[str, Any]:
    from engram_core.wire import client
    from engram_tui.app import EngramApp
    from engram_tui.screens.memories import MemoriesScreen

    svc = client.connect(home, start=False)
    app = EngramApp(svc, project=str(project), offer_demo=False)
    first: list[float] = []
    fills: list[float] = []
    calls: list[float] = []
    keys: list[float] = []
    moves: list[float] = []
    pilot_moves: list[float] = []
    jumps: list[float] = []
    searches: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen
        assert isinstance(screen, MemoriesScreen)

        async def wait_pages(n: int) -> None:
            while screen.pages_loaded < n:
                await asyncio.sleep(0.001)
            await pilot.pause()

        await wait_pages(1)
        total = screen.total
        for _ in range(runs):
            n = screen.pages_loaded
            screen.action_reverse_sort()  # a fresh page request on the full 10k set
            await wait_pages(n + 1)
            first.append(screen.last_page_ms or 0.0)
            fills.append(screen.last_fill_ms or 0.0)
        await pilot.press("slash")
        for ch in "redis":
            n = screen.pages_loaded
            t0 = time.perf_counter()
            await pilot.press(ch)
            await wait_pages(n + 1)
            keys.append((time.perf_counter() - t0) * 1000)
        filtered = screen.total
        await pilot.press("escape")  # clears the filter: the whole store again
        await wait_pages(n + 2)
        table = screen.query_one("#memory-table")
        table.focus()
        from textual import events

        for _ in range(runs * 10):
            # Key posted as a terminal delivers it -> the cursor moved (the row, the status, the detail updated);
            # not Pilot's press(), which also waits for every widget to go idle (~60 ms for a key bound to nothing).
            row = table.cursor_row
            t0 = time.perf_counter()
            app.post_message(events.Key("j", "j"))
            while table.cursor_row == row:
                await asyncio.sleep(0)
            await asyncio.sleep(0)
            moves.append((time.perf_counter() - t0) * 1000)
        for _ in range(runs * 2):
            t0 = time.perf_counter()
            await pilot.press("j")
            pilot_moves.append((time.perf_counter() - t0) * 1000)
        for _ in range(runs):
            n = screen.pages_loaded
            turned = screen.tq.offset != 0
            await pilot.press("g")
            if turned:  # the first page comes back before G is timed (the daemon answers one at a time)
                await wait_pages(n + 1)
            await settle(pilot)
            n = screen.pages_loaded
            t0 = time.perf_counter()
            await pilot.press("G")
            await wait_pages(n + 1)
            while table.cursor_row != table.row_count - 1:
                await asyncio.sleep(0.001)
            jumps.append((time.perf_counter() - t0) * 1000)
            last_row = screen.tq.offset + table.cursor_row + 1
        for query in ("redis idempotency keys", "how do I run the migrations", "webhook retries")[:runs]:
            await pilot.press("s")
            screen.query_one("#search").value = query  # typed: what is timed is enter -> ranked hits shown
            await pilot.pause()
            n = screen.searches_done
            t0 = time.perf_counter()
            await pilot.press("enter")
            while screen.searches_done == n:
                await asyncio.sleep(0.001)
            searches.append((time.perf_counter() - t0) * 1000)
            await pilot.press("escape")
    for _ in range(runs):
        t0 = time.perf_counter()
        svc.list_memories(scope="project", project=str(project), limit=200)
        calls.append((time.perf_counter() - t0) * 1000)
    svc.close()
    return {
        "total_rows": total,
        "first_render_ms": first,
        "fill_ms": fills,
        "call_ms": calls,
        "keystroke_ms": keys,
        "filtered_rows": filtered,
        "move_ms": moves,
        "pilot_move_ms": pilot_moves,
        "jump_ms": jumps,
        "last_row": last_row,
        "search_ms": searches,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--memories", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument(
        "--dir", type=Path, help="reuse (or create) the 10k store here instead of a fresh temp dir"
    )
    ap.add_argument("--out", type=Path, help="results file (default bench/results/tui.json)")
    args = ap.parse_args()
    global LOAD_START
    LOAD_START = list(os.getloadavg())
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    tmp = args.dir or Path(tempfile.mkdtemp(prefix="engram-tui-bench-"))
    home, project = tmp / "home", tmp / "proj"
    reuse = (home / "user.db").exists()
    (project / ".git").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ENGRAM_HOME": str(home), "ENGRAM_EMBEDDING_PROVIDER": "none"}
    os.environ.update(env)
    build_s = 0.0 if reuse else build_store(home, project, args.memories)

    from engram_core.wire import client

    svc = client.connect(home, start=True, timeout=120)  # the daemon is up before anything is timed
    try:
        cold: list[float] = []
        for _ in range(args.runs):
            t0 = time.time()
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(home), str(project)],
                env=env,
                cwd=str(REPO),
                capture_output=True,
                text=True,
                timeout=60,
            )
            try:
                painted = float(out.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                print(out.stderr[-2000:], file=sys.stderr)
                raise
            cold.append((painted - t0) * 1000)
        inapp = asyncio.run(measure_in_app(home, project, args.runs))
    finally:
        svc.shutdown()
        svc.close()

    def summary(xs: list[float]) -> dict[str, Any]:
        ordered = sorted(xs)
        return {
            "median_ms": round(statistics.median(xs), 1),
            "p95_ms": round(ordered[int(0.95 * (len(xs) - 1))], 1),
            "max_ms": round(max(xs), 1),
            "runs": [round(x, 1) for x in xs],
        }

    result = {
        "benchmark": "tui",
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
        },
        "memories": inapp["total_rows"],
        "store_build_s": round(build_s, 1),
        "cold_start_to_first_paint": {
            **summary(cold),
            "target_ms": 1000,
            "what": "new process: import TUI, connect to the running daemon, first page of the table painted",
        },
        "table_first_render": {
            **summary(inapp["first_render_ms"]),
            "target_ms": 300,
            "rows_in_store": inapp["total_rows"],
            "of_which_table_fill": summary(inapp["fill_ms"]),
            "list_memories_call_alone": summary(inapp["call_ms"]),
            "what": "page request over the daemon -> 200 rows in the table (paged)",
        },
        "keystroke_j": {
            **summary(inapp["move_ms"]),
            "target_p95_ms": 50,
            "what": "j in the memory table: key posted -> cursor moved, status and detail updated",
        },
        "keystroke_j_pilot": {
            **summary(inapp["pilot_move_ms"]),
            "what": "the same through Pilot.press (waits for every widget to go idle: an upper bound)",
        },
        "G_to_last_row": {
            **summary(inapp["jump_ms"]),
            "target_ms": 1000,
            "last_row": inapp["last_row"],
            "what": "G from the first page -> the last page loaded, cursor on the last memory",
        },
        "hybrid_search": {
            **summary(inapp["search_ms"]),
            "what": "enter in the search box -> ranked hits in the table (recall over the daemon)",
        },
        "load_avg_start_end": [LOAD_START, list(os.getloadavg())],
        "filter_keystroke_to_update": {
            **summary(inapp["keystroke_ms"]),
            "filtered_rows_after_redis": inapp["filtered_rows"],
            "what": "key pressed in the filter -> filtered page in the table (includes the 0.12 s debounce)",
        },
    }
    out_path = args.out or REPO / "bench" / "results" / "tui.json"
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
