"""The self-organising layer: knowledge graph, contradictions, consolidation, episodes, associations,
self-tuning and the recursive tools. Nothing here needs an LLM; where a summary needs judgement the agent
supplies it through the API (`propose_consolidation_summary`, `resolve_contradiction`).

`register(core)` wires the layer into a memory core through its extension points (core.Extensions):
- before_store: the episode and the entity list of a new memory, so its row is written once;
- after_store: for a chunk of new memories, entities + relations and episode assignment (one
  database round trip), contradiction candidates (one more if any), working-memory limit;
- after_recall: Hebbian co-activation of the top results;
- rankers: graph traversal and one-step association spreading, fused by RRF;
- boosters: the cross-boundary episode penalty, and a discount on memories already consolidated into another.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Boost, MemoryCore
from ..storage import MemorySummary, ScopeStore
from . import associations, consolidation_queue, contradictions, episodes, graph, subjects
from .base import state

__all__ = ["register"]

log = logging.getLogger(__name__)
CONSOLIDATED_DISCOUNT = 0.6  # the memory it was merged into carries the content now
MERGED_SOURCES = ("consolidation", "contradiction-merge")


def before_store(core: MemoryCore, store: ScopeStore, key: str, fields: dict[str, Any], vec: Any) -> None:
    """The episode and the entity list are known before the row is written, so the row is written once with them."""
    state(core).of(store).mentioned[key] = graph.list_into_row(fields)
    if vec is not None:
        norm = float(np.linalg.norm(vec))
        vec = np.asarray(vec, dtype=np.float32) / norm if norm > 0 else None
    ep = episodes.assign(core, store, fields, vec)
    if ep is not None:
        fields["episode_id"] = ep
        state(core).of(store).new_episode[key] = ep


def after_store(core: MemoryCore, store: ScopeStore, items: Sequence[tuple[str, dict[str, Any]]]) -> None:
    """A chunk of new memories (in the order written, already in the mirror): the episodes, entities and
    relations of all of them in one round trip, then their contradiction candidates in one more. Each
    memory is judged as if the chunk had been written one memory at a time (tests/test_ingest_batch.py)."""
    ss = state(core).of(store)
    plans: list[graph.Extraction | None] = []
    vecs = []
    for key, fields in items:
        vec = store.index.embedding(key)
        on_row = ss.new_episode.pop(key, None)
        ep = on_row or episodes.assign(core, store, fields, vec)
        plans.append(
            graph.plan_extraction(
                core,
                store,
                key,
                fields.get("content", ""),
                ep,
                episode_on_row=on_row is not None,
                mentioned=ss.mentioned.pop(key, None),
                list_on_row="entities" in fields,
            )
        )
        vecs.append(vec)
        if ep is not None:
            lt = store.summaries.get(key)
            if lt is not None:
                lt.episode_id = ep  # the mirror row was read before the episode was known
    vocab = subjects.vocabulary(core, store, exclude={k for k, _ in items})
    writes, ss.writes = ss.writes, []
    todo = [p for p in plans if p is not None]
    lives = iter(graph.write_extractions(core, store, todo, writes) if todo or writes else [])
    found: list[contradictions.Candidate] = []
    duplicates: list[tuple[str, str, float, str]] = []
    superseded: set[str] = set()
    keys = [k for k, _ in items]
    later = [set(keys[i + 1 :]) for i in range(len(keys))]  # each memory sees the chunk as written one by one
    checked = [fields.get("memory_type") != "working" for _, fields in items]
    nears = contradictions.nearest_for_check(
        store, [v if c else None for v, c in zip(vecs, checked, strict=True)], later
    )
    for i, ((key, fields), plan, near) in enumerate(zip(items, plans, nears, strict=True)):
        live = next(lives) if plan is not None else []
        if live:
            found += contradictions.check_relations(core, store, key, plan.rels if plan else [], live)
        vocab.learn([fields.get("content", "")])  # as if the chunk were written one memory at a time
        if checked[i]:
            near_found = contradictions.check_near(
                core,
                store,
                key,
                fields.get("content", ""),
                near,
                memory_type=fields.get("memory_type"),
                created_at=fields.get("created_at"),
                vocab=vocab,
                gone=superseded,
            )
            found += near_found.contradictions
            # A memory this chunk supersedes leaves recall at the chunk's end; the memories after it in the
            # chunk must not meet it, as they would not had each been written alone.
            superseded |= {
                c.b if c.suggested == "keep_a" else c.a for c in near_found.contradictions if c.strong
            }
            if (
                fields.get("source") not in MERGED_SOURCES
            ):  # a merge's result duplicates its sources by design
                duplicates += [(key, other, cos, why) for other, cos, why in near_found.duplicates]
        else:
            associations.enforce_working_capacity(core, store, later=later[i])
    queued = contradictions.queue(store, found)
    contradictions.settle_strong(core, store, found, queued)
    if duplicates:
        consolidation_queue.propose_duplicates(core, store, duplicates)


def consolidated_booster(
    core: MemoryCore, key: str, store: ScopeStore, light: MemorySummary, context: dict[str, Any]
) -> float:
    return CONSOLIDATED_DISCOUNT if light.status == "consolidated" else 1.0


_REGISTERED: weakref.WeakSet[MemoryCore] = weakref.WeakSet()


def register(core: MemoryCore) -> None:
    """Register the layer's hooks, rankers and boosters on this core (once); ``organise: false`` in the
    settings keeps only the tools (the API functions, which the service serves either way)."""
    if core in _REGISTERED:
        return
    _REGISTERED.add(core)
    if getattr(core.settings, "organise", True):
        core.extensions.register(
            before_store=before_store,
            after_store=after_store,
            after_recall=associations.after_recall,
            rankers=[graph.graph_ranker, associations.spread_ranker],
            boosters=[
                Boost(episodes.boundary_booster, most=1.0),
                Boost(consolidated_booster, most=1.0),
                Boost(associations.spread_booster, most=associations.SPREAD_BOOST_MOST),
            ],
        )
