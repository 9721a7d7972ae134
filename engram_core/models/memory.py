"""The shapes every layer agrees on: validated at the edges, plain JSON over the daemon socket."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ..redaction import redact_text

MAX_CONTENT_CHARS = 100_000
MAX_TAGS = 64


class MemoryType(StrEnum):
    episodic = "episodic"
    semantic = "semantic"
    procedural = "procedural"
    working = "working"


class Scope(StrEnum):
    session = "session"
    project = "project"
    user = "user"


class Status(StrEnum):
    created = "created"
    active = "active"
    consolidated = "consolidated"
    archived = "archived"
    forgotten = "forgotten"
    superseded = "superseded"


# Statuses recall returns unless asked otherwise; archived needs an explicit filter, forgotten never has content.
DEFAULT_RECALL_STATUSES = (Status.created, Status.active, Status.consolidated)


def _clean_tags(tags: list[str]) -> list[str]:
    out: list[str] = []
    for tag in tags:
        # redacted before it is lower-cased (AKIA… is only recognisable in upper case) or cut for an error message
        t = redact_text(tag).strip().lower()
        if not t:
            continue
        if len(t) > 64:
            raise ValueError(f"tag {t[:20]!r}… is longer than 64 characters")
        if t not in out:
            out.append(t)
    if len(out) > MAX_TAGS:
        raise ValueError(f"at most {MAX_TAGS} tags")
    return out


class MemoryIn(BaseModel):
    """A memory to store. Anything wrong here is refused before the store is touched."""

    model_config = {"extra": "forbid"}

    content: str = Field(max_length=MAX_CONTENT_CHARS)
    memory_type: MemoryType = MemoryType.semantic
    scope: Scope = Scope.project
    tags: list[str] = Field(default_factory=list)
    importance: float = Field(0.5, ge=0.0, le=1.0)
    confidence: float = Field(0.7, ge=0.0, le=1.0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str | None = Field(None, max_length=200)
    created_at: datetime | None = None

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("content is empty: give the text to remember")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str]) -> list[str]:
        return _clean_tags(v)

    @model_validator(mode="after")
    def _working_is_session_only(self) -> MemoryIn:
        if self.memory_type == MemoryType.working and self.scope != Scope.session:
            raise ValueError("working memories are session scratch space: use scope 'session'")
        return self


class MemoryPatch(BaseModel):
    """Fields a person or the agent may edit on an existing memory."""

    model_config = {"extra": "forbid"}

    content: str | None = Field(None, max_length=MAX_CONTENT_CHARS)
    tags: list[str] | None = None
    importance: float | None = Field(None, ge=0.0, le=1.0)
    confidence: float | None = Field(None, ge=0.0, le=1.0)
    memory_type: MemoryType | None = None
    pinned: bool | None = None
    metadata: dict[str, Any] | None = None
    # The user's own verdict (weight 0.10 of importance): 1.0 helpful, 0.5 partly, 0.0 not helpful.
    user_feedback: float | None = Field(None, ge=0.0, le=1.0)

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("content is empty: give the new text, or forget the memory instead")
        return v

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str] | None) -> list[str] | None:
        return None if v is None else _clean_tags(v)


class StatusChange(BaseModel):
    from_status: str | None = Field(None, alias="from")
    to_status: str = Field(alias="to")
    at: datetime
    reason: str | None = None

    model_config = {"populate_by_name": True}


class Memory(BaseModel):
    id: str
    scope: Scope
    content: str
    memory_type: MemoryType
    status: Status
    tags: list[str] = Field(default_factory=list)
    importance: float
    confidence: float = 0.7
    access_count: int = 0
    relevance_score: float = 0.0
    outcome_impact: float = 0.0
    user_feedback: float = 0.0
    half_life_days: float
    memory_strength: float = 0.0
    quality: float = 0.0
    pinned: bool = False
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    status_history: list[StatusChange] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str | None = None
    session_id: str | None = None
    episode_id: str | None = None
    promoted_from: str | None = None
    promotion_chain: list[str] = Field(default_factory=list)
    consolidated_into: str | None = None
    invalid_at: datetime | None = None


class StoreResult(BaseModel):
    action: Literal["created", "merged"]
    memory: Memory
    redactions: list[str] = Field(default_factory=list)
    message: str


class RecallScores(BaseModel):
    bm25: float | None = None
    bm25_rank: int | None = None
    vector: float | None = None
    vector_rank: int | None = None
    fused: float = 0.0
    scope_weight: float = 1.0
    strength: float = 0.0
    final: float = 0.0


class RecallHit(BaseModel):
    memory: Memory
    scores: RecallScores
    also_in: list[str] = Field(default_factory=list)


class RecallResult(BaseModel):
    query: str
    strategy: Literal["hybrid", "bm25"]
    degraded: str | None = None
    scope_weights: dict[str, float]
    hits: list[RecallHit]
    took_ms: float
    log_id: str | None = None


class ImportError_(BaseModel):
    line: int
    error: str


class ImportReport(BaseModel):
    stored: int
    merged: int
    failed: list[ImportError_]
    total_lines: int
    dates: Literal["keep", "age"] = "keep"
    dry_run: bool = False
    # What the next maintenance sweep would do to these memories (on their own): moves by status, and how many
    # are under the forget threshold (forgotten once archived for the grace period, unless recalled).
    next_sweep: dict[str, int] = Field(default_factory=dict)


class SessionInfo(BaseModel):
    session_key: str
    claude_session_id: str | None
    project_root: str | None
    project_db: str | None
    started_at: datetime
    status: str
    resumed: bool = False


class PromotionReport(BaseModel):
    session_key: str | None = None
    promoted: list[str] = Field(default_factory=list)
    merged: list[str] = Field(default_factory=list)
    skipped: int = 0
    dropped: int = 0
    message: str = ""


class ScopeCounts(BaseModel):
    scope: Scope
    database: str
    total: int
    by_type: dict[str, int]
    by_status: dict[str, int]


class Stats(BaseModel):
    scopes: list[ScopeCounts]
    project_root: str | None
    embedding: str
    sessions_active: int


class MaintenanceReport(BaseModel):
    transitions: dict[str, int]  # how many memories moved to each status ("archived": 3, …), all scopes
    queued_for_consolidation: int
    sessions_recovered: int
    promoted_to_user: int
    took_ms: float
    dry_run: bool = False
    by_scope: dict[str, dict[str, int]] = Field(default_factory=dict)  # "project:p_…" / "user" → moves
    capped: int = 0  # archived because the scope was over its cap
    awaiting_forget: int = 0  # archived and below 0.01: forgotten once their grace period is over
    half_lives_updated: int = 0  # memories whose half-life followed the current (evolved or set) value
    sessions_abandoned: int = 0  # registered as active, but their session store is gone
    slices: int = (
        0  # pieces the sweep was applied in, each under the request lock (maintenance.SWEEP_SLICE_S)
    )
    left_for_next_sweep: int = (
        0  # changed between the sweep's plan and its slice (recalled, edited): not moved
    )


class CompactedStore(BaseModel):
    path: str
    before_bytes: int
    after_bytes: int
    took_ms: float
    # Copied in pieces while requests went on; False: a write came in meanwhile, so it was copied again holding
    # the request lock throughout (maintenance.compact).
    copied_between_requests: bool = True


class CompactReport(BaseModel):
    stores: list[CompactedStore] = []
    stopped: list[
        str
    ] = []  # store files whose compaction gave up part-way (Engram was stopping): left unchanged


class ProjectInfo(BaseModel):
    project_db: str
    project_path: str
    project_name: str
    memory_count: int | None = None
    open: bool = False
    last_seen_at: datetime | None = None


class MemoryPage(BaseModel):
    items: list[Memory]
    total: int
    offset: int
    limit: int


class InjectionItem(BaseModel):
    id: str
    scope: Scope
    memory_type: MemoryType
    content: str
    strength: float
    tokens: int


class InjectionPreview(BaseModel):
    text: str
    tokens: int
    budget: int
    items: list[InjectionItem]
    disabled: bool = False


class StatementResult(BaseModel):
    index: int
    sql: str
    ok: bool
    rows: list[Any] = Field(default_factory=list)
    columns: list[str] = Field(default_factory=list)
    row_count: int = 0
    truncated: bool = False
    time_ms: float = 0.0
    error: str | None = None


class QueryViolation(BaseModel):
    statement_index: int
    statement: str
    rule: str
    message: str


class QueryResult(BaseModel):
    ok: bool
    scope: Scope
    database: str
    role: Literal["VIEWER", "EDITOR"]
    statements: list[StatementResult]
    violations: list[QueryViolation] = Field(default_factory=list)
    total_ms: float = 0.0
    message: str = ""


class WritePreview(BaseModel):
    """A console statement that changes existing rows, before it runs: what it targets, whether a WHERE bounds
    it, and how many rows match now (None when the count could not be taken; ``error`` says why)."""

    index: int
    statement: str
    verb: str
    target: str
    bounded: bool
    rows: int | None = None
    error: str | None = None


class FeedbackResult(BaseModel):
    log_id: str | None
    updated: bool
    message: str


class MemoryRecord(BaseModel):
    """One memory as `engram export` writes it: every stored field, so that import restores it exactly."""

    model_config = {"extra": "forbid"}

    engram_export: Literal[1] = 1
    id: str = Field(min_length=1, max_length=64, pattern=r"^[0-9A-Za-z_]+$")
    scope: Scope
    database: str | None = None
    project_path: str | None = None
    content: str = Field(max_length=MAX_CONTENT_CHARS)
    content_hash: str
    search_text: str | None = None
    memory_type: MemoryType
    status: Status
    tags: list[str] = Field(default_factory=list)
    embedding: list[float] | None = None
    importance: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(0.7, ge=0.0, le=1.0)
    relevance_score: float = Field(0.0, ge=0.0, le=1.0)
    outcome_impact: float = Field(0.0, ge=0.0, le=1.0)
    user_feedback: float = Field(0.0, ge=0.0, le=1.0)
    access_count: int = Field(0, ge=0)
    half_life_days: float = Field(gt=0)
    pinned: bool = False
    status_changed_at: datetime | None = None
    status_history: list[dict[str, Any]] = Field(default_factory=list)
    status_reason: str | None = None
    source: str | None = None
    session_id: str | None = None
    episode_id: str | None = None
    promoted_from: str | None = None
    promotion_chain: list[str] = Field(default_factory=list)
    consolidated_into: str | None = None
    invalid_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    last_accessed_at: datetime
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("status_history")
    @classmethod
    def _history_times(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # JSONL carries datetimes as text; the schema wants datetimes back.
        out = []
        for entry in v:
            if not isinstance(entry, dict) or "to" not in entry or "at" not in entry:
                raise ValueError("each status_history entry needs 'to' and 'at'")
            at = entry["at"]
            if isinstance(at, str):
                at = datetime.fromisoformat(at.replace("Z", "+00:00"))
            out.append({**entry, "at": at})
        return out


class RestoreReport(BaseModel):
    restored: int
    replaced: int
    failed: list[ImportError_]


class HealthCheck(BaseModel):
    name: str
    ok: bool
    detail: str
    fix: str | None = None


class HealthReport(BaseModel):
    ok: bool
    checks: list[HealthCheck]


SettingSource = Literal["default", "user file", "project file", "environment", "evolved"]


class SettingEntry(BaseModel):
    """One effective setting for a project's requests, and where its value came from."""

    name: str
    value: Any
    source: SettingSource
    # "per project": a project's file changes it for that project's requests; "daemon-wide": one daemon has one.
    applies: Literal["per project", "daemon-wide"]
    note: str | None = None


class SettingsReport(BaseModel):
    """`engram config`: every setting as the daemon applies it to this project, and every value it ignores."""

    project_root: str | None
    user_file: str
    project_file: str | None
    settings: list[SettingEntry]
    # A value set somewhere that does not take effect (a daemon-wide setting in a project file, a file value the
    # environment overrides): one sentence each, never silence.
    ignored: list[str]
