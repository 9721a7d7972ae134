"""What takes the disk in an Engram store: bytes per table and per index, measured by rebuilding.

    python bench/disk_usage.py STORE_DIR [--ns project --db p_…] [--out bench/results/disk_usage.json]

STORE_DIR is a store directory (`<project>/.claude/engram/project.db`, `$ENGRAM_HOME/user.db`); give it a copy,
or a store no daemon has open (the engine allows one process per file). For each database in it, every table's
rows are read once, then fresh stores are written beside each other in a temporary directory: one holding that
table alone without its indexes (the rows' own cost), and one per index with that index added (the index's cost).
A fresh store holds one version of each row, so the sum is what a compacted store holds; `live_vs_files` compares
it with the files as they are (the difference is old row versions the engine keeps until a compaction).
Prints JSON: per table rows, bytes and bytes per memory; per index bytes and bytes per memory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from surrealdb import Surreal


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _defs(info: dict[str, Any] | None) -> list[str]:
    return [re.sub(r"^DEFINE (\w+) ", r"DEFINE \1 OVERWRITE ", str(v)) for v in (info or {}).values()]


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def read_table(db: Any, name: str, computed: set[str], batch: int = 1000) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    start = 0
    while True:
        got = db.query(f"SELECT * FROM `{name}` ORDER BY id LIMIT {batch} START {start}").execute()[-1] or []
        if not got:
            return rows
        rows += [{k: _clean(v) for k, v in r.items() if k not in computed and v is not None} for r in got]
        start += batch


def build(
    tmp: Path,
    ns: str,
    dbname: str,
    head: list[str],
    name: str,
    relation: bool,
    rows: list[dict[str, Any]],
    indexes: list[str],
) -> int:
    """A fresh store holding one table's rows (and the given index definitions); returns its bytes on disk."""
    shutil.rmtree(tmp, ignore_errors=True)
    dst = Surreal(f"surrealkv://{tmp}")
    dst.use(ns, dbname)
    dst.query(";\n".join(head)).execute()
    into = "INSERT RELATION INTO" if relation else "INSERT INTO"
    for i in range(0, len(rows), 500):
        dst.query(f"{into} `{name}` $rows RETURN NONE", {"rows": rows[i : i + 500]}).execute()
    if indexes:
        dst.query(";\n".join(indexes)).execute()
    dst.close()
    size = du(tmp)
    shutil.rmtree(tmp, ignore_errors=True)
    return size


def measure(path: Path, only: tuple[str, str] | None) -> dict[str, Any]:
    src = Surreal(f"surrealkv://{path}")
    files = du(path)
    out: dict[str, Any] = {"store": str(path), "files_bytes": files, "databases": []}
    work = Path(tempfile.mkdtemp(prefix="engram-disk-"))
    try:
        for ns in sorted((src.query("INFO FOR ROOT").execute()[-1] or {}).get("namespaces", {})):
            src.use(ns, "x")
            for dbname in sorted((src.query("INFO FOR NS").execute()[-1] or {}).get("databases", {})):
                if only and (ns, dbname) != only:
                    continue
                src.use(ns, dbname)
                out["databases"].append(measure_db(src, ns, dbname, work))
    finally:
        src.close()
        shutil.rmtree(work, ignore_errors=True)
    live = sum(
        t["bytes"] + sum(t["indexes"].values()) for d in out["databases"] for t in d["tables"].values()
    )
    out["live_bytes"] = live
    out["live_vs_files"] = round(files / live, 2) if live else None
    return out


def measure_db(src: Any, ns: str, dbname: str, work: Path) -> dict[str, Any]:
    info = src.query("INFO FOR DB").execute()[-1] or {}
    common = [*_defs(info.get("analyzers")), *_defs(info.get("functions")), *_defs(info.get("params"))]
    memories = (
        (src.query("SELECT count() AS n FROM memory GROUP ALL").execute()[-1] or [{"n": 0}])[0]["n"]
        if "memory" in (info.get("tables") or {})
        else 0
    )
    tables: dict[str, Any] = {}
    for name, definition in sorted((info.get("tables") or {}).items()):
        tinfo = src.query(f"INFO FOR TABLE `{name}`").execute()[-1] or {}
        fields = tinfo.get("fields") or {}
        computed = {f for f, d in fields.items() if " COMPUTED " in str(d)}
        relation = "TYPE RELATION" in str(definition)
        rows = read_table(src, name, computed)
        if not rows:
            continue
        # Relation tables need their ends to exist as tables (not rows): define every table, fill one.
        head = [*common, *_defs(info.get("tables")), *_defs(fields)]
        t0 = time.perf_counter()
        base = build(work / "t", ns, dbname, head, name, relation, rows, [])
        empty = build(work / "t", ns, dbname, head, name, relation, [], [])
        idx = {
            iname: build(work / "t", ns, dbname, head, name, relation, rows, [d]) - base
            for iname, d in zip(tinfo.get("indexes") or {}, _defs(tinfo.get("indexes")), strict=True)
        }
        per = memories or 1
        tables[name] = {
            "rows": len(rows),
            "bytes": base - empty,
            "bytes_per_row": round((base - empty) / len(rows)),
            "bytes_per_memory": round((base - empty) / per),
            "indexes": idx,
            "index_bytes_per_memory": {k: round(v / per) for k, v in idx.items()},
            "json_bytes_per_row": round(len(json.dumps(rows, default=str)) / len(rows)),
            "took_s": round(time.perf_counter() - t0, 1),
        }
        print(f"{ns}/{dbname} {name}: {tables[name]}", file=sys.stderr)
    total = sum(t["bytes"] + sum(t["indexes"].values()) for t in tables.values())
    return {
        "ns": ns,
        "db": dbname,
        "memories": memories,
        "live_bytes": total,
        "live_bytes_per_memory": round(total / memories) if memories else None,
        "tables": tables,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--ns")
    ap.add_argument("--db")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    result = measure(args.store, (args.ns, args.db) if args.ns and args.db else None)
    result["load_1min"] = round(os.getloadavg()[0], 2)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
