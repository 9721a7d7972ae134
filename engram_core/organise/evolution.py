"""Self-tuning: the memory system reads its own retrieval log and
feedback, proposes bounded parameter changes, and keeps an append-only history.

Rails that hold over time, not just per cycle:
- no proposal under 50 log entries; a cycle that applies consumes the log rows it read (a watermark in
  `evolution_state`), so the same evidence never moves a parameter twice. Feedback given later to a row
  older than the watermark no longer counts;
- a cooldown of one day between applied cycles;
- per cycle scope weights move at most ±0.2 and half-lives ×0.5-2.0; over all cycles each scope weight stays
  within ±50 % of its default and each half-life within ×0.5-×2 of its default (the floors and ceilings);
- evolved half-lives apply to existing memories too: the maintenance sweep moves every memory's half-life to
  the current value for its type and scope (and an applied cycle or a rollback does so at once for open stores);
- `dry_run` changes nothing; settings written by a person (engram.local.md / ENGRAM_*) always win;
  `evolution_history` refuses updates and deletes in the engine itself; `rollback_evolution` undoes the
  newest applied changes (and is itself recorded).
Retrieval strategy weights per query type are not evolved: nothing in recall would read them,
so Engram reports per-strategy usefulness and changes no strategy weight.

Schedule, keyed on the number of sessions that ended in the project (end_session counts them):
the after-turn pass after every session end (30 s budget), full consolidation and graph pruning once every 5 ended
sessions (2 min), strategy analysis and self-reflection once every 20 (5 min). Calling the pass again without
another session ending runs the light level only.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Literal

from surrealdb import RecordID

from ..api import EngramError
from ..memory import lifecycle
from ..memory.maintenance import plan_sweep
from ..memory.scoring import DEFAULT_HALF_LIVES
from ..models import EvolutionChange, EvolutionReport, ParamProposal, RetrievalLogEntry, Rollback, UsageStat
from ..retrieval import hybrid
from ..storage import ScopeStore, key_of, plain
from ..storage.graph_mirror import SUBJECT_TYPES
from . import graph
from .base import MemoryCore, api

MIN_LOG_ENTRIES = 50
MIN_JUDGED = 5  # per scope/type before it may move anything
SCOPE_STEP = 0.2
HALF_LIFE_BOUNDS = (0.5, 2.0)  # per cycle
SCOPE_WEIGHT_RANGE = (0.5, 1.5)  # × the default, over all cycles
HALF_LIFE_RANGE = (0.5, 2.0)  # × the default, over all cycles
COOLDOWN = timedelta(days=1)
WATERMARK = "evolution_log_watermark"
FULL_EVERY = 5
REFLECT_EVERY = 20
LEVELS_DONE = "schedule_levels_done"  # the session count at which full / reflection last ran
BUDGETS_S = {"light": 30.0, "full": 120.0, "reflection": 300.0}
SESSION_COUNTER = lifecycle.SESSION_COUNTER


# ── schedule ─────────────────────────────────────────────────
def session_count(store: ScopeStore) -> int:
    return lifecycle.sessions_ended(store)


def due_levels(
    core: MemoryCore,
    store: ScopeStore,
    *,
    dry_run: bool = False,
    level: Literal["auto", "light", "full", "reflection"] = "auto",
) -> tuple[int, list[str]]:
    """(sessions ended, levels to run now). `auto`: full once each time the count passes a multiple of 5 since
    it last ran, reflection likewise for 20; recorded unless dry_run."""
    n = session_count(store)
    done = lifecycle.state_value(store, LEVELS_DONE, None) or {"full": 0, "reflection": 0}
    levels = ["light"]
    if level in ("full", "reflection") or (
        level == "auto" and n // FULL_EVERY > done.get("full", 0) // FULL_EVERY
    ):
        levels.append("full")
    if level == "reflection" or (
        level == "auto" and n // REFLECT_EVERY > done.get("reflection", 0) // REFLECT_EVERY
    ):
        levels.append("reflection")
    if not dry_run and len(levels) > 1:
        lifecycle.set_state_value(store, LEVELS_DONE, {**done, **{lv: n for lv in levels[1:]}})
    return n, levels


def budget_for(levels: list[str]) -> float:
    return max(BUDGETS_S[lv] for lv in levels)


# ── analysis ─────────────────────────────────────────────────
def _stats(counts: dict[str, list[int]]) -> list[UsageStat]:
    return [
        UsageStat(key=k, judged=v[0], useful=v[1], rate=round(v[1] / v[0], 4) if v[0] else 0.0)
        for k, v in sorted(counts.items())
    ]


def _bump(counts: dict[str, list[int]], key: str, useful: bool) -> None:
    c = counts.setdefault(key, [0, 0])
    c[0] += 1
    c[1] += int(useful)


def evolved_scope_weights(core: MemoryCore) -> dict[str, float]:
    return {**hybrid.EVOLVED_DEFAULT, **core.param("scope_weights", hybrid.EVOLVED_DEFAULT)}


def evolved_half_lives(core: MemoryCore) -> dict[str, float]:
    return {**DEFAULT_HALF_LIVES, **core.param("decay_half_lives", DEFAULT_HALF_LIVES)}


def _clamp(value: float, default: float, span: tuple[float, float]) -> float:
    return min(default * span[1], max(default * span[0], value))


def _last_applied_at(core: MemoryCore) -> datetime | None:
    rows = core.user.q1("SELECT created_at FROM evolution_history ORDER BY created_at DESC LIMIT 1")
    return plain(rows[0]["created_at"]) if rows else None


def sync_half_lives(core: MemoryCore) -> int:
    """Move every open store's memories to the current half-life of their type and scope; returns how many."""
    n = 0
    for store in [*(s for _, s in core.scopes.open_projects()), core.user]:
        plan = plan_sweep(core, store)
        if plan.half_lives:
            store.memories.apply_sweep(core.now(), {}, plan.half_lives, [])
            n += len(plan.half_lives)
    return n


