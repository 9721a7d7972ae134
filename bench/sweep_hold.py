"""How long a recall waits behind background work: `engram maintain` (the sweep) and `engram compact`, each run while
a recall goes to the daemon's socket every 100 ms, then `engram stop` and a start right after it.

One store is built on the real path (`engram import` of realistic text from bench/realpath_text.py, organise on,
the daemon up); every other memory is imported with importance 0.05, so the sweep has that many memories to move
(created and unimportant: archived). Each variant (a checkout of Engram: this one, and the one named by --before)
then runs on its own copy of that store, in the same run:

    python bench/sweep_hold.py --work /tmp/sweep-hold --size 5000 --before /tmp/engram-before

JSON on stdout (and bench/results/sweep-hold-<size>.json): per variant the sweep's and the compaction's wall time,
the recalls answered while each ran (p50/p95/max), the load average around each, and how long `engram stop` took.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import realpath  # noqa: E402
import realpath_text  # noqa: E402
from realpath import CHILDREN, ENGRAM, Setup, kill_group, loads, log, summary  # noqa: E402


class Variant(Setup):
    """A copy of the built store, run with the Engram checkout at ``root``."""

    def __init__(self, work: Path, root: Path) -> None:
        super().__init__(work)
        self.root = root

    def env(self) -> dict[str, str]:
        return {**super().env(), "PYTHONPATH": str(self.root)}


def recall_during(s: Setup, argv: list[str], queries: list[str], timeout: float) -> dict[str, Any]:
    """`engram ARGV --json` and, while it runs, a recall every 100 ms on the socket."""
    client = s.client(timeout=timeout)
    client.call("recall", query=queries[0], project=str(s.proj), limit=10)
    row: dict[str, Any] = {"load_start": loads()}
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [*ENGRAM, *argv, "--json"],
        cwd=s.proj,
        env=s.env(),
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    CHILDREN.add(proc)
    during: list[float] = []
    slow: list[tuple[float, float]] = []  # (seconds after the command began, ms) of the recalls over 200 ms
    i = 1
    try:
        while proc.poll() is None:
            if time.perf_counter() - t0 > timeout:
                raise TimeoutError(f"engram {argv[0]} did not finish within {timeout:.0f} s")
            time.sleep(0.1)
            t = time.perf_counter()
            client.call("recall", query=queries[i % len(queries)], project=str(s.proj), limit=10)
            during.append((time.perf_counter() - t) * 1000)
            if during[-1] > 200:
                slow.append((round(t - t0, 2), round(during[-1])))
            i += 1
        wall = time.perf_counter() - t0
        out, err = proc.communicate(timeout=60)
    finally:
        kill_group(proc)
        CHILDREN.discard(proc)
        client.close()
    row.update(
        {
            "wall_s": round(wall, 2),
            "exit": proc.returncode,
            "recalls_while_it_ran": summary(during),
            "recalls_over_200_ms": slow,
            "load_end": loads(),
        }
    )
    try:
        row["report"] = json.loads(out)
    except ValueError:
        row["stderr"] = err[-1000:]
    return row


def build(work: Path, size: int, timeout: float) -> Setup:
    s = Setup(work)
    if s.state().get("imported") == size:
        return s
    s.make()
    rows = realpath_text.memories(size, 0, seed=7)
    for i, r in enumerate(rows):
        if i % 2:
            r["importance"] = 0.05
    log(f"importing {size} memories into {work}")
    res = realpath.do_import(s, rows, str(size), timeout)
    s.stop()
    s.state_file.write_text(json.dumps({"imported": size, "import": res}))
    return s


def measure(base: Setup, name: str, root: Path, queries: list[str], timeout: float) -> dict[str, Any]:
    # The store is put back as built, at the same path: a project's database is named after its directory.
    pristine = base.work.parent / f"{base.work.name}-as-built"
    if not pristine.exists():
        shutil.copytree(base.work, pristine, symlinks=True)
    shutil.rmtree(base.work)
    shutil.copytree(pristine, base.work, symlinks=True)
    v = Variant(base.work, root)
    out: dict[str, Any] = {"root": str(root), "commit": _head(root)}
    start_s, client = v.start()
    out["daemon_start_s"] = round(start_s, 2)
    out["stored"] = {x["scope"]: x["total"] for x in client.call("stats", project=str(v.proj))["scopes"]}
    client.close()
    log(f"{name}: engram maintain with recalls")
    out["maintain"] = recall_during(v, ["maintain"], queries, timeout)
    log(f"{name}: engram compact with recalls")
    out["compact"] = recall_during(v, ["compact"], queries, timeout)
    log(f"{name}: engram stop, then a start right after")
    t = time.perf_counter()
    stop = v.engram("stop", "--timeout", str(int(timeout)), check=False, timeout=timeout + 30)
    out["stop"] = {
        "seconds": round(time.perf_counter() - t, 2),
        "exit": stop.returncode,
        "stderr": stop.stderr[-300:],
    }
    v.stop()
    return out


def _head(root: Path) -> str:
    """The checkout's commit (a `git archive` export says it in a COMMIT file)."""
    p = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    if p.returncode == 0:
        return p.stdout.strip()
    return (root / "COMMIT").read_text().strip() if (root / "COMMIT").exists() else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--work", type=Path, required=True, help="working directory (the built store is kept there)"
    )
    ap.add_argument("--size", type=int, default=5000)
    ap.add_argument(
        "--before", type=Path, default=None, help="another Engram checkout to measure in the same run"
    )
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    res: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "size": a.size,
        "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_at_start": loads(),
        "variants": {},
    }
    base = build(a.work / "built", a.size, a.timeout)
    queries = realpath_text.questions(60)
    for name, root in ([("before", a.before)] if a.before else []) + [("after", ROOT)]:
        res["variants"][name] = measure(base, name, root.resolve(), queries, a.timeout)
    res["load_at_end"] = loads()
    text = json.dumps(res, indent=1)
    (ROOT / "bench" / "results" / f"sweep-hold-{a.size}.json").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
