"""Consolidation: find what could be merged, propose a merged memory, approve by policy or by review.

Reasons: decay (queued by the core sweep), duplicate, promotion, merge, scheduled (closed episodes at the
full consolidation every 5 sessions), episodic_to_semantic (>= 3 related episodes on a topic).

Proposals are extractive by default — the strongest statement, union of tags, summed access, max
importance, sources linked — because no LLM is available (consolidation_queue.py: the proposal, its risk,
queuing); the agent may replace the text with a summary (`propose_consolidation_summary`). Items below the
auto-approval risk are applied without review; the rest wait for the TUI or the agent. Candidates are visited
in replay priority order: importance, recency and association strength.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any, Literal

from ..memory.promotion import promote
from ..memory.scoring import memory_strength
from ..memory.writing import write_into
from ..models import (
    BulkOutcome,
    ConsolidationCounts,
    ConsolidationItem,
    ConsolidationOutcome,
    MemoryIn,
    MemoryType,
    OrganiseMaintenance,
    Proposal,
    ReflectionReport,
)
from ..redaction import redact_text
from ..storage import ScopeStore, key_of, plain
from ..storage.graph_mirror import SUBJECT_TYPES
from . import associations, contradictions, evolution, graph, verdicts
from . import subjects as sj
from .base import EngramError, MemoryCore, NotFound, api, rid, to_memory
from .consolidation_queue import (
    LIVE,
    MIN_EPISODES,
    auto_approve_below,
    extractive,
    fill_proposals,
    propose_duplicates,
    queue,
    replay_priority,
    risk_for,
)


# ── detectors ────────────────────────────────────────────────
def _live_keys(store: ScopeStore, types: Iterable[str] | None = None) -> list[str]:
    ts = set(types) if types else None
    return [
        k
        for k, lt in store.summaries.items()
        if lt.status in LIVE and (ts is None or lt.memory_type in ts) and lt.memory_type != "working"
    ]


def find_pairs(core: MemoryCore, store: ScopeStore, *, deadline: float, dry_run: bool) -> dict[str, int]:
    """Near-duplicates among live memories (→ duplicate items, grouped), in replay-priority order, within the
    deadline. The write path proposes most of them as memories arrive; this pass finds what it could not (a
    store written before, a neighbour that arrived later). Close statements that are not the same (another
    attribute, another subject) are never proposed: merging them would lose one."""
    vocab = sj.vocabulary(core, store)
    found = {"duplicate": 0, "merge": 0}
    keys = sorted(_live_keys(store), key=lambda k: -replay_priority(core, store, k))
    done: set[frozenset[str]] = set()
    pairs: list[tuple[str, str, float, str]] = []
    for k in keys:
        if time.monotonic() > deadline:
            break
        vec = store.index.embedding(k)
        if vec is None:
            continue
        a = store.summaries[k]
        for other, cos in store.index.vector(vec, 6):
            pair = frozenset((k, other))
            if other == k or cos < verdicts.CANDIDATE_COSINE or pair in done or other not in store.summaries:
                continue
            b = store.summaries[other]
            if b.status not in LIVE or b.memory_type == "working":
                continue
            done.add(pair)
            old, new = (a, b) if a.created_at <= b.created_at else (b, a)
            v = verdicts.judge(old.content, new.content, cos, vocab)
            if v.cls == "duplicate":
                pairs.append((k, other, cos, v.why))
    if dry_run:
        found["duplicate"] = len(pairs)
    elif pairs:
        found["duplicate"] = propose_duplicates(core, store, pairs)
    return found


def find_episodic_topics(core: MemoryCore, store: ScopeStore, *, dry_run: bool) -> int:
    """>= 3 episodic memories sharing a tag or an entity → one semantic memory proposal per topic."""
    eps = sorted(set(_live_keys(store, ["episodic"])))
    if len(eps) < MIN_EPISODES:
        return 0
    topics: dict[str, set[str]] = {}
    for k in eps:
        for t in store.summaries[k].tags:
            topics.setdefault(f"tag:{t}", set()).add(k)
    rows = (
        store.q1(
            "SELECT id, entities.name AS names, entities.entity_type AS types FROM $ids WHERE entities != NONE",
            {"ids": [rid("memory", k) for k in eps]},
        )
        or []
    )
    for r in rows:
        for name, etype in zip(r.get("names") or [], r.get("types") or [], strict=False):
            if name is not None and etype not in SUBJECT_TYPES:
                topics.setdefault(f"entity:{name}", set()).add(key_of(r["id"]))
    n = 0
    claimed: set[str] = set()
    # Largest topic first, ties by name: which topic claims a memory must not depend on set or row order.
    for topic, members in sorted(topics.items(), key=lambda t: (-len(t[1]), t[0])):
        members -= claimed
        if len(members) < MIN_EPISODES:
            continue
        pr = math.fsum(replay_priority(core, store, k) for k in members) / len(members)
        if (
            queue(
                core,
                store,
                "episodic_to_semantic",
                sorted(members),
                priority=pr,
                topic=topic.split(":", 1)[1],
                dry_run=dry_run,
            )
            or dry_run
        ):
            n += 1
            claimed |= members
    return n


def find_promotions(core: MemoryCore, store: ScopeStore, *, dry_run: bool) -> int:
    """Strong project knowledge seen in one project only: the core will not promote it alone; ask."""
    if store.scope.value != "project":
        return 0
    n = 0
    for k, lt in store.summaries.items():
        if (
            lt.memory_type in ("semantic", "procedural")
            and lt.importance >= 0.7
            and lt.access_count >= 5
            and lt.status in LIVE
        ):
            row = store.get(k) or {}
            if row.get("metadata", {}).get("promoted_to_user"):
                continue
            if queue(core, store, "promotion", [k], priority=lt.importance, dry_run=dry_run) or dry_run:
                n += 1
    return n


def find_scheduled(core: MemoryCore, store: ScopeStore, *, dry_run: bool) -> int:
    """Closed episodes whose memories are all episodic and fading: one summary each."""
    rows = store.q1("SELECT id FROM episode WHERE ended_at IS NOT NONE AND memory_count >= 2 LIMIT 200") or []
    n = 0
    now = core.now()
    for r in rows:
        ep = key_of(r["id"])
        members = [k for k, lt in store.summaries.items() if lt.episode_id == ep and lt.status in LIVE]
        if len(members) < 2:
            continue
        lts = [store.summaries[k] for k in members]
        if any(lt.memory_type != "episodic" for lt in lts):
            continue
        if (
            max(
                memory_strength(lt.importance, lt.half_life_days, lt.access_count, lt.last_accessed_at, now)
                for lt in lts
            )
            >= 0.5
        ):
            continue
        if (
            queue(core, store, "scheduled", members, priority=0.3, topic=f"episode {ep}", dry_run=dry_run)
            or dry_run
        ):
            n += 1
    return n


# ── API ──────────────────────────────────────────────────────
def _item(core: MemoryCore, store: ScopeStore, row: dict[str, Any]) -> ConsolidationItem:
    row = plain(row)
    sources = []
    for m in row.get("memory_ids") or []:
        try:
            sources.append(to_memory(core, store, key_of(m)))
        except NotFound:
            continue
    p = row.get("proposal")
    return ConsolidationItem(
        id=key_of(row["id"]),
        reason=row["reason"],
        priority=float(row.get("priority") or 0.0),
        risk=float(row.get("risk") or 0.0),
        status=row["status"],
        created_at=row["created_at"],
        topic=row.get("topic"),
        scope=store.scope.value,
        sources=sources,
        proposal=Proposal(**p) if isinstance(p, dict) and p.get("content") else None,
        needs_review=float(row.get("risk") or 0.0) >= auto_approve_below(core),
        evidence=row.get("evidence") or [],
    )


@api
def list_consolidations(
    core: MemoryCore,
    project: str | None = None,
    status: Literal["pending", "completed", "rejected", "failed", "all"] = "pending",
    limit: int = 100,
) -> list[ConsolidationItem]:
    """Queue items with their sources and proposed merged memory, highest priority first."""
    store = core.scopes.primary(project)
    fill_proposals(core, store)
    cond = "true" if status == "all" else "status = $s"
    # Ties (every scheduled summary has priority 0.3) by age and first memory, not by the random row id.
    rows = (
        store.q1(
            f"SELECT * FROM consolidation_queue WHERE {cond} "
            "ORDER BY priority DESC, created_at, memory_id, reason LIMIT $n",
            {"s": status, "n": max(1, min(limit, 1000))},
        )
        or []
    )
    return [_item(core, store, r) for r in rows]


@api
def count_consolidations(core: MemoryCore, project: str | None = None) -> ConsolidationCounts:
    """True totals of the queue: by status, pending ones by reason, and how many of those need a decision."""
    store = core.scopes.primary(project)
    threshold = auto_approve_below(core)
    out = ConsolidationCounts()
    rows = (
        store.q1(
            "SELECT status, reason, risk >= $t AS review, count() AS n FROM consolidation_queue "
            "GROUP BY status, reason, review",
            {"t": threshold},
        )
        or []
    )
    for r in rows:
        n = int(r["n"])
        if r["status"] == "pending":
            out.pending += n
            out.needs_review += n if r.get("review") else 0
            out.pending_by_reason[r["reason"]] = out.pending_by_reason.get(r["reason"], 0) + n
        elif r["status"] in ("completed", "rejected", "failed"):
            setattr(out, r["status"], getattr(out, r["status"]) + n)
    return out


def _load(core: MemoryCore, item_id: str, project: str | None) -> tuple[ScopeStore, dict[str, Any]]:
    store, row = contradictions.find_item(core, "consolidation_queue", item_id, project)
    row["id"] = rid("consolidation_queue", key_of(row["id"]))  # plain() made it a string; queries need the id
    return store, row


def _log(store: ScopeStore, action: str, **fields: Any) -> None:
    store.create("consolidation_log", {"action": action, **fields})


@api
def approve_consolidation(
    core: MemoryCore,
    item_id: str,
    project: str | None = None,
    edited_content: str | None = None,
    decided_by: str = "user",
) -> ConsolidationOutcome:
    """Apply an item: write the merged memory (or promote), sources become `consolidated` with
    `consolidated_into`. `edited_content` replaces the proposal's text."""
    t0 = time.perf_counter()
    store, row = _load(core, item_id, project)
    if row["status"] != "pending":
        raise EngramError(f"item {key_of(row['id'])} is {row['status']}, not pending")
    keys = [key_of(m) for m in row.get("memory_ids") or []]
    live = [k for k in keys if store.get(k) is not None]
    if not live:
        store.q(
            "UPDATE $id SET status = 'failed', note = 'sources gone', processed_at = $now",
            {"id": row["id"], "now": core.now()},
        )
        raise NotFound("the sources of this item no longer exist")
    p = (
        Proposal(**row["proposal"])
        if row.get("proposal")
        else extractive(core, store, live, row["reason"], row.get("topic"))
    )
    if edited_content is not None and edited_content.strip():
        p.content, p.source = edited_content.strip(), "agent"
    out = ConsolidationOutcome(item_id=key_of(row["id"]), status="completed")
    result_id: str | None = None
    before = {k: store.get(k) or {} for k in live}
    undo: dict[str, Any] = {
        "statuses": {k: r.get("status") for k, r in before.items()},
        "metadata": {k: r.get("metadata") or {} for k, r in before.items()},
        "created": None,
    }
    if row["reason"] == "promotion":
        rep = promote(core, live[0], target_scope="user", project=core.scopes.root_of(store))
        result_ids = rep.promoted or rep.merged
        result_id = result_ids[0] if result_ids else None
        src = store.get(live[0]) or {}
        store.update_memory(live[0], {"metadata": {**src.get("metadata", {}), "promoted_to_user": result_id}})
        out.sources = {live[0]: src.get("status", "active")}
        out.message = rep.message
    elif len(live) == 1 and p.source == "extractive":
        # Nothing to fold it into: `consolidated` means merged into a summary that names it, so a memory that
        # decayed alone is archived (restorable) instead, and keeps its rank until then.
        store.set_status(
            live[0], "archived", f"consolidation {out.item_id} ({row['reason']}): nothing to merge it with"
        )
        out.sources = {live[0]: "archived"}
        out.message = "archived (a single source: nothing to merge it with; `engram restore` brings it back)"
    else:
        mem = write_into(
            core,
            store,
            MemoryIn(
                content=p.content,
                memory_type=MemoryType(p.memory_type),
                tags=p.tags,
                importance=p.importance,
                metadata={
                    "consolidated_from": live,
                    "consolidation_item": out.item_id,
                    "summary_source": p.source,
                },
                source="consolidation",
            ),
        )
        result_id = mem.id
        undo["created"] = None if mem.id in live else mem.id
        if mem.id in live:
            # Identical text to one source: the core folded the write into it; that source is the survivor.
            surv = store.get(mem.id) or {}
            store.update_memory(
                mem.id,
                {
                    "metadata": {
                        **surv.get("metadata", {}),
                        "consolidated_from": live,
                        "consolidation_item": out.item_id,
                    }
                },
            )
        if p.access_count:
            store.memories.raise_access_count(mem.id, p.access_count)
            store.refresh([mem.id])
        for k in live:
            if k == mem.id:
                out.sources[k] = "survivor"  # the text was identical to this source: the core merged into it
                continue
            store.update_memory(
                k,
                {
                    "status": "consolidated",
                    "status_reason": f"consolidated into {mem.id}",
                    "consolidated_into": mem.id,
                },
            )
            out.sources[k] = "consolidated"
        out.memory = to_memory(core, store, mem.id)
        out.message = f"{len(live)} source(s) consolidated into {mem.id}"
    store.q(
        "UPDATE $id SET status = 'completed', processed_at = $now, result_id = $r, decided_by = $d, "
        "proposal = $p, undo = $u",
        {
            "id": row["id"],
            "r": result_id,
            "d": decided_by,
            "p": p.model_dump(),
            "now": core.now(),
            "u": None if row["reason"] == "promotion" else undo,
        },
    )
    _log(
        store,
        "approve",
        item_id=out.item_id,
        result_id=result_id,
        details={"reason": row["reason"], "sources": live, "decided_by": decided_by},
        took_ms=(time.perf_counter() - t0) * 1000,
    )
    return out


