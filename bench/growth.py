"""Growth soak: RSS and disk of a real daemon over a long run of recalls (issue #13, "bounded growth").

    python bench/growth.py [--memories 50] [--recalls 100000] [--seconds 1800] [--baseline-recalls 2000]
                           [--model | --no-model] [--out bench/results/growth.json]

Two phases on fresh data roots, each a real `engram serve` driven over its socket:
- ``baseline``: the old behaviour (access counts written at every recall, no automatic compaction), via
  ENGRAM_ACCESS_AFTER_S=0 and ENGRAM_COMPACT_CHECK_S=0;
- ``current``: the defaults (access counts held 30 s, idle/forced compaction).
Each phase stores ``--memories`` memories in one project, then recalls until ``--recalls`` or ``--seconds``,
sampling the daemon's RSS (/proc) and the size of every file under the data root and the project's store.
Prints one JSON object and writes it to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def tree_mb(*roots: Path) -> float:
    total = 0
    for root in roots:
        for f in root.rglob("*"):
            try:
                if f.is_file():
                    total += f.stat().st_size
            except FileNotFoundError:  # a compaction swapped the directory under us
                continue
    return round(total / 1e6, 2)


def phase(
    name: str, env: dict[str, str], args: argparse.Namespace, recalls: int, seconds: float
) -> dict[str, Any]:
    from support import DaemonProc, new_project

    base = Path(tempfile.mkdtemp(prefix=f"engram-growth-{name}-"))
    proj = new_project(base, "proj")
    d = DaemonProc(base / "home", model=args.model, env=env).start()
    try:
        c = d.client()
        pid = c.call("status")["pid"]
        topics = ["build", "deploy", "test", "cache", "auth", "billing", "search"]
        for i in range(args.memories):
            c.call(
                "store",
                memory={
                    "content": f"memory {i}: the {topics[i % 7]} step {i} needs flag -O{i % 3} "
                    f"and runs on host-{i % 5}"
                },
                project=str(proj),
            )
        c.call("recall", query="warm up", project=str(proj))
        samples: list[dict[str, Any]] = []
        every = max(1, recalls // 40)
        t0 = time.monotonic()
        n = 0
        while n < recalls and time.monotonic() - t0 < seconds:
            c.call("recall", query=f"{topics[n % 7]} step {n % 50}", project=str(proj), limit=10)
            n += 1
            if n == 1 or n % every == 0:
                samples.append(
                    {
                        "recalls": n,
                        "s": round(time.monotonic() - t0, 1),
                        "rss_mb": rss_mb(pid),
                        "store_mb": tree_mb(proj / ".claude" / "engram"),
                        "home_mb": tree_mb(d.home),
                    }
                )
        elapsed = time.monotonic() - t0
        samples.append(
            {
                "recalls": n,
                "s": round(elapsed, 1),
                "rss_mb": rss_mb(pid),
                "store_mb": tree_mb(proj / ".claude" / "engram"),
                "home_mb": tree_mb(d.home),
            }
        )
        status = c.call("status")
        c.close()
    finally:
        d.stop()
    first = next((s for s in samples if s["recalls"] >= max(1, n // 10)), samples[0])  # after warm-up
    steady = [s for s in samples if s["recalls"] >= first["recalls"]]

    def spread(key: str) -> dict[str, float]:
        lo, hi = min(s[key] for s in steady), max(s[key] for s in steady)
        return {"min": lo, "max": hi, "spread_pct": round(100 * (hi - lo) / lo, 1) if lo else 0.0}

    last = samples[-1]
    per_k = 1000 / max(1, last["recalls"] - first["recalls"])
    return {
        "phase": name,
        "env": env,
        "recalls": n,
        "seconds": round(elapsed, 1),
        "recalls_per_s": round(n / elapsed, 1) if elapsed else None,
        "rss_mb": {
            "after_warmup": first["rss_mb"],
            "end": last["rss_mb"],
            "max": max(s["rss_mb"] for s in samples),
            "growth_per_1000_recalls": round((last["rss_mb"] - first["rss_mb"]) * per_k, 2),
        },
        "store_mb": {
            "after_warmup": first["store_mb"],
            "end": last["store_mb"],
            "max": max(s["store_mb"] for s in samples),
            "growth_per_1000_recalls": round((last["store_mb"] - first["store_mb"]) * per_k, 2),
        },
        "after_warmup_range": {
            "from_recalls": first["recalls"],
            "rss_mb": spread("rss_mb"),
            "store_mb": spread("store_mb"),
        },
        "compactions": status.get("compactions"),
        "samples": samples,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=50)
    ap.add_argument("--recalls", type=int, default=100_000)
    ap.add_argument("--seconds", type=float, default=1800.0, help="stop the current phase after this long")
    ap.add_argument("--baseline-recalls", type=int, default=2000)
    ap.add_argument(
        "--model",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="load the embedding model (default off: recall runs on BM25 only, to get more recalls in)",
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "growth.json"))
    args = ap.parse_args()
    load = os.getloadavg()
    out: dict[str, Any] = {
        "load_avg_start": [round(x, 2) for x in load],
        "cores": os.cpu_count(),
        "model": args.model,
        "memories": args.memories,
    }
    out["baseline"] = phase(
        "baseline",
        {"ENGRAM_ACCESS_AFTER_S": "0", "ENGRAM_LOG_AFTER_S": "0", "ENGRAM_COMPACT_CHECK_S": "0"},
        args,
        args.baseline_recalls,
        args.seconds,
    )
    out["current"] = phase("current", {}, args, args.recalls, args.seconds)
    out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(out, indent=2)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text + "\n")
    summary = {k: v for k, v in out.items() if k not in ("baseline", "current")}
    for k in ("baseline", "current"):
        summary[k] = {kk: vv for kk, vv in out[k].items() if kk != "samples"}
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
