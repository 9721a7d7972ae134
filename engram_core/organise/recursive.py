"""Recursive memory processing: look at a large store without loading it (peek), cut it
into chunks to query one by one (partition), and fuse the per-chunk answers (aggregate, RRF k = 60)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import Any, Literal

from ..models import AggregateInput, AggregateItem, Partition, PeekResult, PeekSample
from ..retrieval.search_index import tokenize
from ..storage import ScopeStore, content_hash
from ..vocabulary import ScopeOrAll
from .base import MemoryCore, api

RRF_K = 60
ScopeName = ScopeOrAll


def _sample(store: ScopeStore, key: str) -> PeekSample:
    lt = store.summaries[key]
    return PeekSample(
        id=key,
        scope=store.scope.value,
        memory_type=lt.memory_type,
        content=lt.content[:400],
        created_at=lt.created_at,
        importance=lt.importance,
    )


@api
def memory_peek(
    core: MemoryCore,
    scope: ScopeName = "all",
    sample_n: int = 5,
    focus: str | None = None,
    project: str | None = None,
    session: str | None = None,
) -> PeekResult:
    """Counts by type, status and scope, the top 20 tags, the date range, and `sample_n` samples spread
    across types and dates (or the best BM25 matches of `focus`)."""
    sample_n = max(1, min(sample_n, 50))
    stores = core.scopes.stores(scope, project, session)
    by_type: Counter[str] = Counter()
    by_status: Counter[str] = Counter()
    by_scope: Counter[str] = Counter()
    tags: Counter[str] = Counter()
    lo: datetime | None = None
    hi: datetime | None = None
    pool: list[tuple[ScopeStore, str]] = []
    for store in stores:
        total, _t, statuses = store.memories.count_by()
        by_status.update(statuses)
        by_scope[store.scope.value] += total
        for k, lt in store.summaries.items():
            by_type[lt.memory_type] += 1
            tags.update(lt.tags)
            lo = lt.created_at if lo is None or lt.created_at < lo else lo
            hi = lt.created_at if hi is None or lt.created_at > hi else hi
            pool.append((store, k))
    samples: list[PeekSample] = []
    if focus and focus.strip():
        hits = [(s, k, sc) for s in stores for k, sc in s.index.bm25(focus, sample_n)]
        hits.sort(key=lambda t: -t[2])
        samples = [_sample(s, k) for s, k, _ in hits[:sample_n] if k in s.summaries]
    else:
        # Round-robin over types, each type's memories spread evenly over time.
        groups: dict[str, list[tuple[ScopeStore, str]]] = {}
        for s, k in sorted(pool, key=lambda t: t[0].summaries[t[1]].created_at):
            groups.setdefault(s.summaries[k].memory_type, []).append((s, k))
        picks: dict[str, list[tuple[ScopeStore, str]]] = {}
        for t, items in groups.items():
            n = min(len(items), sample_n)
            step = len(items) / n
            picks[t] = [items[int(i * step)] for i in range(n)]
        while len(samples) < sample_n and any(picks.values()):
            for t in sorted(picks):
                if picks[t] and len(samples) < sample_n:
                    s, k = picks[t].pop(0)
                    samples.append(_sample(s, k))
    return PeekResult(
        total=sum(by_scope.values()),
        by_type=dict(by_type),
        by_status=dict(by_status),
        by_scope=dict(by_scope),
        top_tags=tags.most_common(20),
        date_range=(lo, hi) if lo and hi else None,
        samples=samples,
        focus=focus,
    )


def _band(importance: float) -> str:
    for lo, hi in ((0.8, 1.01), (0.6, 0.8), (0.3, 0.6), (0.0, 0.3)):
        if lo <= importance < hi:
            return f"{lo:.1f}-{min(hi, 1.0):.1f}"
    return "0.0-0.3"


@api
def memory_partition(
    core: MemoryCore,
    partition_by: Literal["tag", "date", "type", "scope", "importance_band"],
    scope: ScopeName = "all",
    max_partitions: int = 20,
    project: str | None = None,
    session: str | None = None,
) -> list[Partition]:
    """Partition descriptors (key, count, date range, mean importance), largest first; never full records.
    Dates partition by month; a memory with several tags counts in each."""
    acc: dict[str, list[Any]] = {}
    for store in core.scopes.stores(scope, project, session):
        for _k, lt in store.summaries.items():
            if partition_by == "tag":
                keys = lt.tags or ["(untagged)"]
            elif partition_by == "date":
                keys = [lt.created_at.strftime("%Y-%m")]
            elif partition_by == "type":
                keys = [lt.memory_type]
            elif partition_by == "scope":
                keys = [store.scope.value]
            else:
                keys = [_band(lt.importance)]
            for key in keys:
                a = acc.setdefault(key, [0, None, None, 0.0])
                a[0] += 1
                a[1] = lt.created_at if a[1] is None or lt.created_at < a[1] else a[1]
                a[2] = lt.created_at if a[2] is None or lt.created_at > a[2] else a[2]
                a[3] += lt.importance
    parts = [
        Partition(
            key=k, count=a[0], date_range=(a[1], a[2]) if a[1] else None, avg_importance=round(a[3] / a[0], 4)
        )
        for k, a in acc.items()
    ]
    order = (lambda p: p.key) if partition_by == "date" else (lambda p: (-p.count, p.key))
    parts.sort(key=order)
    return parts[: max(1, min(max_partitions, 500))]


def _as_memory(m: Any) -> dict[str, Any]:
    if isinstance(m, str):
        return {"content": m}
    if isinstance(m, dict):
        inner = m.get("memory")
        return (
            {**inner, **{k: v for k, v in m.items() if k != "memory"}} if isinstance(inner, dict) else dict(m)
        )
    return {"content": str(m)}


def _similar(a: str, b: str) -> float:
    """Token-set cosine: how much two texts say the same words (BM25's vocabulary, no vectors needed)."""
    ta, tb = Counter(tokenize(a)), Counter(tokenize(b))
    if not ta or not tb:
        return 1.0 if a.strip() == b.strip() else 0.0
    dot = sum(ta[w] * tb[w] for w in ta)
    return float(dot / ((sum(v * v for v in ta.values()) ** 0.5) * (sum(v * v for v in tb.values()) ** 0.5)))


@api
def memory_aggregate(
    core: MemoryCore, results: list[AggregateInput], final_limit: int = 10, dedup_threshold: float = 0.9
) -> list[AggregateItem]:
    """Fuse ranked lists from several partitions: score(d) = Σ w / (60 + rank), with `local_score` as the
    list's weight (default 1). The same id, the same content hash, or token similarity above
    `dedup_threshold` count as one result, which keeps every source it came from."""
    fused: list[dict[str, Any]] = []
    for lst in results:
        w = lst.local_score if lst.local_score is not None else 1.0
        for rank, raw in enumerate(lst.memories, start=1):
            m = _as_memory(raw)
            content = str(m.get("content") or "")
            mid = str(m.get("id") or "h:" + content_hash(content)[:16])
            h = content_hash(content) if content else mid
            hit = None
            for f in fused:
                if (
                    f["id"] == mid
                    or f["hash"] == h
                    or (content and _similar(f["content"], content) > dedup_threshold)
                ):
                    hit = f
                    break
            if hit is None:
                hit = {
                    "id": mid,
                    "hash": h,
                    "content": content,
                    "score": 0.0,
                    "sources": [],
                    "memory": m,
                    "seen": set(),
                }
                fused.append(hit)
            if lst.source not in hit["seen"]:  # one list listing a result twice counts it once
                hit["seen"].add(lst.source)
                hit["score"] += w / (RRF_K + rank)
                hit["sources"].append(lst.source)
    fused.sort(key=lambda f: (-f["score"], f["id"]))
    return [
        AggregateItem(
            id=f["id"],
            content=f["content"],
            score=round(f["score"], 6),
            sources=f["sources"],
            memory=f["memory"],
        )
        for f in fused[: max(1, final_limit)]
    ]
