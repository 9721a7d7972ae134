"""The recall half of bench/realpath.py on a store imported earlier, for comparing two commits on copies of one
store: daemon start (the first after an upgrade, then a normal one), recall through the daemon socket paced and
back to back (p50/p95), `engram recall` as a process, daemon RSS. No import, no baselines.

    python bench/realpath_recall.py --work /tmp/rp --label after [--queries 60]

--work is a bench/realpath.py work directory (home/, engram-home/ or --engram-home, proj/). A project's database
is named after its path, so compare commits on copies placed at the same path (cp -a the store aside and back,
or bind-mount each copy over the path: `unshare -m sh -c 'mount --bind COPY WORK && python ...'`). Run each
commit on a fresh copy: the run writes bookkeeping and snapshots. Prints one JSON object (with the load average
at each step) and appends it to bench/results/realpath_recall.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import realpath as rp  # noqa: E402
import realpath_text  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--engram-home", type=Path, help="default: WORK/engram-home")
    ap.add_argument("--label", default="run")
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--gap-ms", type=int, default=200)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "realpath_recall.jsonl")
    args = ap.parse_args()
    s = rp.Setup(args.work)
    if args.engram_home:
        s.eh = args.engram_home
    n = args.queries
    qs = realpath_text.questions(2 * n + 20, 11)
    res: dict[str, object] = {"label": args.label, "load_at_start": os.getloadavg()}
    s.stop()
    try:
        res["start_after_upgrade"] = rp.cold_start(s, qs[1])  # writes what this commit's snapshots hold
        s.stop()
        res["start"] = rp.cold_start(s, qs[0])
        pid = res["start"]["pid"]  # type: ignore[index]
        res["rss_mb_after_start"] = rp.rss_mb(pid)
        res["recall_paced"] = rp.recall_daemon(s, qs[2 : 2 + n], args.gap_ms / 1000)
        res["recall_back_to_back"] = rp.recall_daemon(s, qs[2 + n : 2 + 2 * n], 0)
        res["recall_cli_process"] = rp.recall_cli(s, qs[-10:])
        res["rss_mb_after_recalls"] = rp.rss_mb(pid)
    finally:
        s.stop()  # and reaped, on an error too
    res["load_at_end"] = os.getloadavg()
    print(json.dumps(res))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as fh:
        fh.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