@api
def reject_consolidation(
    core: MemoryCore, item_id: str, project: str | None = None, reason: str | None = None
) -> ConsolidationItem:
    store, row = _load(core, item_id, project)
    if row["status"] != "pending":
        raise EngramError(f"item {key_of(row['id'])} is {row['status']}, not pending")
    store.q(
        "UPDATE $id SET status = 'rejected', processed_at = $now, note = $n, decided_by = 'user'",
        {"id": row["id"], "n": reason, "now": core.now()},
    )
    _log(store, "reject", item_id=key_of(row["id"]), details={"reason": reason})
    return _item(core, store, store.q1("SELECT * FROM ONLY $id", {"id": row["id"]}))


@api
def reopen_consolidation(core: MemoryCore, item_id: str, project: str | None = None) -> ConsolidationItem:
    """Undo a decision: an applied item's sources get back their status and metadata and the memory it wrote is
    archived; a rejected item is pending again. A promotion is undone in the user scope (`engram forget`)."""
    store, row = _load(core, item_id, project)
    key = key_of(row["id"])
    if row["status"] == "pending":
        raise EngramError(f"item {key} is pending: nothing to undo")
    if row["status"] == "completed":
        undo = row.get("undo")
        if not undo:
            raise EngramError(
                f"item {key} cannot be undone here ({row['reason']}: "
                + (
                    "forget the promoted memory in the user scope)"
                    if row["reason"] == "promotion"
                    else "applied before decisions could be undone)"
                )
            )
        when = core.now()
        created = undo.get("created")
        if created and store.get(created) is not None:
            store.set_status(created, "archived", f"consolidation {key} undone", when)
        for k, status in (undo.get("statuses") or {}).items():
            if store.get(k) is not None:
                store.update_memory(
                    k,
                    {
                        "status": status,
                        "status_reason": f"consolidation {key} undone",
                        "status_changed_at": when,
                        "consolidated_into": None,
                        "metadata": (undo.get("metadata") or {}).get(k, {}),
                    },
                )
    store.q(
        "UPDATE $id SET status = 'pending', processed_at = NONE, result_id = NONE, decided_by = NONE, "
        "undo = NONE, note = NONE",
        {"id": row["id"]},
    )
    _log(store, "reopen", item_id=key, details={"was": row["status"]})
    return _item(core, store, store.q1("SELECT * FROM ONLY $id", {"id": row["id"]}))


