"""Result shapes of the self-organising layer's API: graph, consolidation, contradictions, evolution, episodes."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from .memory import Memory
from .sparse import Sparse

ENTITY_TYPES = (
    "file",
    "library",
    "tool",
    "command",
    "error",
    "function",
    "class",
    "url",
    "concept",
    "pattern",
    "convention",
    "person",
    "project",
    "decision",
)
EntityType = Literal[
    "file",
    "library",
    "tool",
    "command",
    "error",
    "function",
    "class",
    "url",
    "concept",
    "pattern",
    "convention",
    "person",
    "project",
    "decision",
]
RELATION_TYPES = (
    "uses",
    "depends_on",
    "is_a",
    "part_of",
    "causes",
    "fixes",
    "contradicts",
    "replaces",
    "related_to",
    "tested_by",
    "configured_by",
    "imports",
)
RelationType = Literal[
    "uses",
    "depends_on",
    "is_a",
    "part_of",
    "causes",
    "fixes",
    "contradicts",
    "replaces",
    "related_to",
    "tested_by",
    "configured_by",
    "imports",
]


class EntityIn(BaseModel):
    model_config = {"extra": "forbid"}

    name: str = Field(min_length=1, max_length=300)
    entity_type: EntityType = "concept"
    description: str | None = Field(None, max_length=2000)


class GraphEntity(BaseModel):
    id: str
    name: str
    entity_type: str
    category: str | None = None
    description: str = ""
    mention_count: int = 0
    confidence: float = 0.7
    scope: str
    # The newest memories naming it (at most graph_api.MENTIONS_SHOWN), oldest first; mention_count has how many do.
    memory_ids: list[str] = Field(default_factory=list)


class GraphRelation(BaseModel):
    id: str
    source: str  # entity id
    target: str
    source_name: str = ""
    target_name: str = ""
    relation_type: str
    weight: float
    confidence: float
    evidence: list[str] = Field(default_factory=list)
    valid_from: datetime | None = None
    invalid_at: datetime | None = None
    scope: str


class GraphResult(BaseModel):
    query: str | None = None
    entities: list[GraphEntity] = Field(default_factory=list)
    relations: list[GraphRelation] = Field(default_factory=list)
    memory_ids: list[str] = Field(default_factory=list)


class AddEntitiesResult(BaseModel):
    created: list[GraphEntity] = Field(default_factory=list)
    merged: list[GraphEntity] = Field(default_factory=list)  # matched an existing entity (name or cosine)


class RelateResult(BaseModel):
    relation: GraphRelation
    strengthened: bool
    contradictions: list[str] = Field(default_factory=list)


class Proposal(BaseModel):
    content: str
    memory_type: str
    tags: list[str] = Field(default_factory=list)
    importance: float = 0.5
    access_count: int = 0
    source: Literal["extractive", "agent", "promotion"] = "extractive"


class ConsolidationItem(BaseModel):
    id: str
    reason: str
    priority: float
    risk: float
    status: str
    created_at: datetime
    topic: str | None = None
    scope: str
    sources: list[Memory] = Field(default_factory=list)
    proposal: Proposal | None = None
    needs_review: bool = True
    evidence: list[str] = Field(default_factory=list)  # why these memories were grouped


class ConsolidationCounts(BaseModel):
    """True totals of a project's consolidation queue."""

    pending: int = 0
    needs_review: int = 0  # pending at or above the auto-approval risk: a person or the agent decides
    completed: int = 0
    rejected: int = 0
    failed: int = 0
    pending_by_reason: dict[str, int] = Field(default_factory=dict)


class ConsolidationOutcome(BaseModel):
    item_id: str
    status: str
    memory: Memory | None = None  # the new (merged) memory, if one was written
    sources: dict[str, str] = Field(default_factory=dict)  # source id → its new status
    message: str = ""


class Contradiction(BaseModel):
    id: str
    kind: str
    a: Memory
    b: Memory
    evidence: list[str] = Field(default_factory=list)
    detected_at: datetime
    status: str
    resolution: str | None = None
    scope: str
    suggested: str | None = None  # keep_a / keep_b: the newer statement, when time says which holds
    confidence: float = 0.5  # the detector's: the strongest cases come first
    decided_by: str | None = None  # user, agent, or policy (resolved without asking)
    resolved_at: datetime | None = None


