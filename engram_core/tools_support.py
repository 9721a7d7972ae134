"""API functions behind MCP tools that have no module of their own: ``engram_explore`` and ``recall_skill``.

Module-level functions taking the core first, marked with the same ``@api`` decorator as the rest of the API;
the service (service.py) declares them among the methods the daemon serves.
"""

from __future__ import annotations

import time
from typing import Any, cast

from pydantic import Field

from .api import API_METHODS, EngramError, api
from .console import run_query
from .core import MemoryCore
from .memory.writing import update
from .models import ExploredStore, ExploreResult, MemoryPatch, MemoryType, SkillMatch, SkillRecall, SkillRun
from .retrieval.recall import recall
from .storage import ScopeStore, plain, vector_size
from .vocabulary import SCOPES, ScopeOrAll

ExploreScope = ScopeOrAll
SKILL_TAG = "surql-skill"
SKILL_PROMOTE_AFTER = 10


def _tables(store: ScopeStore) -> list[str]:
    info = store.q1("INFO FOR DB") or {}
    return sorted((info.get("tables") or {}).keys())


def _count(store: ScopeStore, table: str) -> int:
    rows = store.q1("SELECT count() AS n FROM type::table($t) GROUP ALL", {"t": table})
    return int(rows[0]["n"]) if rows else 0


def _strip(value: Any) -> Any:
    """Sample rows without their 384-float embeddings (nobody reads them, they cost tokens)."""
    if isinstance(value, dict):
        return {
            k: (
                f"<{vector_size(v) if isinstance(v, bytes) else len(v)} floats>"
                if k == "embedding" and isinstance(v, bytes | list)
                else _strip(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@api
def engram_explore(
    core: MemoryCore,
    depth: int = Field(0, ge=0, le=3),
    scope: ExploreScope = "all",
    table: str | None = None,
    sample_size: int = Field(3, ge=1, le=20),
    project: str | None = None,
    session: str | None = None,
) -> ExploreResult:
    """Progressive manifest, one level of detail at a time: 0 counts per scope, 1 tables and row counts,
    2 one table's schema and indexes, 3 sample rows of one table."""
    stores = core.scopes.stores(scope, project, session)
    scopes: list[ExploredStore] = []
    if depth >= 2 and not table:
        raise EngramError("depth 2 and 3 describe one table: give table (e.g. 'memory'); depth 1 lists them")
    for store in stores:
        total, by_type, by_status = store.memories.count_by()
        entry: dict[str, Any] = {"scope": store.scope.value, "database": store.database, "memories": total}
        if depth >= 1:
            entry["by_type"] = by_type
            entry["by_status"] = by_status
            entry["tables"] = {t: _count(store, t) for t in _tables(store)}
        if depth >= 2 and table:
            if table not in _tables(store):
                entry["error"] = f"no table {table!r} in this scope"
            else:
                info = store.q1(f"INFO FOR TABLE `{table}`") or {}
                entry["table"] = table
                entry["fields"] = info.get("fields", {})
                entry["indexes"] = info.get("indexes", {})
                entry["events"] = list((info.get("events") or {}).keys())
                if depth >= 3:
                    rows = store.q1("SELECT * FROM type::table($t) LIMIT $n", {"t": table, "n": sample_size})
                    entry["samples"] = _strip(plain(rows or []))
        scopes.append(ExploredStore(**entry))
    return ExploreResult(
        depth=depth,
        scopes=scopes,
        next={
            0: "depth=1 lists tables and counts",
            1: "depth=2 with table='memory' shows its schema",
            2: "depth=3 shows sample rows; engram_execute runs SELECTs",
            3: "engram_execute runs queries",
        }[depth],
    )


@api
def recall_skill(
    core: MemoryCore,
    task_description: str,
    execute: bool = False,
    scope: ScopeOrAll = "all",
    project: str | None = None,
    session: str | None = None,
    limit: int = Field(3, ge=1, le=10),
) -> SkillRecall:
    """Find stored SurrealQL skills (procedural memories tagged surql-skill) for a task; optionally run the best."""
    if not task_description.strip():
        raise EngramError("describe the task the skill should do")
    result = recall(
        core,
        task_description,
        project=project,
        session=session,
        limit=limit,
        scope=scope,
        types=[MemoryType.procedural],
        tags=[SKILL_TAG],
        log=False,
    )
    skills = []
    for hit in result.hits:
        m = hit.memory
        skills.append(
            SkillMatch(
                id=m.id,
                scope=m.scope.value,
                content=m.content,
                surql=m.metadata.get("surql") or m.content,
                notes=m.metadata.get("notes"),
                execution_count=int(m.metadata.get("execution_count", 0)),
                score=hit.scores.final,
            )
        )
    if not skills:
        return SkillRecall(
            task=task_description,
            skills=skills,
            message=(
                f"no stored skill matches; store one with store_memory(memory_type='procedural', "
                f"tags=['{SKILL_TAG}'], metadata={{'surql': '...'}})"
            ),
        )
    if execute:
        if "run_query" not in API_METHODS:
            raise EngramError("running skills needs run_query, which this daemon does not have yet")
        best = skills[0]
        target = best.scope if best.scope in SCOPES else "project"
        t0 = time.perf_counter()
        qr = run_query(
            core, best.surql, scope=cast(Any, target), allow_writes=False, project=project, session=session
        )
        count = best.execution_count + 1
        meta: dict[str, Any] = {"execution_count": count}
        if count >= SKILL_PROMOTE_AFTER:
            meta["promotion_candidate"] = True
        update(core, best.id, MemoryPatch(metadata=meta), project=project, session=session)
        executed = SkillRun(
            id=best.id,
            result=qr,
            took_ms=(time.perf_counter() - t0) * 1000,
            execution_count=count,
            promotion_candidate=count >= SKILL_PROMOTE_AFTER,
        )
        return SkillRecall(task=task_description, skills=skills, executed=executed)
    return SkillRecall(task=task_description, skills=skills)