@api
def decide_consolidations(
    core: MemoryCore,
    action: Literal["approve", "reject"],
    project: str | None = None,
    max_risk: float | None = None,
    reason: str | None = None,
    note: str | None = None,
) -> BulkOutcome:
    """A bulk decision on pending items: approve every one at or below ``max_risk`` (the confident ones), or
    reject a whole class (``reason``: duplicate, decay…). Each item decided can be undone with
    `reopen_consolidation`; the ids are in the answer."""
    store = core.scopes.primary(project)
    cond, params = "status = 'pending'", dict[str, Any]()
    if max_risk is not None:
        cond += " AND risk <= $r"
        params["r"] = max_risk
    if reason:
        cond += " AND reason = $why"
        params["why"] = reason
    ids = [
        key_of(i)
        for i in store.q1(
            f"SELECT VALUE id FROM consolidation_queue WHERE {cond} ORDER BY priority DESC LIMIT 1000", params
        )
        or []
    ]
    done: list[str] = []
    for item in ids:
        try:
            if action == "approve":
                approve_consolidation(core, item, project=project)
            else:
                reject_consolidation(core, item, project=project, reason=note)
            done.append(item)
        except (NotFound, EngramError):
            continue
    verb = "approved" if action == "approve" else "rejected"
    return BulkOutcome(
        ids=done,
        count=len(done),
        message=f"{len(done)} item(s) {verb}; each can be undone (reopen_consolidation)",
    )


