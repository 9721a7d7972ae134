"""The fusion over the scopes (hybrid.rank) on a real store and the real model: the candidates scored only while
they could still reach the answer give the order a sort of every candidate gives."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime

import pytest

from engram_core.core import Boost
from engram_core.memory.scoring import memory_strength
from engram_core.models import MemoryIn
from engram_core.retrieval import hybrid, ranking
from engram_core.service import EngramService
from engram_core.storage import MemorySummary, ScopeStore

TOPICS = [
    "deploy",
    "cache",
    "auth token",
    "migration",
    "flaky test",
    "vite build",
    "session store",
    "retry loop",
]


@pytest.fixture
def filled(env: tuple[EngramService, str]) -> Iterator[tuple[EngramService, str, list[ScopeStore]]]:
    svc, p = env
    rng = random.Random(5)
    items = [
        MemoryIn(
            content=f"Note {i}: the {rng.choice(TOPICS)} of service {i % 7} broke after the "
            f"{rng.choice(TOPICS)} change; fixed by {rng.choice(TOPICS)} [/] \\ ✓",
            importance=rng.choice([0.2, 0.5, 0.9]),
            tags=[rng.choice(["a", "b", "c"])],
        )
        for i in range(90)
    ]
    svc.store_many(items, project=p)
    yield svc, p, svc.scopes.stores("all", p, None)


def _factors(stores: list[ScopeStore], seed: int, most: float) -> dict[str, float]:
    rng = random.Random(seed)
    return {k: rng.uniform(0.0, most) for s in stores for k in sorted(s.summaries)}


def _brute_force(
    svc: EngramService,
    stores: list[ScopeStore],
    query: str,
    limit: int,
    boosts: dict[str, float],
    now: datetime,
) -> list[tuple[str, float]]:
    """Every candidate scored, then sorted: what rank gave before it scored only the ones that could win."""
    filters = hybrid.Filters(statuses={"created", "active"})
    qvec = svc.embedder.embed([query])[0]
    weights = svc.scope_weights(None)
    pool = max(100, limit * 3)
    where: dict[str, ScopeStore] = {}
    bm_all: list[tuple[str, float]] = []
    vec_all: list[tuple[str, float]] = []
    for store in stores:
        bm = store.index.bm25(query, pool * 2)
        vec = store.index.vector(qvec, pool * 2)
        bm_all += [(k, s) for k, s in bm if k in store.summaries and filters.admits(store.summaries[k])][
            :pool
        ]
        vec_all += [(k, s) for k, s in vec if k in store.summaries and filters.admits(store.summaries[k])][
            :pool
        ]
        for k, _ in [*bm, *vec]:
            where[k] = store
    ranking.best_first(bm_all)
    ranking.best_first(vec_all)
    fused = dict(ranking.fuse(bm_all, vec_all))
    top = max(weights.get(s.scope.value, 1.0) for s in stores)
    out = []
    for key, f in fused.items():
        lt = where[key].summaries[key]
        strength = memory_strength(
            lt.importance, lt.half_life_days, lt.access_count, lt.last_accessed_at, now
        )
        boost = (weights.get(where[key].scope.value, 1.0) / top) ** 0.5 * (
            (1.0 - hybrid.STRENGTH_WEIGHT) + hybrid.STRENGTH_WEIGHT * min(1.0, strength)
        )
        boost *= boosts.get(key, 1.0)
        out.append((key, f * boost))
    return ranking.best_first(out)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rank_scores_few_candidates_and_orders_as_scoring_all(
    filled: tuple[EngramService, str, list[ScopeStore]], seed: int
) -> None:
    svc, _p, stores = filled
    most = 2.0
    factors = _factors(stores, seed, most)
    asked: list[str] = []

    def booster(key: str, store: ScopeStore, light: MemorySummary, context: dict[str, object]) -> float:
        asked.append(key)
        return factors[key]

    query = "the deploy cache broke after the auth token change"
    qvec = svc.embedder.embed([query])[0]
    now = svc.now()
    got = hybrid.rank(
        stores,
        query,
        qvec,
        limit=10,
        weights=svc.scope_weights(None),
        filters=hybrid.Filters(statuses={"created", "active"}),
        now=now,
        boosters=[(booster, most)],
    )
    expected = _brute_force(svc, stores, query, 10, factors, now)
    assert [(c.key, c.final) for c in got] == expected[:10]
    # Scored only while a candidate could still reach the answer: far fewer than the candidates.
    assert len(set(asked)) == len(asked)
    assert len(asked) < len(expected) / 2, (len(asked), len(expected))


def test_a_factor_above_its_most_is_cut_to_it(filled: tuple[EngramService, str, list[ScopeStore]]) -> None:
    svc, _p, stores = filled
    query = "flaky test in the retry loop"
    qvec = svc.embedder.embed([query])[0]
    args = {
        "limit": 5,
        "weights": svc.scope_weights(None),
        "filters": hybrid.Filters(statuses={"active", "created"}),
        "now": svc.now(),
    }
    plain = hybrid.rank(stores, query, qvec, **args)  # type: ignore[arg-type]
    # A booster claiming at most 1.0 that gives 50 to one memory: cut to 1.0, the order is the plain one.
    target = plain[-1].key
    over = hybrid.rank(
        stores, query, qvec, boosters=[(lambda k, *_: 50.0 if k == target else 1.0, 1.0)], **args
    )  # type: ignore[arg-type]
    assert [c.key for c in over] == [c.key for c in plain]


def test_registered_boosters_declare_their_largest_factor(env: tuple[EngramService, str]) -> None:
    svc, _p = env
    boosts = svc.extensions.boosters
    assert boosts and all(isinstance(b, Boost) and b.most >= 1.0 for b in boosts)


def test_first_admitted_skips_unknown_and_filtered(
    filled: tuple[EngramService, str, list[ScopeStore]],
) -> None:
    _svc, _p, stores = filled
    light = stores[0].summaries
    keys = sorted(light)
    ranked = [("nope", 9.0), *[(k, 1.0 - i / 1000) for i, k in enumerate(keys)]]
    only_a = hybrid.Filters(statuses={"created", "active"}, tags={"a"})
    got = only_a.first_admitted(ranked, light, 5)
    assert len(got) == 5 and all("a" in light[k].tags for k, _ in got)
    assert got == [(k, s) for k, s in ranked if k in light and "a" in light[k].tags][:5]
    assert hybrid.Filters(statuses={"archived"}).first_admitted(ranked, light, 5) == []
    assert hybrid.Filters(statuses={"created", "active"}).first_admitted(ranked, light, 0) == []