@api
def evolve_memory_system(
    core: MemoryCore, dry_run: bool = True, lookback_days: int = 30, project: str | None = None
) -> EvolutionReport:
    """Per-strategy, per-scope and per-type usefulness from the retrieval log rows not used by an earlier
    cycle, and the bounded parameter changes they justify. Applied only when dry_run is false, there is
    enough data and the cooldown since the last applied change is over."""
    store = core.scopes.primary(project)
    now = core.now()
    since = now - timedelta(days=max(1, lookback_days))
    mark = lifecycle.state_value(store, WATERMARK, None)
    if mark:
        since = max(since, datetime.fromisoformat(mark))
    logs = (
        plain(
            store.q1(
                "SELECT strategy, query_type, scopes, types, was_useful, created_at FROM retrieval_log "
                "WHERE created_at > $s",
                {"s": since},
            )
        )
        or []
    )
    judged = [r for r in logs if r.get("was_useful") is not None]
    rep = EvolutionReport(
        log_entries=len(logs),
        judged_entries=len(judged),
        min_entries=MIN_LOG_ENTRIES,
        enough_data=len(logs) >= MIN_LOG_ENTRIES,
        dry_run=dry_run,
    )
    by_strategy: dict[str, list[int]] = {}
    by_scope: dict[str, list[int]] = {}
    by_type: dict[str, list[int]] = {}
    for r in judged:
        u = bool(r["was_useful"])
        _bump(by_strategy, r.get("strategy") or "hybrid", u)
        for s in set(r.get("scopes") or []):
            _bump(by_scope, s, u)
        for t in set(r.get("types") or []):
            _bump(by_type, t, u)
    rep.strategy_stats, rep.scope_stats, rep.type_stats = (
        _stats(by_strategy),
        _stats(by_scope),
        _stats(by_type),
    )
    if not rep.enough_data:
        rep.message = (
            f"{len(logs)} retrieval log entries not yet used in {lookback_days} days; "
            f"{MIN_LOG_ENTRIES} needed before proposing any change"
        )
        return rep
    overall = sum(v[1] for v in by_strategy.values()) / max(1, sum(v[0] for v in by_strategy.values()))

    manual_scopes = bool(core.settings.scope_weights)
    cur_w = evolved_scope_weights(core)
    new_w = dict(cur_w)
    why: list[str] = []
    for s in rep.scope_stats:
        if s.judged < MIN_JUDGED or s.key not in cur_w:
            continue
        delta = max(-SCOPE_STEP, min(SCOPE_STEP, (s.rate - overall) * 0.5))
        target = round(_clamp(cur_w[s.key] + delta, hybrid.EVOLVED_DEFAULT[s.key], SCOPE_WEIGHT_RANGE), 4)
        if abs(target - cur_w[s.key]) >= 0.01:
            new_w[s.key] = target
            why.append(f"{s.key} useful {s.rate:.0%} vs {overall:.0%} overall")
    if new_w != cur_w:
        rep.proposals.append(
            ParamProposal(
                key="scope_weights",
                current=cur_w,
                proposed=new_w,
                reason="; ".join(why),
                overridden_by_manual=manual_scopes,
            )
        )

    manual_hl = core.settings.half_lives_days or {}
    cur_h = evolved_half_lives(core)
    new_h = dict(cur_h)
    why = []
    for t in rep.type_stats:
        if t.judged < MIN_JUDGED or t.key not in cur_h:
            continue
        # Useful types should fade slower, useless ones faster; one cycle moves at most ×0.5-2.0.
        factor = max(HALF_LIFE_BOUNDS[0], min(HALF_LIFE_BOUNDS[1], 1.0 + (t.rate - overall)))
        target = round(_clamp(cur_h[t.key] * factor, DEFAULT_HALF_LIVES[t.key], HALF_LIFE_RANGE), 6)
        if abs(target / cur_h[t.key] - 1.0) >= 0.05:
            new_h[t.key] = target
            why.append(f"{t.key} ×{target / cur_h[t.key]:.2f} (useful {t.rate:.0%} vs {overall:.0%})")
    if new_h != cur_h:
        rep.proposals.append(
            ParamProposal(
                key="decay_half_lives",
                current=cur_h,
                proposed=new_h,
                reason="; ".join(why),
                overridden_by_manual=bool(set(manual_hl) & {k for k in new_h if new_h[k] != cur_h[k]}),
            )
        )
    if dry_run:
        rep.message = f"{len(rep.proposals)} proposal(s); dry run, nothing applied"
        return rep
    last = _last_applied_at(core)
    if last is not None and now - last < COOLDOWN:
        rep.message = (
            f"{len(rep.proposals)} proposal(s) not applied: the last change was at {last:%Y-%m-%d %H:%M} "
            f"UTC, the cooldown ends at {last + COOLDOWN:%Y-%m-%d %H:%M} UTC; the log rows stay unused"
        )
        return rep
    for p in rep.proposals:
        if p.overridden_by_manual:
            continue
        # A type a person set by hand keeps its value in the settings; the evolved value waits behind it.
        core.set_param(p.key, p.proposed)
        core.user.create(
            "evolution_history",
            {
                "key": p.key,
                "old_value": {"v": p.current},
                "new_value": {"v": p.proposed},
                "reason": p.reason,
                "log_entries": len(logs),
                "created_at": now,
            },
        )
        rep.applied.append(p.key)
    # Every row read is used now, whether it moved a parameter or confirmed the current one.
    newest = max(r["created_at"] for r in logs)
    lifecycle.set_state_value(store, WATERMARK, newest.isoformat())
    if "decay_half_lives" in rep.applied:
        sync_half_lives(core)
    rep.message = f"{len(rep.applied)} change(s) applied from {len(logs)} log rows (now used)" + (
        "; manual settings kept where they exist"
        if any(p.overridden_by_manual for p in rep.proposals)
        else ""
    )
    return rep