@api
def propose_consolidation_summary(
    core: MemoryCore, item_id: str, summary: str, project: str | None = None
) -> ConsolidationItem:
    """The agent's own summary replaces the extractive proposal (it still needs approval unless low-risk)."""
    if not summary.strip():
        raise EngramError("the summary is empty")
    store, row = _load(core, item_id, project)
    if row["status"] != "pending":
        raise EngramError(f"item {key_of(row['id'])} is {row['status']}, not pending")
    keys = [key_of(m) for m in row.get("memory_ids") or []]
    p = Proposal(**row["proposal"]) if row.get("proposal") else extractive(core, store, keys, row["reason"])
    p.content, p.source = redact_text(summary).strip()[:20_000], "agent"  # whole, then cut
    if row["reason"] == "episodic_to_semantic":
        p.memory_type = "semantic"
    store.q(
        "UPDATE $id SET proposal = $p, summary_source = 'agent', risk = $r",
        {"id": row["id"], "p": p.model_dump(), "r": risk_for(row["reason"], len(keys), agent_summary=True)},
    )
    _log(store, "summary", item_id=key_of(row["id"]), details={"chars": len(summary)})
    return _item(core, store, store.q1("SELECT * FROM ONLY $id", {"id": row["id"]}))


def auto_approve(core: MemoryCore, store: ScopeStore, *, deadline: float) -> tuple[int, int]:
    """Apply pending items below the policy's risk; returns (applied, left for review)."""
    threshold = auto_approve_below(core)
    rows = (
        store.q1(
            "SELECT id, risk, priority FROM consolidation_queue WHERE status = 'pending' "
            "ORDER BY priority DESC LIMIT 500"
        )
        or []
    )
    applied = review = 0
    for r in rows:
        if float(r.get("risk") or 0.5) >= threshold:
            review += 1
            continue
        if time.monotonic() > deadline:
            review += 1
            continue
        try:
            approve_consolidation(
                core, key_of(r["id"]), project=core.scopes.root_of(store), decided_by="policy"
            )
            applied += 1
        except (NotFound, EngramError):
            continue
    return applied, review


