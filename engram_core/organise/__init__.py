"""The self-organising layer: knowledge graph, contradictions, consolidation, episodes, associations,
self-tuning and the recursive tools. Nothing here needs an LLM; where a summary needs judgement the agent
supplies it through the API (`propose_consolidation_summary`, `resolve_contradiction`).

`install(service)` wires the layer into a service through the core's extension points:
- after_store: entities + mentions + relations, episode assignment, contradiction candidates, working-memory
  limit (one database round trip unless something is found);
- after_recall: Hebbian co-activation of the top results;
- extra_rankers: graph traversal and one-step association spreading, fused by RRF;
- boosters: the cross-boundary episode penalty, and a discount on memories already consolidated into another.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

import numpy as np

from ..service import EngramService
from ..store import Light, ScopeStore
from . import (
    associations,
    consolidation,
    contradictions,
    episodes,
    evolution,
    graph,
    recursive,
)
from .base import ORGANISE_API, state

__all__ = ["ORGANISE_API", "install"]

log = logging.getLogger(__name__)
CONSOLIDATED_DISCOUNT = 0.6  # the memory it was merged into carries the content now


def before_store(service: EngramService, store: ScopeStore, key: str, fields: dict[str, Any], vec: Any) -> None:
    """The episode is known before the row is written, so the row is written once with it."""
    if vec is not None:
        norm = float(np.linalg.norm(vec))
        vec = np.asarray(vec, dtype=np.float32) / norm if norm > 0 else None
    ep = episodes.assign(service, store, fields, vec)
    if ep is not None:
        fields["episode_id"] = ep
        state(service).of(store).new_episode[key] = ep


def after_store(service: EngramService, store: ScopeStore, key: str, fields: dict[str, Any]) -> None:
    vec = store.index.embedding(key)
    on_row = state(service).of(store).new_episode.pop(key, None)
    ep = on_row or episodes.assign(service, store, fields, vec)
    rels, live = graph.write_extraction(service, store, key, fields.get("content", ""), ep,
                                        episode_on_row=on_row is not None)
    if ep is not None:
        lt = store.light.get(key)
        if lt is not None:
            lt.episode_id = ep  # the mirror row was read before the episode was known
    if live:
        contradictions.check_relations(service, store, key, rels, live)
    if fields.get("memory_type") != "working":
        contradictions.check_near(service, store, key, fields.get("content", ""), vec,
                                  memory_type=fields.get("memory_type"))
    else:
        associations.enforce_working_capacity(service, store)


def consolidated_booster(service: EngramService, key: str, store: ScopeStore, light: Light,
                         context: dict[str, Any]) -> float:
    return CONSOLIDATED_DISCOUNT if light.status == "consolidated" else 1.0


def install(service: EngramService) -> None:
    """Register the hooks on this service instance and expose the API functions as its methods."""
    if getattr(service, "_organise_installed", False):
        return
    state(service)
    if getattr(service.settings, "organise", True):  # `organise: false` keeps only the tools
        service.before_store.append(before_store)
        service.after_store.append(after_store)
        service.after_recall.append(associations.after_recall)
        service.extra_rankers.extend([graph.graph_ranker, associations.spread_ranker])
        service.boosters.extend([episodes.boundary_booster, consolidated_booster, associations.spread_booster])
    for name, fn in ORGANISE_API.items():
        if not hasattr(service, name):
            setattr(service, name, functools.partial(fn, service))
    service._organise_installed = True  # type: ignore[attr-defined]


_ = (consolidation, evolution, recursive)
