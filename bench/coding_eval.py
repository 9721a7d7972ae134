"""Retrieval quality on Engram's own coding-agent eval set (bench/data/coding_eval.json).

50 memories (facts, procedures, errors, file changes, preferences) in one project, 40 labelled queries.
Engram is measured through `EngramService.recall` (the agent's path) without strengthening, so one query
cannot change the next; in the same run: BM25 alone (bm25s), MiniLM cosine alone, and plain RRF of the two.

    python bench/coding_eval.py        # prints JSON, writes bench/results/coding_eval.json
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from engram_core.models import MemoryIn  # noqa: E402
from engram_core.retrieval.embeddings import LocalEmbedder  # noqa: E402
from engram_core.retrieval.search_index import rrf  # noqa: E402
from engram_core.service import EngramService  # noqa: E402

KS = (1, 3, 5, 10)


def metrics(ranked: list[str], relevant: set[str]) -> dict[str, float]:
    out = {f"recall@{k}": len(set(ranked[:k]) & relevant) / len(relevant) for k in KS}
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(ranked[:10]) if d in relevant)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(10, len(relevant))))
    out["ndcg@10"] = dcg / idcg
    out["mrr"] = next((1 / (i + 1) for i, d in enumerate(ranked) if d in relevant), 0.0)
    return out


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(sum(r[k] for r in rows) / len(rows), 3) for k in rows[0]}


def main() -> None:
    data = json.loads((ROOT / "bench" / "data" / "coding_eval.json").read_text())
    mems, queries = data["memories"], data["queries"]
    model = LocalEmbedder()
    results: dict[str, list[dict[str, float]]] = {
        "engram": [],
        "bm25s": [],
        "minilm_cosine": [],
        "rrf_plain": [],
    }

    import bm25s

    corpus = [m["content"] for m in mems]
    keys = [m["key"] for m in mems]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False)
    doc_vecs = model.embed(corpus)

    with tempfile.TemporaryDirectory() as tmp:
        proj = Path(tmp) / "proj"
        (proj / ".git").mkdir(parents=True)
        with EngramService(Path(tmp) / "home", embedder=model) as svc:
            stored = svc.store_many(
                [
                    MemoryIn(content=m["content"], memory_type=m["memory_type"], metadata={"key": m["key"]})
                    for m in mems
                ],
                project=str(proj),
            )
            id_to_key = {r.memory.id: r.memory.metadata["key"] for r in stored}
            for q in queries:
                relevant = set(q["relevant"])
                res = svc.recall(q["query"], project=str(proj), limit=10, strengthen=False, log=False)
                results["engram"].append(metrics([id_to_key[h.memory.id] for h in res.hits], relevant))
                docs, _ = retriever.retrieve(
                    bm25s.tokenize([q["query"]], stopwords="en", show_progress=False),
                    k=len(corpus),
                    show_progress=False,
                )
                bm = [keys[i] for i in docs[0]]
                results["bm25s"].append(metrics(bm, relevant))
                qv = model.embed([q["query"]])[0]
                cos = [keys[i] for i in np.argsort(-(doc_vecs @ qv))]
                results["minilm_cosine"].append(metrics(cos, relevant))
                fused = sorted(rrf([bm[:100], cos[:100]], k=60).items(), key=lambda kv: -kv[1])
                results["rrf_plain"].append(metrics([d for d, _ in fused], relevant))
    out = {"memories": len(mems), "queries": len(queries), **{k: mean(v) for k, v in results.items()}}
    text = json.dumps(out, indent=2)
    print(text)
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "coding_eval.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