@api
def evolution_history(core: MemoryCore, limit: int = 100) -> list[EvolutionChange]:
    """Every applied change and rollback, newest first (append-only)."""
    rows = core.user.q1("SELECT * FROM evolution_history ORDER BY created_at DESC LIMIT $n", {"n": limit})
    return [EvolutionChange(**{**plain(r), "id": key_of(r["id"])}) for r in rows or []]


@api
def rollback_evolution(core: MemoryCore, steps: int = 1) -> list[Rollback]:
    """Undo the newest ``steps`` applied changes (not rollbacks, not already undone), newest first: each
    parameter goes back to its value before that change, and the rollback is recorded in the history."""
    if steps < 1:
        raise EngramError("steps must be at least 1")
    rows = evolution_history(core, limit=10_000)
    undone = {(r.new_value or {}).get("rollback_of") for r in rows}
    todo = [r for r in rows if not (r.new_value or {}).get("rollback_of") and r.id not in undone][:steps]
    if not todo:
        raise EngramError("nothing to roll back: no applied evolution change is left to undo")
    out = []
    for r in todo:
        old = (r.old_value or {}).get("v")
        core.set_param(r.key, old)
        core.user.create(
            "evolution_history",
            {
                "key": r.key,
                "old_value": r.new_value,
                "new_value": {"v": old, "rollback_of": r.id},
                "reason": f"rollback of {r.id} ({r.reason})",
                "created_at": core.now(),
            },
        )
        out.append(Rollback(key=r.key, restored=old, undid=r.id))
    if any(r.key == "decay_half_lives" for r in todo):
        sync_half_lives(core)
    return out