@api
def reflect_and_consolidate(
    core: MemoryCore,
    project: str | None = None,
    dry_run: bool = False,
    budget_s: float | None = None,
    level: Literal["auto", "light", "full", "reflection"] = "auto",
) -> ReflectionReport:
    """The session-end pass of the self-tuning schedule (docs/memory-model.md). `auto` follows the count of sessions that ended (end_session counts
    them): light every time, full consolidation + graph pruning once per 5 ended sessions, strategy analysis +
    self-reflection once per 20. The budget follows the heaviest level (30 s / 2 min / 5 min) unless given.
    `dry_run` reports what would be queued and changes nothing (not even which levels ran)."""
    t0 = time.perf_counter()
    store = core.scopes.primary(project)
    count, levels = evolution.due_levels(core, store, dry_run=dry_run, level=level)
    deadline = time.monotonic() + max(0.5, budget_s if budget_s is not None else evolution.budget_for(levels))
    rep = ReflectionReport(dry_run=dry_run, session_count=count, levels=levels)
    if not dry_run:
        rep.entities_backfilled = graph.backfill(core, store)
        fill_proposals(core, store)
    rep.queued = find_pairs(core, store, deadline=deadline, dry_run=dry_run)
    rep.queued["episodic_to_semantic"] = find_episodic_topics(core, store, dry_run=dry_run)
    if "full" in levels:
        rep.queued["promotion"] = find_promotions(core, store, dry_run=dry_run)
        rep.queued["scheduled"] = find_scheduled(core, store, dry_run=dry_run)
        rep.entities_merged = graph.merge_similar_entities(core, store, dry_run=dry_run)
        rep.entities_pruned, rep.edges_invalidated = graph.prune_graph(core, store, dry_run=dry_run)
        rep.associations_pruned = associations.decay(core, store, dry_run=dry_run)
    if not dry_run:
        rep.auto_approved, rep.pending_review = auto_approve(core, store, deadline=deadline)
    else:
        rows = store.q1("SELECT VALUE risk FROM consolidation_queue WHERE status = 'pending'") or []
        rep.pending_review = len(rows)
    if "reflection" in levels:
        rep.evolution = evolution.evolve_memory_system(core, dry_run=dry_run, project=project)
        rep.insights = evolution.reflect(core, store, dry_run=dry_run, evolution=rep.evolution)
    rep.contradictions_open = contradictions.open_count(core, project)
    rep.budget_exhausted = time.monotonic() > deadline
    rep.took_ms = (time.perf_counter() - t0) * 1000
    if not dry_run:
        details = rep.model_dump(mode="json", exclude={"evolution"})
        _log(store, "run", trigger=level, details=details, took_ms=rep.took_ms)
        store.create(
            "reflection_log",
            {
                "triggered_by": level,
                "session_count_at": count,
                "levels": levels,
                "insights_generated": len(rep.insights),
                "entities_merged": rep.entities_merged,
                "edges_pruned": rep.edges_invalidated + rep.entities_pruned,
                "memories_consolidated": rep.auto_approved,
                "details": details,
                "duration_ms": rep.took_ms,
            },
        )
    return rep


@api
def maintain_organisation(core: MemoryCore, project: str | None = None) -> OrganiseMaintenance:
    """A light organising pass, run when called (the daemon's maintenance tick runs `maintain`, not this):
    association decay, proposals for the sweep's decay items, entity backfill. No consolidation is applied."""
    store = core.scopes.primary(project)
    return OrganiseMaintenance(
        associations_pruned=associations.decay(core, store),
        proposals_filled=fill_proposals(core, store),
        entities_backfilled=graph.backfill(core, store, limit=200),
    )
