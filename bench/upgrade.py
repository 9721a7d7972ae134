"""A store written by an older Engram, opened by this one: how long the upgrade takes and what it leaves on disk.

    git -C . archive 101568f | tar -x -C /tmp/up/old          # the code before schema 011
    python bench/realpath_text.py --project 10000 --user 0 --seed 7 > /tmp/up/d.jsonl
    python bench/upgrade.py --old /tmp/up/old --data /tmp/up/d.jsonl --work /tmp/up/run

Steps, each through the real CLI and daemon (a private HOME, ENGRAM_HOME and git project under --work):
  1. the old code: `engram import` of the data (default settings, organise on), its closing compaction, `engram stop`;
     the graph as the old code stored it is counted (entities, mention edges, relations by kind);
  2. this code: the daemon started, then the first `engram recall` timed (it waits for the upgrade of every store
     it opens); the graph counted again (entity lists, relations) and the first recall's hits compared with the old
     code's answer to the same question;
  3. `engram compact`, `engram stop`; disk per memory (data root and project store with their snapshots) after the
     old import, after the upgrade and after the compaction.
Prints one JSON object (and writes it to --out).
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
from typing import Any

QUESTION = "which library does src/api/server.py use for the retry logic"


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def disk(root: Path) -> int:
    return sum(f.stat().st_size for f in root.rglob("*") if f.is_file())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--old", type=Path, required=True, help="a source tree of the older Engram")
    ap.add_argument("--data", type=Path, required=True, help="JSONL to import with the old code")
    ap.add_argument(
        "--from-copy",
        type=Path,
        help="a copy of the WORK the old code's import left (home, eh, proj), "
        "put back at WORK instead of importing again: WORK must be the path "
        "it was imported at (a project's store is named by its path)",
    )
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("bench/results/upgrade.json"))
    args = ap.parse_args()
    here = Path(__file__).resolve().parent.parent
    shutil.rmtree(args.work, ignore_errors=True)
    proj = args.work / "proj"
    if args.from_copy:
        shutil.copytree(args.from_copy, args.work, symlinks=True)
    else:
        for sub in ("home", "eh", "proj"):
            (args.work / sub).mkdir(
                parents=True, mode=0o700
            )  # owner-only: Engram refuses one others can open
        subprocess.run(["git", "init", "-q", str(proj)], check=True)
    base_env = {
        **os.environ,
        "HOME": str(args.work / "home"),
        "ENGRAM_HOME": str(args.work / "eh"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "ENGRAM_MODEL_CACHE": os.environ.get("ENGRAM_MODEL_CACHE", str(Path.home() / ".cache/engram/models")),
    }

    def cli(code: Path, *argv: str, timeout: float = 3600) -> subprocess.CompletedProcess[str]:
        env = {**base_env, "PYTHONPATH": str(code.resolve())}
        return subprocess.run(
            [sys.executable, "-m", "engram_core.cli", *argv],
            env=env,
            cwd=proj,
            text=True,
            capture_output=True,
            timeout=timeout,
            check=False,
        )

    def count() -> dict[str, Any]:
        """The graph in the project store as stored (read with the daemon stopped: one process per store)."""
        from surrealdb import Surreal

        db = Surreal(f"surrealkv://{proj / '.claude' / 'engram' / 'project.db'}")
        try:
            db.use("project", "x")
            (name,) = [
                d
                for d in (db.query("INFO FOR NS").execute()[0] or {}).get("databases", {})
                if d.startswith("p_")
            ]
            db.use("project", name)
            tables = (db.query("INFO FOR DB").execute()[0] or {}).get("tables", {})
            queries = {
                "memories": "SELECT count() FROM memory GROUP ALL",
                "entities": "SELECT count() FROM entity GROUP ALL",
                "relations_typed": "SELECT count() FROM relates_to WHERE relation_type != 'related_to' GROUP ALL",
                "relations_related_to": "SELECT count() FROM relates_to WHERE relation_type = 'related_to' GROUP ALL",
                "mention_edges": "SELECT count() FROM mentions GROUP ALL",
                "memories_with_a_list": "SELECT count() FROM memory WHERE entities != NONE GROUP ALL",
                "listed_entities": "SELECT math::sum(array::len(entities ?? [])) AS count FROM memory GROUP ALL",
            }
            out: dict[str, Any] = {}
            for key, sql in queries.items():
                if key == "mention_edges" and "mentions" not in tables:
                    out[key] = 0
                    continue
                rows = db.query(sql).execute()[0]
                out[key] = int(rows[0]["count"] or 0) if rows else 0
            return out
        finally:
            db.close()

    def recall(code: Path) -> tuple[float, list[str]]:
        t = time.perf_counter()
        p = cli(code, "recall", QUESTION, "--json", "--limit", "10")
        took = time.perf_counter() - t
        hits = json.loads(p.stdout)["hits"] if p.returncode == 0 else []
        return took, [h["content"] for h in hits]

    result: dict[str, Any] = {"data": str(args.data), "old": str(args.old), "load_start": load()}
    cli(args.old, "stats", "--json")
    if not args.from_copy:
        t = time.perf_counter()
        imp = cli(args.old, "import", str(args.data.resolve()), "--json", timeout=7200)
        if imp.returncode != 0:
            raise SystemExit(f"the old import failed: {imp.stderr[-2000:]}")
        result["old_import_s"] = round(time.perf_counter() - t, 1)
    n = sum(1 for line in args.data.read_text().splitlines() if line.strip())
    result["memories"] = n
    result["old_recall_s"], old_hits = recall(args.old)
    cli(args.old, "stop")
    result["old_graph"] = count()
    result["disk_kb_per_memory_old"] = round(
        disk(args.work / "eh") / 1024 / n + disk(proj / ".claude") / 1024 / n, 2
    )

    t = time.perf_counter()
    cli(
        here, "stats", "--json", timeout=3600
    )  # the daemon starts; the project store opens (and upgrades) below
    result["new_daemon_ready_s"] = round(time.perf_counter() - t, 2)
    result["new_first_recall_s"], new_hits = recall(here)  # opens the project store: the upgrade runs here
    result["same_top10_as_old"] = sum(h in old_hits for h in new_hits)
    cli(here, "stop")
    result["new_graph"] = count()
    result["disk_kb_per_memory_upgraded"] = round(
        (disk(args.work / "eh") + disk(proj / ".claude")) / 1024 / n, 2
    )
    comp = cli(here, "compact", "--json", "--project", str(proj), timeout=3600)
    result["compact"] = json.loads(comp.stdout) if comp.returncode == 0 else comp.stderr[-500:]
    cli(here, "stop")
    result["disk_kb_per_memory_compacted"] = round(
        (disk(args.work / "eh") + disk(proj / ".claude")) / 1024 / n, 2
    )
    log = args.work / "eh" / "engram.log"
    result["log_upgrade_lines"] = [
        line for line in (log.read_text().splitlines() if log.exists() else []) if "schema 11" in line
    ][-4:]
    result["load_end"] = load()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
