"""Micro-benchmarks of hot-path pieces (moved out of the tests: speed is measured here, never asserted there).

python bench/micro.py     # prints JSON, writes bench/results/micro.json
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from engram_core.redaction import redact  # noqa: E402
from engram_core.retrieval.search_index import SearchIndex  # noqa: E402


def timings(fn: Callable[[], object], runs: int = 50) -> dict[str, float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return {
        "best_ms": round(times[0], 3),
        "p50_ms": round(times[len(times) // 2], 3),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 3),
    }


def main() -> None:
    rng = np.random.default_rng(2)
    idx = SearchIndex(dim=384)
    vocab = [f"w{i}" for i in range(3000)]
    vecs = rng.standard_normal((16_000, 384)).astype(np.float32)
    t0 = time.perf_counter()
    for i in range(16_000):
        idx.upsert(f"d{i}", " ".join(rng.choice(vocab, 20)), vecs[i])
    upsert_us = (time.perf_counter() - t0) / 16_000 * 1e6
    q = rng.standard_normal(384).astype(np.float32)
    corpus = (ROOT / "tests" / "data" / "benign_corpus.jsonl").read_text().splitlines()
    text = "\n".join(json.loads(x)["text"] for x in corpus if x.strip())
    text = (text * (100_000 // len(text) + 1))[:100_000]
    out = {
        "search_index_upsert_us": round(upsert_us, 1),
        "search_index_vector_top10_16k": timings(lambda: idx.vector(q, 10)),
        "search_index_bm25_top10_16k": timings(lambda: idx.bm25("w10 w200 w1500 w7 w2999", 10)),
        "redact_100kb_tool_output": timings(lambda: redact(text), runs=10),
    }
    print(json.dumps(out, indent=2))
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "micro.json").write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
