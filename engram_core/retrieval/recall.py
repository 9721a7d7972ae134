"""Recall: hybrid search across the scopes a caller can see (hybrid.py fuses the lists), the hits
strengthened and logged; and the feedback an agent gives on a recall it made."""

from __future__ import annotations

import functools
import time
from typing import Any, Literal

from pydantic import Field

from ..api import EngramError, NotFound, api
from ..core import MemoryCore
from ..memory import promotion
from ..memory.scoring import FEEDBACK_STEP, IMPORTANCE_FLOOR
from ..models import (
    DEFAULT_RECALL_STATUSES,
    FeedbackResult,
    MemoryType,
    RecallHit,
    RecallResult,
    RecallScores,
    Scope,
    Status,
)
from ..redaction import redact_text
from ..scopes import RequestContext
from ..storage import ScopeStore, key_of, record
from ..vocabulary import ScopeOrAll
from . import hybrid
from .embeddings import try_embed


@api
def recall(
    core: MemoryCore,
    query: str,
    project: str | None = None,
    session: str | None = None,
    limit: int = Field(10, ge=1, le=200),
    scope: ScopeOrAll = "all",
    types: list[MemoryType] | None = None,
    tags: list[str] | None = None,
    statuses: list[Status] | None = None,
    profile: str | None = None,
    strengthen: bool = True,
    log: bool = True,
) -> RecallResult:
    """Hybrid recall across scopes. Every recall strengthens what it returns and is logged."""
    if not query.strip():
        raise EngramError("the query is empty: say what to recall")
    with core.bookkeeper.busy():
        ctx = core.scopes.resolve(project, session)
        return _recall(core, query, ctx, limit, scope, types, tags, statuses, profile, strengthen, log)


def _recall(
    core: MemoryCore,
    query: str,
    ctx: RequestContext,
    limit: int,
    scope: ScopeOrAll,
    types: list[MemoryType] | None,
    tags: list[str] | None,
    statuses: list[Status] | None,
    profile: str | None,
    strengthen: bool,
    log: bool,
) -> RecallResult:
    t0 = time.perf_counter()
    project = ctx.project
    stores = ctx.stores(scope)
    weights = core.scope_weights(profile, project)
    qvec = None
    degraded = None
    if getattr(core.embedder, "available", False):
        vecs, degraded = try_embed(core.embedder, [query])
        qvec = vecs[0] if vecs is not None else None
    else:
        degraded = f"no embedding provider ({core.embedder.name}): BM25 only"
    filters = hybrid.Filters(
        statuses={s.value for s in (statuses or DEFAULT_RECALL_STATUSES)},
        types={t.value for t in types} if types else None,
        tags={t.lower() for t in tags} if tags else None,
    )
    extra = [ranker(core, stores, query, qvec, filters) for ranker in core.extensions.rankers]
    boosters = [(functools.partial(b.booster, core), b.most) for b in core.extensions.boosters]
    winners = hybrid.rank(
        stores,
        query,
        qvec,
        limit=limit,
        weights=weights,
        filters=filters,
        now=core.now(),
        extra=extra,
        boosters=boosters,
        context={"session": ctx.session_key, "project": project},
    )
    by_store: dict[int, tuple[ScopeStore, list[str]]] = {}
    for c in winners:
        by_store.setdefault(id(c.store), (c.store, []))[1].append(c.key)
    rows: dict[str, dict[str, Any]] = {}
    for c_store, keys in by_store.values():
        if strengthen:  # counted in the mirror now, written once the answer is out
            c_store.strengthen(keys, when=core.now())
        rows.update(c_store.get_many(keys, settled=False))
    hits = []
    for c in winners:
        row = rows.get(c.key)
        if row is None:
            continue
        memory = core.to_memory(row, c.store)
        if c.also_in:  # the copy kept carries the tags of the copies folded into it
            memory.tags = list(dict.fromkeys([*memory.tags, *c.tags]))
        hits.append(
            RecallHit(
                memory=memory,
                also_in=c.also_in,
                scores=RecallScores(
                    bm25=c.bm25,
                    bm25_rank=c.bm25_rank,
                    vector=c.vector,
                    vector_rank=c.vector_rank,
                    fused=c.fused,
                    scope_weight=c.scope_weight,
                    strength=c.strength,
                    final=c.final,
                ),
            )
        )
    took = (time.perf_counter() - t0) * 1000
    strategy: Literal["hybrid", "bm25"] = "hybrid" if qvec is not None else "bm25"
    log_id = None
    if log:
        # The log lives in the project (else user) store; scope="session" without a session has no stores.
        log_store = next((st for st in stores if st.scope != Scope.session), None)
        if log_store is None:
            log_store = core.project_store(project) or core.user
        log_id = log_store.retrieval_log.log(
            {
                "query": redact_text(query)[:2000],
                "strategy": strategy,
                "results_count": len(hits),
                "memory_ids": [h.memory.id for h in hits],
                "scopes": [h.memory.scope.value for h in hits],
                "types": [h.memory.memory_type.value for h in hits],
                "took_ms": took,
                "session_id": ctx.session_key,
                "query_type": profile,
                "created_at": core.now(),
            }
        )
    result = RecallResult(
        query=query,
        strategy=strategy,
        degraded=degraded,
        scope_weights=weights,
        hits=hits,
        took_ms=took,
        log_id=log_id,
    )
    for after in core.extensions.after_recall:
        after(core, result, winners)
    return result


