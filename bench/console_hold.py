"""Does a long console query hold the daemon's other clients? (issue #13)

    python bench/console_hold.py [--runs 30] [--out bench/results/console_hold.json]

For each engine binding (the daemon's default, the engine driven through the SDK's asynchronous binding by one
thread, and ENGRAM_ENGINE_THREAD=0, the synchronous binding), a real daemon (embedding model off) over its socket:
a UserPromptSubmit recall (`hook_prompt`, prompt recall on) and a `store`, timed alone and then while another
client's console query (`run_query`: a `crypto::argon2` loop) runs to its 5 s deadline. Prints one JSON object and
writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

SLOW = "RETURN array::len(array::filter(array::range(0, 2000), |$v| crypto::argon2::generate('x') != ''))"


def _pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return round(s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))], 1)


def _summary(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50_ms": _pct(values, 50),
        "p95_ms": _pct(values, 95),
        "max_ms": round(max(values), 1) if values else None,
    }


def _timed(c: Any, method: str, **params: Any) -> float:
    t0 = time.perf_counter()
    c.call(method, **params)
    return (time.perf_counter() - t0) * 1000


def measure(binding: str, runs: int) -> dict[str, Any]:
    from support import DaemonProc, new_project

    base = Path(tempfile.mkdtemp(prefix=f"engram-hold-{binding}-"))
    proj = new_project(base, "proj")
    env = {"ENGRAM_PROMPT_RECALL": "true", "ENGRAM_ENGINE_THREAD": "1" if binding == "thread" else "0"}
    d = DaemonProc(base / "home", model=False, env=env).start()
    try:
        c = d.client()
        for i in range(30):
            c.call(
                "store",
                memory={"content": f"note {i}: the deploy step {i} needs flag -O{i % 3}"},
                project=str(proj),
            )
        prompt = {"prompt": "how do we deploy step 3?", "session_id": "hold-session", "cwd": str(proj)}
        c.call("hook_prompt", **prompt)  # the session starts; the first recall warms up
        alone = {
            "hook_prompt": [_timed(c, "hook_prompt", **prompt) for _ in range(runs)],
            "store": [
                _timed(c, "store", memory={"content": f"alone {i} stores a fact"}, project=str(proj))
                for i in range(runs)
            ],
        }
        console: dict[str, Any] = {}

        def slow() -> None:
            cc = d.client()
            t0 = time.perf_counter()
            r = cc.call("run_query", surql=SLOW, scope="project", project=str(proj))
            console.update(
                ms=(time.perf_counter() - t0) * 1000,
                ok=r["ok"],
                error=(r["statements"][0].get("error") if r["statements"] else r.get("message")),
            )
            cc.close()

        during: dict[str, list[float]] = {"hook_prompt": [], "store": []}
        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.3)  # the query is running
        i = 0
        while t.is_alive():
            during["hook_prompt"].append(_timed(c, "hook_prompt", **prompt))
            during["store"].append(
                _timed(c, "store", memory={"content": f"during {i} stores a fact"}, project=str(proj))
            )
            i += 1
        t.join()
        c.close()
    finally:
        d.stop()
    return {
        "binding": binding,
        "console_query": {k: (round(v, 1) if isinstance(v, float) else v) for k, v in console.items()},
        "alone": {k: _summary(v) for k, v in alone.items()},
        "during_console_query": {k: _summary(v) for k, v in during.items()},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "console_hold.json"))
    args = ap.parse_args()
    out: dict[str, Any] = {"load_avg_start": [round(x, 2) for x in os.getloadavg()], "cores": os.cpu_count()}
    out["runs"] = [measure(b, args.runs) for b in ("thread", "sync")]
    out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(out, indent=2)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
