"""Which step of a recall grows with the store: recall's in-memory work at 10k and 100k project memories.

Importing 100,000 memories takes too long to repeat for every change, so this builds the mirrors a recall reads
(search index, light rows, row mirror, knowledge-graph mirror, association adjacency) straight from synthetic
rows: realistic text from `realpath_text.py` (fixed seed), the entities and relations the organise layer's own
extractor finds in it, random unit vectors (timing only: the vector step's cost does not depend on what the
vectors mean), a few association edges per memory. They are injected into a real `EngramService` (real model for
the query, real recall path) with one project store, then the same questions are recalled at each size with
stage timings (in process, no socket). Prints JSON, appends it to bench/results/recall_scale.jsonl.

    python bench/recall_scale.py --sizes 10000 100000 --queries 40
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import realpath_text  # noqa: E402

from engram_core import core as core_mod  # noqa: E402
from engram_core.ids import ulid  # noqa: E402
from engram_core.models import MemoryIn  # noqa: E402
from engram_core.organise import entities as ex  # noqa: E402
from engram_core.organise import graph  # noqa: E402
from engram_core.organise.base import state  # noqa: E402
from engram_core.retrieval import hybrid  # noqa: E402
from engram_core.retrieval import recall as recall_mod  # noqa: E402
from engram_core.retrieval.search_index import SearchIndex  # noqa: E402
from engram_core.service import EngramService  # noqa: E402
from engram_core.storage import MemorySummary, ScopeStore, content_hash  # noqa: E402
from engram_core.storage.row_mirror import FIELDS  # noqa: E402

TIMES: dict[str, float] = {}


def timed(name: str, fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*a: Any, **k: Any) -> Any:
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            TIMES[name] = TIMES.get(name, 0.0) + (time.perf_counter() - t) * 1000

    return wrapper


def fill(svc: EngramService, store: ScopeStore, n: int, seed: int) -> dict[str, Any]:
    """The store's mirrors hold n synthetic memories (what opening an imported store of that size gives)."""
    import numpy as np  # after engram_core, which limits numpy's BLAS to one thread before it loads

    t0 = time.perf_counter()
    rng = random.Random(seed)
    mems = realpath_text.memories(n, 0, seed)
    start = datetime.now(UTC) - timedelta(days=60)
    keys = [ulid() for _ in mems]
    vecs = np.random.default_rng(seed).standard_normal((n, store.mirror.dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    index = SearchIndex(store.mirror.dim)
    index.load(keys, [str(m["content"]) for m in mems], vecs, np.ones(n, dtype=bool))
    g = graph.GraphMirror()
    subject = graph.subject_for(store)
    adj: dict[str, dict[str, float]] = {}
    with store.mirror_lock:
        store.mirror.index = index
        store.summaries.clear()
        store.rows.clear()
        for i, (key, m) in enumerate(zip(keys, mems, strict=True)):
            at = start + timedelta(seconds=i * 50)
            episode = f"ep_{i // 12}"
            light = MemorySummary(
                memory_type=str(m["memory_type"]),
                tags=list(m["tags"]),
                importance=float(m["importance"]),
                access_count=rng.randint(0, 3),
                half_life_days=30.0,
                status="active",
                pinned=False,
                last_accessed_at=at,
                created_at=at,
                session_id=None,
                episode_id=episode,
                content_hash=content_hash(str(m["content"])),
                content=str(m["content"]),
            )
            store.summaries[key] = light
            row = {f: getattr(light, f, None) for f in FIELDS}
            row.update(
                scope="project",
                confidence=0.7,
                relevance_score=0.0,
                outcome_impact=0.0,
                user_feedback=0.0,
                status_history=[{"to": "active", "at": at}],
                source=None,
                promoted_from=None,
                promotion_chain=[],
                consolidated_into=None,
                invalid_at=None,
                updated_at=at,
                metadata={},
            )
            store.rows.put(key, row)
            ents = ex.extract_entities(str(m["content"]))
            for e in ents:
                g.add_entity(graph.entity_key(e.key, e.entity_type), e.entity_type, e.key)
            g.add_memory(
                key, [graph.entity_key(e.key, e.entity_type) for e in ents]
            )  # mentions and co-mentions
            for r in ex.extract_relations(str(m["content"]), ents, subject) if ents else []:
                a = graph.entity_key(r.source.key, r.source.entity_type)
                b = graph.entity_key(r.target.key, r.target.entity_type)
                for e in (r.source, r.target):
                    g.add_entity(graph.entity_key(e.key, e.entity_type), e.entity_type, e.key)
                rk = graph.relation_key(a, r.relation_type, b)
                w = g.rels.get(rk, (a, b, 0.3))[2]
                g.set_relation(rk, a, b, min(1.0, w + 0.1), True)
            if i and rng.random() < 0.3:  # recalled together with a recent neighbour
                other = keys[max(0, i - rng.randint(1, 30))]
                w = round(rng.uniform(0.1, 0.6), 2)
                adj.setdefault(key, {})[other] = w
                adj.setdefault(other, {})[key] = w
    st = state(svc).of(store)
    g.version = store.graph_version
    store.graph.mirror = g
    st.adjacency = adj
    return {
        "memories": n,
        "entities": len(g.types),
        "relations": len(g.rels),
        "mentions": sum(len(v) for v in g.mentioned_by.values()),
        "association_edges": sum(map(len, adj.values())) // 2,
        "build_s": round(time.perf_counter() - t0, 1),
    }


def measure(svc: EngramService, project: str, questions: list[str], gap: float) -> dict[str, Any]:
    per: dict[str, list[float]] = {}
    total: list[float] = []
    for q in questions:
        time.sleep(gap)
        TIMES.clear()
        t = time.perf_counter()
        svc.recall(q, project=project, strengthen=False, log=False)
        total.append((time.perf_counter() - t) * 1000)
        for k, v in TIMES.items():
            per.setdefault(k, []).append(v)
    out: dict[str, Any] = {
        "recall_p50_ms": round(statistics.median(total), 2),
        "recall_p95_ms": round(sorted(total)[int(len(total) * 0.95)], 2),
    }
    out.update({f"{k}_p50_ms": round(statistics.median(v), 2) for k, v in sorted(per.items())})
    out.update({f"{k}_max_ms": round(max(v), 2) for k, v in sorted(per.items())})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--gap-ms", type=int, default=50)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--label", default="run")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "recall_scale.jsonl")
    args = ap.parse_args()
    recall_mod.try_embed = timed("embed", recall_mod.try_embed)
    hybrid.rank = timed("fusion", hybrid.rank)
    ScopeStore.get_many = timed("rows", ScopeStore.get_many)  # type: ignore[method-assign]
    core_mod.MemoryCore.to_memory = timed("to_memory", core_mod.MemoryCore.to_memory)  # type: ignore[method-assign]
    result: dict[str, Any] = {"label": args.label, "load_at_start": os.getloadavg(), "sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "proj"
        (project / ".git").mkdir(parents=True)
        svc = EngramService(Path(tmp) / "home")
        try:
            svc.store(MemoryIn(content="a first memory makes the project store"), project=str(project))
            store = svc.project_store(str(project))
            assert store is not None
            ext = svc.extensions
            ext.rankers[:] = [timed(f"ranker.{r.__name__}", r) for r in ext.rankers]
            ext.boosters[:] = [
                dataclasses.replace(b, booster=timed("boosters", b.booster)) for b in ext.boosters
            ]
            # Other questions at each size: the model keeps the vectors of the last texts it embedded.
            questions = realpath_text.questions(5 + args.queries * len(args.sizes), 11)
            svc.recall(questions[0], project=str(project))  # the model and the graph mirror load
            for i, n in enumerate(args.sizes):
                built = fill(svc, store, n, args.seed)
                svc.recall(questions[1 + i], project=str(project), strengthen=False, log=False)
                mine = questions[5 + i * args.queries : 5 + (i + 1) * args.queries]
                built.update(measure(svc, str(project), mine, args.gap_ms / 1000))
                built["load"] = os.getloadavg()
                result["sizes"][str(n)] = built
                print(json.dumps({n: built}), file=sys.stderr)
        finally:
            svc.close()
    print(json.dumps(result, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("a") as fh:
        fh.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
