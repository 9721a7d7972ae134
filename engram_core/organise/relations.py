"""Relations the agent states (``relate_entities``): written into the graph, then checked against the live
relations sharing an endpoint. Above both graph.py and contradictions.py, which do not import each other's
callers: contradictions reads the graph's keys, and the graph knows nothing of contradictions."""

from __future__ import annotations

from ..models import RelateResult, RelationType
from .base import EngramError, MemoryCore, api
from .contradictions import check_relations, queue
from .graph_api import state_relation


@api
def relate_entities(
    core: MemoryCore,
    source: str,
    target: str,
    relation_type: RelationType,
    evidence: str | None = None,
    confidence: float = 0.8,
    scope: str = "project",
    project: str | None = None,
    session: str | None = None,
) -> RelateResult:
    """A relation the agent states. `evidence` is a memory id (linked) or free text (kept as given).
    A repeated relation strengthens (weight +0.1, confidence +0.05) rather than duplicating."""
    if not 0.0 <= confidence <= 1.0:
        raise EngramError("confidence must be between 0 and 1")
    store = core.scopes.primary(project, session, scope)
    stated = state_relation(core, store, source, target, relation_type, evidence, confidence)
    stated.result.contradictions = queue(
        store, check_relations(core, store, stated.evidence_key, [stated.relation], stated.live)
    )
    return stated.result