@api
def mark_retrieval_useful(
    core: MemoryCore,
    query: str,
    was_useful: bool,
    reason: str | None = None,
    project: str | None = None,
    log_id: str | None = None,
) -> FeedbackResult:
    """Marks the latest retrieval_log row for this query (or the row ``log_id``, as recall returns it) in
    whichever scope logged it (the project's store, or the user's for a recall outside a project). Each memory
    that recall returned moves: useful, importance +0.1 and relevance and outcome impact up; not useful,
    importance -0.1 (floor 0.05) and those signals down. Strength is importance × decay, so the change shows in
    rank at once and in how soon the memory fades to the archive threshold."""
    found: tuple[ScopeStore, dict[str, Any]] | None = None
    for store in [s for s in (core.project_store(project) if project else None, core.user) if s is not None]:
        if log_id:
            rows = store.q1(
                "SELECT id, memory_ids, created_at FROM $id", {"id": record(key_of(log_id), "retrieval_log")}
            )
        else:
            # ORDER BY needs its field in the selection (SurrealDB 3 refuses the query otherwise).
            # The log holds the query redacted and cut, as recall stored it.
            rows = store.q1(
                "SELECT id, memory_ids, created_at FROM retrieval_log WHERE query = $q "
                "ORDER BY created_at DESC LIMIT 1",
                {"q": redact_text(query)[:2000]},
            )
        if rows and (found is None or rows[0]["created_at"] > found[1]["created_at"]):
            found = (store, rows[0])
    if found is None:
        what = f"retrieval {log_id!r}" if log_id else f"retrieval of {query!r}"
        return FeedbackResult(
            log_id=None,
            updated=False,
            message=f"no {what} is logged in this project or the user scope; recall it first",
        )
    store, row = found
    store.q(
        "UPDATE $id SET was_useful = $u, feedback_reason = $r",
        {"id": row["id"], "u": was_useful, "r": redact_text(reason) if reason else reason},
    )
    delta = 0.1 if was_useful else -0.05
    step = 2.0 * FEEDBACK_STEP * ((1.0 if was_useful else 0.0) - 0.5)  # scoring.importance_after_verdict
    for mid in row.get("memory_ids", []):
        try:
            s, key = core.scopes.locate(mid, project)
        except NotFound:
            continue
        s.memories.apply_feedback(key, delta, step, IMPORTANCE_FLOOR)  # the mirror ranks by it at once
        if was_useful and s.scope == Scope.session:
            promotion.promote_if_important(core, s, key)  # importance 0.85 or more: up to the project now
    return FeedbackResult(
        log_id=key_of(row["id"]),
        updated=True,
        message=f"marked {'useful' if was_useful else 'not useful'} (logged in {store.scope.value} scope)",
    )
