"""What the agent's exploration tools answer: ``engram_explore`` (the stores' manifest) and ``recall_skill``."""

from __future__ import annotations

from typing import Any

from .memory import QueryResult
from .sparse import Sparse


class ExploredStore(Sparse):
    """One store at the depth asked: counts (0), tables (1), one table's schema (2), sample rows (3)."""

    scope: str
    database: str
    memories: int
    by_type: dict[str, int] | None = None
    by_status: dict[str, int] | None = None
    tables: dict[str, int] | None = None
    error: str | None = None  # the table asked for is not in this store
    table: str | None = None
    fields: dict[str, Any] | None = None
    indexes: dict[str, Any] | None = None
    events: list[str] | None = None
    samples: list[Any] | None = None


class ExploreResult(Sparse):
    depth: int
    scopes: list[ExploredStore]
    next: str  # what the next depth shows


class SkillMatch(Sparse):
    id: str
    scope: str
    content: str
    surql: str
    notes: Any = None  # free-form, from the memory's metadata
    execution_count: int = 0
    score: float


class SkillRun(Sparse):
    id: str
    result: QueryResult
    took_ms: float
    execution_count: int
    promotion_candidate: bool


class SkillRecall(Sparse):
    task: str
    skills: list[SkillMatch]
    message: str | None = None  # how to store a skill, when none matched
    executed: SkillRun | None = None