# ── self-reflection (meta-memories) ──────────────────────────
def reflect(
    core: MemoryCore, store: ScopeStore, *, dry_run: bool = False, evolution: EvolutionReport | None = None
) -> list[str]:
    """Insights about the memory system itself (a missing memory type, episodes to consolidate, hub entities,
    decay anomalies), from counts alone."""
    insights: list[tuple[str, str, list[str]]] = []
    total, by_type, by_status = store.memories.count_by()
    for t in ("semantic", "procedural"):
        if total >= 20 and not by_type.get(t):
            insights.append(
                ("memory_gap", f"no {t} memories among {total}: nothing lasting is being learnt", [])
            )
    tag_ep: dict[str, list[str]] = {}
    for k, lt in store.summaries.items():
        if lt.memory_type == "episodic":
            for tag in lt.tags:
                tag_ep.setdefault(tag, []).append(k)
    for tag, keys in tag_ep.items():
        if len(keys) >= 10:
            insights.append(
                (
                    "consolidation_signal",
                    f"{len(keys)} episodic memories tagged {tag!r} could become one semantic memory",
                    keys[:20],
                )
            )
    # An entity's live relations, the co-mentions derived from the memories' entity lists among them (graph.py).
    g = graph.mirror(core, store)
    with g.lock:
        degree = {
            e: len(rels)
            for e, rels in g.touching.items()
            if len(rels) > 20 and g.types.get(e) not in SUBJECT_TYPES
        }
    names = (
        dict(
            store.q1(
                "SELECT VALUE [record::id(id), name] FROM $ids",
                {"ids": [RecordID("entity", e) for e in sorted(degree)]},
            )
            or []
        )
        if degree
        else {}
    )
    for e in sorted(degree, key=lambda e: (-degree[e], e)):
        if e in names:
            insights.append(
                (
                    "graph_insight",
                    f"entity {names[e]!r} links {degree[e]} others: a hub, consider splitting it",
                    [f"entity:{e}"],
                )
            )
    archived = by_status.get("archived", 0)
    if total >= 20 and archived / total > 0.5:
        insights.append(
            ("decay_anomaly", f"{archived} of {total} memories archived: half-lives may be too short", [])
        )
    # The cycle that just ran (it has used its log rows), else a dry look at the rows not yet used.
    rep = evolution or evolve_memory_system(core, dry_run=True, project=core.scopes.root_of(store))
    if rep.enough_data and rep.strategy_stats:
        best = max(rep.strategy_stats, key=lambda s: s.rate)
        insights.append(
            (
                "retrieval_pattern",
                f"{best.key} recall was useful {best.rate:.0%} of {best.judged} judged times",
                [],
            )
        )
    if not dry_run:
        for kind, text, ev in insights:
            store.create("meta_memory", {"insight_type": kind, "description": text, "evidence": ev})
    return [f"{k}: {t}" for k, t, _ in insights]


@api
def retrieval_history(
    core: MemoryCore, memory_id: str, project: str | None = None, limit: int = 50
) -> list[RetrievalLogEntry]:
    """The recalls that returned this memory, newest first, with its rank and any feedback."""
    store, key = core.scopes.locate(memory_id, project)
    targets = [store] if store.scope.value != "session" else []
    for s in (core.project_store(project) if project else None, core.user):
        if s is not None and s not in targets:
            targets.append(s)
    out: list[RetrievalLogEntry] = []
    for s in targets:
        rows = (
            plain(
                s.q1(
                    "SELECT * FROM retrieval_log WHERE $k IN memory_ids ORDER BY created_at DESC LIMIT $n",
                    {"k": key, "n": limit},
                )
            )
            or []
        )
        for r in rows:
            ids = r.get("memory_ids") or []
            out.append(
                RetrievalLogEntry(
                    id=key_of(r["id"]),
                    query=r["query"],
                    strategy=r.get("strategy") or "",
                    query_type=r.get("query_type"),
                    results_count=r.get("results_count", 0),
                    rank=ids.index(key) + 1 if key in ids else None,
                    was_useful=r.get("was_useful"),
                    created_at=r["created_at"],
                )
            )
    out.sort(key=lambda e: e.created_at, reverse=True)
    return out[:limit]
