"""Per-query cost of driving the embedded engine through its asynchronous binding (what Engram does, so that a
long query does not hold Python's GIL) against the SDK's synchronous binding, on one surrealkv store each.

Prints JSON: median milliseconds per `RETURN 1` and per one-row `CREATE`, how much another Python thread gets
done while a 15-iteration `crypto::argon2` loop runs on each binding, and the load average."""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import threading
import time
from typing import Any

from surrealdb import Surreal

from engram_core.store import _Engine


def medians(db: Any) -> dict[str, float]:
    db.use("bench", "bench")
    out = {}
    for label, sql, n in (("return_1_ms", "RETURN 1", 2000), ("create_ms", "CREATE t SET a = 1", 500)):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            db.query(sql).execute()
            times.append(time.perf_counter() - t0)
        out[label] = round(statistics.median(times) * 1000, 3)
    return out


def other_thread_turns(db: Any) -> int:
    """Loop turns another thread makes while the engine runs a CPU-heavy query (GIL held: almost none)."""
    worker = threading.Thread(
        target=lambda: db.query("FOR $i IN 0..15 { LET $x = crypto::argon2::generate('abc'); }").execute())
    worker.start()
    turns = 0
    while worker.is_alive():
        turns += 1
    return turns


def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        sync_db = Surreal(f"surrealkv://{d}/sync")
        engine = _Engine(f"surrealkv://{d}/async")
        result = {
            "sync_binding": {**medians(sync_db), "other_thread_turns": other_thread_turns(sync_db)},
            "async_binding_engram": {**medians(engine), "other_thread_turns": other_thread_turns(engine)},
            "loadavg": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(),
        }
        sync_db.close()
        engine.close()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
