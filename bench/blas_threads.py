"""Why engram_core sets OPENBLAS_NUM_THREADS=1: the cosine scan recall runs (10,000 × 384 float32 rows times
one query vector), timed in a fresh process with one OpenBLAS thread and with OpenBLAS's default (one per
core). On a shared machine the default's spinning threads cost far more than they give.

    python bench/blas_threads.py [--rows 10000]

Prints JSON (p50/p95 ms per scan, the load average) and writes bench/results/blas_threads.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCAN = """
import json, sys, time
import numpy as np
rng = np.random.default_rng(7)
m = rng.standard_normal(({rows}, 384)).astype(np.float32)
v = rng.standard_normal(384).astype(np.float32)
ts = []
for _ in range(200):
    t = time.perf_counter()
    s = m @ v
    ts.append((time.perf_counter() - t) * 1000)
    time.sleep(0.005)
ts.sort()
print(json.dumps({{"p50_ms": round(ts[100], 3), "p95_ms": round(ts[190], 3)}}))
"""


def run(rows: int, threads: str | None) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    if threads:
        env["OPENBLAS_NUM_THREADS"] = threads
    out = subprocess.run(
        [sys.executable, "-c", SCAN.format(rows=rows)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=10_000)
    args = ap.parse_args()
    res = {
        "rows": args.rows,
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "one_thread": run(args.rows, "1"),
        "openblas_default": run(args.rows, None),
        "load_after": os.getloadavg()[0],
    }
    print(json.dumps(res, indent=2))
    out = ROOT / "bench" / "results" / "blas_threads.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")


if __name__ == "__main__":
    main()
