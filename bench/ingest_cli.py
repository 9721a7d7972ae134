"""`engram import` through the real CLI and daemon, before/after in one run (issue #15, ingest).

For each code tree given (a checkout of an older commit, and this one), in turn and `--rounds` times: a fresh
HOME, ENGRAM_HOME and git project under --work, the daemon started first (`engram stats`), then
`engram import FILE --json` timed from inside the project. Prints one JSON object: each run's rate with the load
average before and after (the machine may be shared: compare runs of the same invocation only), and the disk the
data root and the project's store take after `engram stop`, per memory.

    python bench/realpath_text.py --project 1000 --user 0 --seed 7 > /tmp/ingest/d.jsonl
    git -C . archive 066acdc | tar -x -C /tmp/ingest/code_base
    python bench/ingest_cli.py --data /tmp/ingest/d.jsonl --code base=/tmp/ingest/code_base --code now=.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def one(label: str, code: Path, data: Path, work: Path) -> dict[str, object]:
    d = work / label
    shutil.rmtree(d, ignore_errors=True)
    for sub in ("home", "eh", "proj"):
        (d / sub).mkdir(parents=True, mode=0o700)  # owner-only: Engram refuses a data root others can open
    subprocess.run(["git", "init", "-q", str(d / "proj")], check=True)
    env = {
        **os.environ,
        "HOME": str(d / "home"),
        "ENGRAM_HOME": str(d / "eh"),
        "PYTHONPATH": str(code.resolve()),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ENGRAM_MODEL_CACHE": os.environ.get("ENGRAM_MODEL_CACHE", str(Path.home() / ".cache/engram/models")),
    }
    cli = [sys.executable, "-m", "engram_core.cli"]
    t0 = time.perf_counter()
    subprocess.run([*cli, "stats", "--json"], env=env, cwd=d / "proj", capture_output=True, check=False)
    started = time.perf_counter() - t0
    l0, t1 = load(), time.perf_counter()
    p = subprocess.run(
        [*cli, "import", str(data.resolve()), "--json"],
        env=env,
        cwd=d / "proj",
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - t1
    l1 = load()
    subprocess.run([*cli, "stop"], env=env, cwd=d / "proj", capture_output=True, check=False)
    out = json.loads(p.stdout)
    n = out["stored"] + out["merged"]
    # The data root and the project's store, as `engram stop` left them (stores and the snapshots beside them).
    disk = sum(
        f.stat().st_size
        for root in (d / "eh", d / "proj" / ".claude")
        for f in root.rglob("*")
        if f.is_file()
    )
    return {
        "code": label,
        "memories": n,
        "import_s": round(wall, 1),
        "per_s": round(n / wall, 1),
        "daemon_start_s": round(started, 1),
        "load_before": l0,
        "load_after": l1,
        "disk_kb_per_memory": round(disk / 1024 / max(1, n), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="JSONL to import")
    ap.add_argument("--code", action="append", required=True, help="label=path of a source tree (repeat)")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ingest/bench"))
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    trees = [(c.split("=", 1)[0], Path(c.split("=", 1)[1])) for c in args.code]
    runs = [
        one(f"{label}-{r}", code, args.data, args.work) | {"code": label}
        for r in range(args.rounds)
        for label, code in trees
    ]
    print(json.dumps({"data": str(args.data), "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
