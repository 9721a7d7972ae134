"""Cross-scope hybrid recall: per scope BM25 + vectors fused by the ranking module,
weighted by scope and memory strength, merged and deduplicated across scopes.

Pure over the stores' in-process mirrors: no database round trip until the winners are fetched.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ..memory.scoring import memory_strength
from ..storage import MemorySummary, ScopeStore
from . import ranking

# The default the evolution starts from, then the named profiles a user may choose.
EVOLVED_DEFAULT = {"session": 1.5, "project": 1.0, "user": 0.7}
SCOPE_PROFILES: dict[str, dict[str, float]] = {
    "default": {"session": 0.50, "project": 0.35, "user": 0.15},
    "codebase": {"session": 0.20, "project": 0.60, "user": 0.20},
    "preferences": {"session": 0.10, "project": 0.20, "user": 0.70},
    "debugging": {"session": 0.40, "project": 0.40, "user": 0.20},
    "new_project": {"session": 0.30, "project": 0.10, "user": 0.60},
    "architecture": {"session": 0.15, "project": 0.65, "user": 0.20},
}
DEDUP_COSINE = 0.9
# How much strength moves the order: final = fused × scope boost × (1 − w + w × strength).
STRENGTH_WEIGHT = 0.3
SCOPE_WEIGHT_SHARPNESS = 0.5


@dataclass
class Filters:
    statuses: set[str]
    types: set[str] | None = None
    tags: set[str] | None = None

    def admits(self, light: MemorySummary) -> bool:
        if light.status not in self.statuses:
            return False
        if self.types and light.memory_type not in self.types:
            return False
        return not (self.tags and not self.tags.intersection(light.tags))

    def first_admitted(
        self, ranked: Iterable[tuple[str, float]], light: Mapping[str, MemorySummary], n: int
    ) -> list[tuple[str, float]]:
        """The first ``n`` of a ranked list whose memory is in ``light`` and admitted."""
        out: list[tuple[str, float]] = []
        if n <= 0:
            return out
        statuses = self.statuses
        plain = self.types is None and self.tags is None  # the usual recall: by status alone, checked inline
        for item in ranked:
            lt = light.get(item[0])
            if lt is not None and (lt.status in statuses if plain else self.admits(lt)):
                out.append(item)
                if len(out) >= n:
                    break
        return out


@dataclass
class Candidate:
    store: ScopeStore
    key: str
    light: MemorySummary  # the memory's summary in its store's mirror
    bm25: float | None
    bm25_rank: int | None
    vector: float | None
    vector_rank: int | None
    fused: float
    scope_weight: float
    strength: float
    final: float
    also_in: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)  # its own tags and those of the duplicates folded into it

    @property
    def scope(self) -> str:
        return self.store.scope.value


def _weight_boost(weight: float, top: float) -> float:
    """Scope weights act on a rank-fused score, whose scale is compressed (rank 1 vs rank 10 differ by ~15 %),
    so a raw 1.5× would let any session memory beat the best project one. Use the square root of the weight
    relative to the largest: 1.5/1.0/0.7 → 1.0/0.82/0.68."""
    return (weight / top) ** SCOPE_WEIGHT_SHARPNESS if top > 0 else 1.0


def rank(
    stores: Sequence[ScopeStore],
    query: str,
    qvec: np.ndarray | None,
    *,
    limit: int,
    weights: dict[str, float],
    filters: Filters,
    now: datetime,
    strength_weight: float = STRENGTH_WEIGHT,
    extra: Sequence[Sequence[tuple[str, float]]] = (),
    boosters: Sequence[tuple[Callable[..., float], float]] = (),
    context: dict[str, Any] | None = None,
) -> list[Candidate]:
    """One fusion over all scopes: BM25 and cosine lists are merged across scopes by raw score, fused once,
    multiplied by the query's cues (ranking.cue_factor: a memory spoken by someone the query names, or written in
    a period it names), then each candidate is boosted by its scope weight, its memory strength and ``boosters``:
    (factor, the largest factor it gives) pairs."""
    pool = max(ranking.DEFAULT_FUSION.pool, limit * 3)
    where: dict[str, ScopeStore] = {}
    bm_all: list[tuple[str, float]] = []
    vec_all: list[tuple[str, float]] = []
    for store in stores:
        light = store.summaries
        bm = store.index.bm25(query, pool * 2)
        vec = store.index.vector(qvec, pool * 2) if qvec is not None else []
        # The first `pool` admitted of each list (the filter stops there: half of a list is never looked at).
        bm_all += filters.first_admitted(bm, light, pool)
        vec_all += filters.first_admitted(vec, light, pool)
        where.update(dict.fromkeys([k for k, _ in bm[: pool * 2]], store))
        where.update(dict.fromkeys([k for k, _ in vec[: pool * 2]], store))
    ranking.best_first(bm_all)
    ranking.best_first(vec_all)
    bm_pos = {k: (i + 1, s) for i, (k, s) in enumerate(bm_all)}
    vec_pos = {k: (i + 1, s) for i, (k, s) in enumerate(vec_all)}
    top_weight = max((weights.get(s.scope.value, 1.0) for s in stores), default=1.0)
    # Extra ranked lists (graph traversal, associations…) join the fusion by reciprocal rank too.
    extra_lists = [[(k, sc) for k, sc in lst if k in where or _find(stores, k, where)] for lst in extra]
    extra_lists = [[(k, sc) for k, sc in lst if filters.admits(where[k].summaries[k])] for lst in extra_lists]
    scope_boost = {id(s): _weight_boost(weights.get(s.scope.value, 1.0), top_weight) for s in stores}
    fused_map = ranking.fused_scores(bm_all, vec_all)
    for lst in extra_lists:
        for i, (k, _) in enumerate(lst):
            fused_map[k] = fused_map.get(k, 0.0) + 1.0 / (ranking.DEFAULT_FUSION.k_rrf + i + 1)
    # The query's cues go into the fused score of every candidate up front (a regex and a date test each): folded
    # into the ceiling below instead, their largest factor (×2.5) let hundreds more candidates be scored.
    cues = ranking.query_cues(query)
    if cues.active:
        for k, f in fused_map.items():
            lt = where[k].summaries[k]
            factor = ranking.cue_factor(cues, lt.content, lt.created_at)
            if factor != 1.0:
                fused_map[k] = f * factor
    # A candidate's boost is at most `ceiling` (strength's factor is at most 1; each booster's at most its
    # `most`), so once a scored candidate beats every fused score left times that, nothing after can pass it:
    # of the ~350 candidates of a recall at 15k, only those that could still reach the answer are scored. The
    # slack keeps the bound above a product rounded differently.
    ceiling = max(scope_boost.values(), default=1.0) * max(1.0, 1.0 - strength_weight) * (1.0 + 1e-9)
    for _, most in boosters:
        ceiling *= max(0.0, most)
    boosts: dict[str, float] = {}
    strengths: dict[str, float] = {}
    ctx = context or {}

    def scored(key: str, fused: float) -> float:
        store = where[key]
        lt = store.summaries[key]
        strength = memory_strength(
            lt.importance, lt.half_life_days, lt.access_count, lt.last_accessed_at, now
        )
        strengths[key] = strength
        boost = scope_boost[id(store)] * ((1.0 - strength_weight) + strength_weight * min(1.0, strength))
        for booster, most in boosters:
            boost *= max(0.0, min(most, booster(key, store, lt, ctx)))
        boosts[key] = boost
        return fused * boost

    def best_final() -> Iterator[tuple[str, float]]:
        """(key, final score), best first and ties by key, as a sort of every candidate would give them."""
        held: list[tuple[float, str]] = []  # (-final, key): a heap, best first
        for key, fused in ranking.best_first(list(fused_map.items())):
            bound = fused * ceiling
            while held and -held[0][0] > bound:
                neg, k = heapq.heappop(held)
                yield k, -neg
            heapq.heappush(held, (-scored(key, fused), key))
        while held:
            neg, k = heapq.heappop(held)
            yield k, -neg

    def candidates() -> Iterator[Candidate]:  # built as dedup asks for them: it stops after `limit` kept
        for key, final in best_final():
            store = where[key]
            b, v = bm_pos.get(key), vec_pos.get(key)
            yield Candidate(
                store=store,
                key=key,
                light=store.summaries[key],
                bm25=b[1] if b else None,
                bm25_rank=b[0] if b else None,
                vector=v[1] if v else None,
                vector_rank=v[0] if v else None,
                fused=final / boosts[key] if boosts[key] else final,
                scope_weight=weights.get(store.scope.value, 1.0),
                strength=strengths[key],
                final=final,
            )

    return dedup(candidates(), limit)


def _find(stores: Sequence[ScopeStore], key: str, where: dict[str, ScopeStore]) -> bool:
    for store in stores:
        if key in store.summaries:
            where[key] = store
            return True
    return False


SCOPE_RANK = {"session": 1, "project": 2, "user": 3}
LOWER_WINS_AT = 2.0  # a lower scope's copy wins only when at least twice as strong


def keeps_first(a: Candidate, b: Candidate) -> bool:
    """The same memory in two scopes keeps the higher scope's copy unless the
    lower one is at least twice as strong; within one scope, the stronger."""
    ra, rb = SCOPE_RANK[a.scope], SCOPE_RANK[b.scope]
    if ra == rb:
        return a.strength >= b.strength
    if ra > rb:
        return not b.strength >= a.strength * LOWER_WINS_AT
    return a.strength >= b.strength * LOWER_WINS_AT


def dedup(cands: Iterable[Candidate], limit: int) -> list[Candidate]:
    """Same memory in two scopes (one promoted from the other, or cosine > 0.9): keep one (`keeps_first`),
    note where the others were and merge their tags into it."""
    kept: list[Candidate] = []
    kept_vecs: list[np.ndarray | None] = []
    for cand in cands:
        cand.tags = list(cand.light.tags)
        vec = cand.store.index.embedding(cand.key)
        dup_of = None
        for i, other in enumerate(kept):
            if other.store is cand.store:
                continue  # within a scope, exact duplicates are merged at write time; near ones may differ
            same_hash = other.light.content_hash == cand.light.content_hash
            ov = kept_vecs[i]
            near = vec is not None and ov is not None and float(np.dot(vec, ov)) > DEDUP_COSINE
            if same_hash or near:
                dup_of = i
                break
        if dup_of is None:
            kept.append(cand)
            kept_vecs.append(vec)
            if len(kept) >= limit:
                break
            continue
        other = kept[dup_of]
        tags = list(dict.fromkeys([*other.tags, *cand.tags]))
        if not keeps_first(other, cand):
            cand.also_in = [*other.also_in, f"{other.scope}:{other.key}"]
            cand.final = max(cand.final, other.final)
            kept[dup_of], kept_vecs[dup_of] = cand, vec
            cand.tags = tags
        else:
            other.also_in.append(f"{cand.scope}:{cand.key}")
            other.tags = tags
    kept.sort(key=lambda c: (-c.final, c.key))
    return kept[:limit]
