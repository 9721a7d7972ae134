"""`engram sync` between two data roots through a bare git repository, through the real CLI and daemons (issue #32).

Machine A: a data root and a clone of a repository; `engram import` of --n realistic memories
(bench/realpath_text.py) into its project, then `engram sync init REMOTE` (the first push). Machine B: another data
root and another clone at another path; `engram sync init REMOTE` (the first pull of everything). Then --changes new
memories on A: `engram sync` on A (incremental push) and on B (incremental pull), and once more on each (nothing to
do). Prints one JSON object with each step's wall time, what it moved, the remote's size, and the load average
before and after (the machine may be shared).

    python bench/sync.py --n 10000 --changes 100 --work /tmp/engram-bench-sync
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realpath_text import memories  # noqa: E402


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def git(*args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=b", "-c", "user.email=b@b", *args], check=True, capture_output=True
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000, help="memories in the first sync")
    ap.add_argument("--changes", type=int, default=100, help="new memories in the incremental sync")
    ap.add_argument("--user-share", type=float, default=0.1, help="part of --n in the user scope")
    ap.add_argument("--work", default="/tmp/engram-bench-sync")
    args = ap.parse_args()

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, mode=0o700)
    seed = work / "seed"
    git("init", "-q", str(seed))
    (seed / "README").write_text("bench\n")
    git("-C", str(seed), "add", ".")
    git("-C", str(seed), "commit", "-q", "-m", "first")
    origin, remote = work / "origin.git", work / "sync.git"
    git("clone", "-q", "--bare", str(seed), str(origin))
    git("init", "-q", "--bare", str(remote))
    clones = {"a": work / "a" / "src" / "proj", "b": work / "b" / "elsewhere" / "proj-b"}
    envs = {}
    for m, clone in clones.items():
        git("clone", "-q", str(origin), str(clone))
        (work / m / "home").mkdir(parents=True, mode=0o700)
        envs[m] = {
            **os.environ,
            "HOME": str(work / m / "home"),
            "ENGRAM_HOME": str(work / m / "engram"),
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }

    def engram(m: str, *a: str) -> dict:
        p = subprocess.run(
            [sys.executable, "-m", "engram_core.cli", *a, "--json"],
            env=envs[m],
            cwd=clones[m],
            capture_output=True,
            text=True,
            check=False,
        )
        if p.returncode != 0:
            raise SystemExit(f"engram {' '.join(a)} on {m}: {p.stderr}")
        return json.loads(p.stdout)

    def timed(m: str, *a: str) -> dict:
        l0, t0 = load(), time.perf_counter()
        r = engram(m, *a)
        r = {
            k: r[k]
            for k in ("pushed", "pulled", "unchanged", "change_files", "conflicts", "offline")
            if k in r
        }
        return {**r, "wall_s": round(time.perf_counter() - t0, 2), "load_before": l0, "load_after": load()}

    n_user = int(args.n * args.user_share)
    rows = memories(args.n - n_user, n_user, seed=7)
    more = memories(args.changes, 0, seed=99)
    data, extra = work / "first.jsonl", work / "changes.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    extra.write_text("".join(json.dumps(r) + "\n" for r in more))
    for m in clones:
        engram(m, "stats")  # the daemon up and its model loaded before anything is timed
    t0 = time.perf_counter()
    imported = engram("a", "import", str(data))
    import_s = round(time.perf_counter() - t0, 1)

    out: dict[str, object] = {
        "memories": args.n,
        "stored_on_a": imported.get("stored"),
        "import_s": import_s,
        "first_push_a": timed("a", "sync", "init", str(remote)),
        "first_pull_b": timed("b", "sync", "init", str(remote)),
        "remote_bytes_after_first": du(remote),
    }
    engram("a", "import", str(extra))
    out["incremental_push_a"] = timed("a", "sync")
    out["incremental_pull_b"] = timed("b", "sync")
    out["again_a"] = timed("a", "sync")
    out["again_b"] = timed("b", "sync")
    out["remote_bytes"] = du(remote)
    stats = engram("b", "stats")
    out["on_b"] = {s["scope"]: s.get("total") for s in stats["scopes"]}
    out["cpus"] = os.cpu_count()
    for m in clones:
        subprocess.run(
            [sys.executable, "-m", "engram_core.cli", "stop"], env=envs[m], cwd=clones[m], capture_output=True
        )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
