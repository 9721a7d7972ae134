"""Hebbian associations between memories: recalled or used together → +0.1 (capped at 1),
−0.01 a day without co-activation, pruned below a threshold (synaptic homeostasis). Recall can spread one
step along strong edges. Also the per-session working memory limit (7 ± 2; the weakest spill to episodic)."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..collector import paused_collector
from ..memory.scoring import memory_strength
from ..models import Association
from ..retrieval.ranking import best_first
from ..storage import ScopeStore, graph_tables
from .base import MemoryCore, api, rid, short_hash, state

COACTIVATION = 0.1
DECAY_PER_DAY = 0.01
PRUNE_BELOW = 0.05
SPREAD_MIN_WEIGHT = 0.3  # only strong edges carry activation
# spread_booster's largest factor: 1 + an activation of w / (1 + rank), and co-activation keeps w at most 1.
SPREAD_BOOST_MOST = 2.0
COACTIVATE_TOP = 3  # the first few results of a recall are what the agent reads together
WORKING_CAPACITY = 7
WORKING_BOUNDS = (5, 9)
ADJACENCY_QUERY = (
    "RETURN encoding::json::encode((SELECT VALUE [<string> record::id(in), <string> record::id(out), "
    "weight] FROM associated_with))"
)


def adjacency(core: MemoryCore, store: ScopeStore) -> dict[str, dict[str, float]]:
    st = state(core).of(store)
    if st.adjacency is None:
        adj: dict[str, dict[str, float]] = {}
        # One JSON text parsed by the C json module: as rows, every edge's two record ids went through the SDK's
        # pure-Python CBOR decoder, slowing the first recall after a start.
        text = store.q1(ADJACENCY_QUERY)
        with paused_collector():
            for a, b, w in json.loads(text) if text else []:
                adj.setdefault(a, {})[b] = float(w)
                adj.setdefault(b, {})[a] = float(w)
        st.adjacency = adj
    return st.adjacency


def coactivate(
    core: MemoryCore,
    store: ScopeStore,
    keys: Sequence[str],
    delta: float = COACTIVATION,
    kind: str = "coactivation",
    *,
    defer: bool = False,
) -> int:
    keys = list(dict.fromkeys(keys))
    pairs: list[dict[str, Any]] = []
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            lo, hi = sorted((a, b))
            pairs.append(
                {
                    "id": rid("associated_with", short_hash("assoc", lo, hi)),
                    "a": rid("memory", lo),
                    "b": rid("memory", hi),
                    "lo": lo,
                    "hi": hi,
                }
            )
    if not pairs:
        return 0
    # After a recall the edges are held and written summed with the access counts; the in-memory adjacency
    # changes now.
    graph_tables.coactivate(
        store, [{k: p[k] for k in ("id", "a", "b")} for p in pairs], delta, core.now(), kind, hold=defer
    )
    adj = adjacency(core, store)
    for p in pairs:
        w = min(1.0, adj.get(p["lo"], {}).get(p["hi"], 0.0) + delta)
        adj.setdefault(p["lo"], {})[p["hi"]] = w
        adj.setdefault(p["hi"], {})[p["lo"]] = w
    return len(pairs)


def after_recall(core: MemoryCore, result: Any, winners: Sequence[Any]) -> None:
    _spread.scores = {}  # this recall's activation must not leak into the next one
    by_store: dict[int, tuple[ScopeStore, list[str]]] = {}
    for c in list(winners)[:COACTIVATE_TOP]:
        by_store.setdefault(id(c.store), (c.store, []))[1].append(c.key)
    for store, keys in by_store.values():
        if len(keys) > 1:
            coactivate(core, store, keys, defer=True)


def decay(
    core: MemoryCore,
    store: ScopeStore,
    *,
    now: datetime | None = None,
    per_day: float = DECAY_PER_DAY,
    prune_below: float = PRUNE_BELOW,
    dry_run: bool = False,
) -> int:
    """Apply the daily decay since the last pass, then prune what fell below the threshold. Returns pruned."""
    now = now or core.now()
    if dry_run:
        rows = (
            store.q1(
                "SELECT VALUE weight - $pd * duration::secs($now - decayed_at) / 86400.0 FROM associated_with",
                {"pd": per_day, "now": now},
            )
            or []
        )
        return sum(1 for w in rows if w < prune_below)
    pruned = store.graph.decay_associations(per_day, now, prune_below)
    state(core).of(store).adjacency = None
    return pruned


_spread = threading.local()


def spread_ranker(
    core: MemoryCore, stores: Sequence[ScopeStore], query: str, qvec: Any, filters: Any
) -> list[tuple[str, float]]:
    """One step of spreading activation from the query's best direct matches along strong edges.
    The list joins the fusion (so a memory outside the candidate pool can enter it), and
    `spread_booster` scales the same memories by 1 + activation, because one extra reciprocal rank
    (1/61) is too small to lift anything past the direct matches."""
    out: dict[str, float] = {}
    _spread.scores = out
    for store in stores:
        adj = adjacency(core, store)
        if not adj:
            continue
        seeds = store.index.vector(qvec, 5) if qvec is not None else store.index.bm25(query, 5)
        seed_keys = {k for k, _ in seeds}
        for rank, (k, _s) in enumerate(seeds):
            for other, w in adj.get(k, {}).items():
                if w < SPREAD_MIN_WEIGHT or other in seed_keys:
                    continue
                lt = store.summaries.get(other)
                if lt is None or not filters.admits(lt):
                    continue
                out[other] = max(out.get(other, 0.0), w / (1 + rank))
    return best_first(list(out.items()))


def spread_booster(
    core: MemoryCore, key: str, store: ScopeStore, light: Any, context: dict[str, Any]
) -> float:
    # Filled by spread_ranker in this same thread a moment earlier, for this recall.
    scores: dict[str, float] = getattr(_spread, "scores", {})
    return 1.0 + scores.get(key, 0.0)


@api
def coactivate_memories(
    core: MemoryCore, memory_ids: list[str], project: str | None = None, session: str | None = None
) -> int:
    """Memories the agent used together: each pair in the same scope gains +0.1. Returns pairs touched."""
    groups: dict[int, tuple[ScopeStore, list[str]]] = {}
    for mid in memory_ids:
        store, key = core.scopes.locate(mid, project, session)
        groups.setdefault(id(store), (store, []))[1].append(key)
    return sum(coactivate(core, s, ks) for s, ks in groups.values())


@api
def memory_associations(
    core: MemoryCore,
    memory_id: str,
    project: str | None = None,
    session: str | None = None,
    min_weight: float = 0.0,
) -> list[Association]:
    """The memories associated with one memory, strongest first: {id, weight, content}."""
    store, key = core.scopes.locate(memory_id, project, session)
    adj = adjacency(core, store).get(key, {})
    out = []
    for other, w in sorted(adj.items(), key=lambda t: -t[1]):
        if w >= min_weight:
            lt = store.summaries.get(other)
            out.append(Association(id=other, weight=round(w, 4), content=lt.content if lt else None))
    return out


def working_capacity(core: MemoryCore) -> int:
    lo, hi = WORKING_BOUNDS
    return max(lo, min(hi, int(core.param("working_memory_capacity", WORKING_CAPACITY))))


def enforce_working_capacity(
    core: MemoryCore,
    store: ScopeStore,
    later: set[str] | frozenset[str] = frozenset(),
) -> list[str]:
    """Working memory holds at most 7 ± 2 items; the weakest spill to episodic memory. ``later``: memories of
    the chunk being written that come after the one just stored (not there yet, as one-by-one writes see it)."""
    cap = working_capacity(core)
    working = [
        (k, lt)
        for k, lt in store.summaries.items()
        if lt.memory_type == "working" and lt.status in ("created", "active") and k not in later
    ]
    if len(working) <= cap:
        return []
    now = core.now()
    # Weakest first; the newest item never spills (it was just put there on purpose).
    newest = max(working, key=lambda t: (t[1].created_at, t[0]))[0]
    ranked = sorted(
        (t for t in working if t[0] != newest),
        key=lambda t: (
            memory_strength(
                t[1].importance, t[1].half_life_days, t[1].access_count, t[1].last_accessed_at, now
            ),
            t[1].created_at,
        ),
    )
    spilled = []
    half = float(core.half_lives(core.project_root_of(store))["episodic"])
    for k, _lt in ranked[: len(working) - cap]:
        row = store.get(k) or {}
        store.update_memory(
            k,
            {
                "memory_type": "episodic",
                "half_life_days": half,
                "metadata": {**row.get("metadata", {}), "spilled_from_working": now.isoformat()},
            },
        )
        spilled.append(k)
    return spilled
