"""Cost of the self-organising layer on the write and recall paths.

Two services in one process (same embedder), one with the layer's hooks removed; stores and recalls are
interleaved A/B so machine load hits both alike. Writes JSON to bench/results/organise.json.

    .venv/bin/python bench/organise.py [--n 150]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from engram_core.models import MemoryIn
from engram_core.retrieval.embeddings import LocalEmbedder
from engram_core.service import EngramService

TEMPLATES = [
    "auth.py raises TokenExpiredError when the JWT in session {i} is older than 15 minutes",
    "Run `pytest -x tests/test_api_{i}.py` before pushing; CI uses Python 3.11",
    "We use pytest and ruff; the config lives in pyproject.toml (note {i})",
    "refresh_token() fixes TokenExpiredError by renewing the cookie, see src/auth/session_{i}.py",
    "The Postgres database for service {i} listens on port 5432 in docker-compose.yml",
    "ECONNREFUSED from redis in worker {i}: start it with `docker compose up -d redis`",
    "Decided to keep the importer synchronous for batch {i}; async made retries harder to reason about",
    "See https://docs.example.com/guide/{i} for the deployment checklist of the API",
]
QUERIES = [
    "TokenExpiredError in auth.py",
    "how do we run the tests",
    "postgres port",
    "redis connection refused",
    "deployment checklist",
    "why is the importer synchronous",
]


def p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=150)
    args = ap.parse_args()
    emb = LocalEmbedder()
    emb.embed(["warm up"])
    root = Path(tempfile.mkdtemp())
    os.environ["HOME"] = str(root)
    projects = {name: root / f"proj_{name}" for name in ("on", "off")}
    for d in projects.values():
        (d / ".git").mkdir(parents=True)
    on = EngramService(home=root / "on", embedder=emb, recover_sessions=False)
    off = EngramService(home=root / "off", embedder=emb, recover_sessions=False)
    for hooks in (
        off.extensions.after_store,
        off.extensions.after_recall,
        off.extensions.rankers,
        off.extensions.boosters,
    ):
        hooks.clear()
    # The hook alone, measured inside the layered service.
    hook_times: list[float] = []
    real_hook = on.extensions.after_store[0]

    def timed_hook(*a: object) -> None:
        t = time.perf_counter()
        real_hook(*a)
        hook_times.append(time.perf_counter() - t)

    on.extensions.after_store[0] = timed_hook
    sess_on = on.start_session(project=str(projects["on"])).session_key
    sess_off = off.start_session(project=str(projects["off"])).session_key
    store_t: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(args.n):
        text = TEMPLATES[i % len(TEMPLATES)].format(i=i)
        for name, svc, sess in (("on", on, sess_on), ("off", off, sess_off))[:: 1 if i % 2 else -1]:
            t = time.perf_counter()
            svc.store(MemoryIn(content=text), project=str(projects[name]), session=sess)
            store_t[name].append(time.perf_counter() - t)
    recall_t: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(5):
        for q in QUERIES:
            for name, svc, sess in (("on", on, sess_on), ("off", off, sess_off))[:: 1 if r % 2 else -1]:
                t = time.perf_counter()
                svc.recall(q, project=str(projects[name]), session=sess, strengthen=False, log=False)
                recall_t[name].append(time.perf_counter() - t)
    out = {
        "n_stores": args.n,
        "n_recalls": len(recall_t["on"]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_1m": os.getloadavg()[0],
        },
        "store_ms": {k: {"p50": round(p(v, 0.5), 2), "p90": round(p(v, 0.9), 2)} for k, v in store_t.items()},
        "after_store_hook_ms": {"p50": round(p(hook_times, 0.5), 2), "p90": round(p(hook_times, 0.9), 2)},
        "recall_ms": {
            k: {"p50": round(p(v, 0.5), 2), "p90": round(p(v, 0.9), 2)} for k, v in recall_t.items()
        },
        "note": "Stores include embedding (all-MiniLM-L6-v2, torch CPU). 'off' = same service, hooks removed.",
    }
    on.close()
    off.close()
    dest = Path(__file__).parent / "results" / "organise.json"
    dest.write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