class ContradictionCounts(BaseModel):
    """True totals of a project's contradictions (and its user and session scopes')."""

    open: int = 0
    resolved: int = 0
    resolved_without_asking: int = 0
    open_by_kind: dict[str, int] = Field(default_factory=dict)


class BulkOutcome(BaseModel):
    """What a bulk decision did: the items decided (each undoable on its own) and a sentence saying so."""

    ids: list[str] = Field(default_factory=list)
    count: int = 0
    message: str = ""


class ContradictionOutcome(BaseModel):
    id: str
    resolution: str
    kept: list[str] = Field(default_factory=list)
    superseded: list[str] = Field(default_factory=list)
    merged: Memory | None = None
    message: str = ""


class ParamProposal(BaseModel):
    key: str
    current: Any
    proposed: Any
    reason: str
    overridden_by_manual: bool = False


class UsageStat(BaseModel):
    key: str
    judged: int
    useful: int
    rate: float


class EvolutionReport(BaseModel):
    log_entries: int
    judged_entries: int
    min_entries: int
    enough_data: bool
    dry_run: bool
    strategy_stats: list[UsageStat] = Field(default_factory=list)
    scope_stats: list[UsageStat] = Field(default_factory=list)
    type_stats: list[UsageStat] = Field(default_factory=list)
    proposals: list[ParamProposal] = Field(default_factory=list)
    applied: list[str] = Field(default_factory=list)
    message: str = ""


class ReflectionReport(BaseModel):
    dry_run: bool
    session_count: int
    levels: list[str]
    queued: dict[str, int] = Field(default_factory=dict)
    auto_approved: int = 0
    pending_review: int = 0
    contradictions_open: int = 0
    entities_backfilled: int = 0
    entities_merged: int = 0
    entities_pruned: int = 0
    edges_invalidated: int = 0
    associations_pruned: int = 0
    insights: list[str] = Field(default_factory=list)
    evolution: EvolutionReport | None = None
    budget_exhausted: bool = False
    took_ms: float = 0.0


class EpisodeInfo(BaseModel):
    id: str
    stream: str
    started_at: datetime
    ended_at: datetime | None = None
    boundary_type: str
    boundary_trigger: str | None = None
    end_reason: str | None = None
    memory_count: int = 0


class PeekSample(BaseModel):
    id: str
    scope: str
    memory_type: str
    content: str
    created_at: datetime
    importance: float


class PeekResult(BaseModel):
    total: int
    by_type: dict[str, int]
    by_status: dict[str, int]
    by_scope: dict[str, int]
    top_tags: list[tuple[str, int]]
    date_range: tuple[datetime, datetime] | None
    samples: list[PeekSample]
    focus: str | None = None


class Partition(BaseModel):
    key: str
    count: int
    date_range: tuple[datetime, datetime] | None
    avg_importance: float


class AggregateInput(BaseModel):
    source: str
    memories: list[Any]
    local_score: float | None = None


class AggregateItem(BaseModel):
    id: str
    content: str
    score: float
    sources: list[str]
    memory: dict[str, Any]


class RetrievalLogEntry(BaseModel):
    id: str
    query: str
    strategy: str
    query_type: str | None = None
    results_count: int = 0
    rank: int | None = None
    was_useful: bool | None = None
    created_at: datetime


class Association(BaseModel):
    """A memory used together with another one; ``content`` is None when the other memory is gone."""

    id: str
    weight: float
    content: str | None


class EvolutionChange(Sparse):
    """One row of the append-only evolution history: a parameter change, or the rollback of one."""

    id: str
    key: str
    old_value: dict[str, Any] | None = None  # {"v": value}
    new_value: dict[str, Any] | None = (
        None  # {"v": value} or, for a rollback, {"v": value, "rollback_of": id}
    )
    reason: str = ""
    log_entries: int = 0
    created_at: datetime


class Rollback(BaseModel):
    key: str
    restored: Any
    undid: str  # the evolution_history id of the change undone


class OrganiseMaintenance(BaseModel):
    associations_pruned: int
    proposals_filled: int
    entities_backfilled: int
