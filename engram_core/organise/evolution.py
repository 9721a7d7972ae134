"""Self-tuning (seed 004 Phase 5, seed 001 §6-9): the memory system reads its own retrieval log and
feedback, proposes bounded parameter changes, and keeps an append-only history.

Safety rails: no proposal under 50 log entries; scope weights move at most ±0.2 and half-lives at most
×0.5-2.0 per cycle; dry_run changes nothing; settings written by a person (engram.local.md / ENGRAM_*)
always win over evolved values; `evolution_history` refuses updates and deletes in the engine itself.

Schedule (seed 001 §9), keyed on a per-store session counter: every session end a light pass, every 5
sessions full consolidation and graph pruning, every 20 strategy adaptation and self-reflection.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Literal

from .. import retrieval
from ..scoring import DEFAULT_HALF_LIVES
from ..store import ScopeStore, key_of, plain
from .base import EngramService, api, locate, primary_store
from .models import EvolutionReport, ParamProposal, RetrievalLogEntry, UsageStat

MIN_LOG_ENTRIES = 50
MIN_JUDGED = 5  # per scope/type/strategy before it may move anything
SCOPE_STEP = 0.2
HALF_LIFE_BOUNDS = (0.5, 2.0)
STRATEGY_RATE = 0.1  # seed 001 §6.3 learning rate
FULL_EVERY = 5
REFLECT_EVERY = 20
SESSION_COUNTER = "session_counter"


# ── schedule ─────────────────────────────────────────────────
def session_count(store: ScopeStore) -> int:
    v = store.q1("SELECT VALUE value FROM evolution_state WHERE key = $k", {"k": SESSION_COUNTER})
    return int(v[0].get("v", 0)) if v and isinstance(v[0], dict) else 0


def tick_session(service: EngramService, store: ScopeStore, *, dry_run: bool = False,
                 level: Literal["auto", "light", "full", "reflection"] = "auto") -> tuple[int, list[str]]:
    """Count one more session end; returns (count, levels to run)."""
    n = session_count(store) + (0 if dry_run else 1)
    if not dry_run:
        store.q("UPSERT evolution_state SET key = $k, value = {v: $n}, updated_at = time::now() WHERE key = $k",
                {"k": SESSION_COUNTER, "n": n})
        if session_count(store) != n:
            store.q("CREATE evolution_state SET key = $k, value = {v: $n}", {"k": SESSION_COUNTER, "n": n})
    levels = ["light"]
    if level == "full" or level == "reflection" or (level == "auto" and n > 0 and n % FULL_EVERY == 0):
        levels.append("full")
    if level == "reflection" or (level == "auto" and n > 0 and n % REFLECT_EVERY == 0):
        levels.append("reflection")
    return n, levels


# ── analysis ─────────────────────────────────────────────────
def _stats(counts: dict[str, list[int]]) -> list[UsageStat]:
    return [UsageStat(key=k, judged=v[0], useful=v[1], rate=round(v[1] / v[0], 4) if v[0] else 0.0)
            for k, v in sorted(counts.items())]


def _bump(counts: dict[str, list[int]], key: str, useful: bool) -> None:
    c = counts.setdefault(key, [0, 0])
    c[0] += 1
    c[1] += int(useful)


def evolved_scope_weights(service: EngramService) -> dict[str, float]:
    return {**retrieval.EVOLVED_DEFAULT, **service.param("scope_weights", retrieval.EVOLVED_DEFAULT)}


def evolved_half_lives(service: EngramService) -> dict[str, float]:
    return {**DEFAULT_HALF_LIVES, **service.param("decay_half_lives", DEFAULT_HALF_LIVES)}


def _strategy_rows(store: ScopeStore) -> dict[str, dict[str, float]]:
    rows = store.q1("SELECT * FROM strategy_weights") or []
    return {r["query_type"]: {"vector": r["vector_weight"], "keyword": r["keyword_weight"],
                              "graph": r["graph_weight"]} for r in rows}


@api
def evolve_memory_system(service: EngramService, dry_run: bool = True, lookback_days: int = 30,
                         project: str | None = None) -> EvolutionReport:
    """Per-strategy, per-scope and per-type usefulness from the retrieval log and its feedback, and the
    bounded parameter changes they justify. Applied only when dry_run is false and there is enough data."""
    store = primary_store(service, project)
    since = service.now() - timedelta(days=max(1, lookback_days))
    logs = plain(store.q1("SELECT strategy, query_type, scopes, types, was_useful FROM retrieval_log "
                          "WHERE created_at > $s", {"s": since})) or []
    judged = [r for r in logs if r.get("was_useful") is not None]
    rep = EvolutionReport(log_entries=len(logs), judged_entries=len(judged), min_entries=MIN_LOG_ENTRIES,
                          enough_data=len(logs) >= MIN_LOG_ENTRIES, dry_run=dry_run)
    by_strategy: dict[str, list[int]] = {}
    by_scope: dict[str, list[int]] = {}
    by_type: dict[str, list[int]] = {}
    by_qtype: dict[str, dict[str, list[int]]] = {}
    for r in judged:
        u = bool(r["was_useful"])
        _bump(by_strategy, r.get("strategy") or "hybrid", u)
        _bump(by_qtype.setdefault(r.get("query_type") or "general", {}), r.get("strategy") or "hybrid", u)
        for s in set(r.get("scopes") or []):
            _bump(by_scope, s, u)
        for t in set(r.get("types") or []):
            _bump(by_type, t, u)
    rep.strategy_stats, rep.scope_stats, rep.type_stats = _stats(by_strategy), _stats(by_scope), _stats(by_type)
    rep.strategy_weights = _strategy_rows(store)
    if not rep.enough_data:
        rep.message = f"{len(logs)} retrieval log entries in {lookback_days} days; {MIN_LOG_ENTRIES} needed " \
                      "before proposing any change"
        return rep
    overall = sum(v[1] for v in by_strategy.values()) / max(1, sum(v[0] for v in by_strategy.values()))

    manual_scopes = bool(service.settings.scope_weights)
    cur_w = evolved_scope_weights(service)
    new_w = dict(cur_w)
    why: list[str] = []
    for s in rep.scope_stats:
        if s.judged < MIN_JUDGED or s.key not in cur_w:
            continue
        delta = max(-SCOPE_STEP, min(SCOPE_STEP, (s.rate - overall) * 0.5))
        if abs(delta) >= 0.01:
            new_w[s.key] = round(max(0.1, cur_w[s.key] + delta), 4)
            why.append(f"{s.key} useful {s.rate:.0%} vs {overall:.0%} overall")
    if new_w != cur_w:
        rep.proposals.append(ParamProposal(key="scope_weights", current=cur_w, proposed=new_w, reason="; ".join(why),
                                           overridden_by_manual=manual_scopes))

    manual_hl = service.settings.half_lives_days or {}
    cur_h = evolved_half_lives(service)
    new_h = dict(cur_h)
    why = []
    for t in rep.type_stats:
        if t.judged < MIN_JUDGED or t.key not in cur_h:
            continue
        # Useful types should fade slower, useless ones faster; one cycle moves at most ×0.5-2.0.
        factor = max(HALF_LIFE_BOUNDS[0], min(HALF_LIFE_BOUNDS[1], 1.0 + (t.rate - overall)))
        if abs(factor - 1.0) >= 0.05:
            new_h[t.key] = round(cur_h[t.key] * factor, 6)
            why.append(f"{t.key} ×{factor:.2f} (useful {t.rate:.0%} vs {overall:.0%})")
    if new_h != cur_h:
        rep.proposals.append(ParamProposal(key="decay_half_lives", current=cur_h, proposed=new_h,
                                           reason="; ".join(why),
                                           overridden_by_manual=bool(set(manual_hl) & {k for k in new_h
                                                                                        if new_h[k] != cur_h[k]})))

    for qt, strat in by_qtype.items():
        cur = rep.strategy_weights.get(qt, {"vector": 0.4, "keyword": 0.3, "graph": 0.3})
        new = dict(cur)
        for name, field in (("hybrid", "vector"), ("bm25", "keyword")):
            c = strat.get(name)
            if c and c[0] >= MIN_JUDGED:
                new[field] = max(0.05, cur[field] + STRATEGY_RATE * (c[1] / c[0] - 0.5))
        total = sum(new.values())
        new = {k: round(v / total, 4) for k, v in new.items()}
        if new != cur:
            rep.proposals.append(ParamProposal(key=f"strategy_weights.{qt}", current=cur, proposed=new,
                                               reason=f"feedback on {sum(c[0] for c in strat.values())} "
                                                      f"'{qt}' recalls"))
    if dry_run:
        rep.message = f"{len(rep.proposals)} proposal(s); dry run, nothing applied"
        return rep
    for p in rep.proposals:
        if p.overridden_by_manual:
            continue
        if p.key == "scope_weights":
            service.set_param("scope_weights", p.proposed)
        elif p.key == "decay_half_lives":
            # A type a person set by hand keeps its value in the settings; the evolved value waits behind it.
            service.set_param("decay_half_lives", p.proposed)
        elif p.key.startswith("strategy_weights."):
            qt = p.key.split(".", 1)[1]
            store.q("UPSERT strategy_weights SET query_type = $q, vector_weight = $v, keyword_weight = $k, "
                    "graph_weight = $g, update_count += 1, updated_at = time::now() WHERE query_type = $q",
                    {"q": qt, "v": p.proposed["vector"], "k": p.proposed["keyword"], "g": p.proposed["graph"]})
            if not store.q1("SELECT VALUE id FROM strategy_weights WHERE query_type = $q", {"q": qt}):
                store.q("CREATE strategy_weights SET query_type = $q, vector_weight = $v, keyword_weight = $k, "
                        "graph_weight = $g, update_count = 1",
                        {"q": qt, "v": p.proposed["vector"], "k": p.proposed["keyword"], "g": p.proposed["graph"]})
        service.user.create("evolution_history", {"key": p.key, "old_value": {"v": p.current},
                                                  "new_value": {"v": p.proposed}, "reason": p.reason,
                                                  "log_entries": len(logs)})
        rep.applied.append(p.key)
    rep.strategy_weights = _strategy_rows(store)
    rep.message = f"{len(rep.applied)} change(s) applied" + (
        "; manual settings kept where they exist" if any(p.overridden_by_manual for p in rep.proposals) else "")
    return rep


@api
def evolution_history(service: EngramService, limit: int = 100) -> list[dict[str, Any]]:
    rows = service.user.q1("SELECT * FROM evolution_history ORDER BY created_at DESC LIMIT $n", {"n": limit})
    return [{**plain(r), "id": key_of(r["id"])} for r in rows or []]


# ── self-reflection (meta-memories) ──────────────────────────
def reflect(service: EngramService, store: ScopeStore, *, dry_run: bool = False) -> list[str]:
    """Seed 001 §7.3 insights about the memory system itself, from counts alone."""
    insights: list[tuple[str, str, list[str]]] = []
    total, by_type, by_status = store.count_by()
    for t in ("semantic", "procedural"):
        if total >= 20 and not by_type.get(t):
            insights.append(("memory_gap", f"no {t} memories among {total}: nothing lasting is being learnt", []))
    tag_ep: dict[str, list[str]] = {}
    for k, lt in store.light.items():
        if lt.memory_type == "episodic":
            for tag in lt.tags:
                tag_ep.setdefault(tag, []).append(k)
    for tag, keys in tag_ep.items():
        if len(keys) >= 10:
            insights.append(("consolidation_signal", f"{len(keys)} episodic memories tagged {tag!r} could become "
                                                     "one semantic memory", keys[:20]))
    hubs = store.q1("SELECT id, name, count(->relates_to) + count(<-relates_to) AS degree FROM entity "
                    "WHERE entity_type NOT IN ['project', 'person']") or []
    for h in hubs:
        if int(h.get("degree") or 0) > 20:
            insights.append(("graph_insight", f"entity {h['name']!r} links {h['degree']} others: a hub, "
                                              "consider splitting it", [f"entity:{key_of(h['id'])}"]))
    archived = by_status.get("archived", 0)
    if total >= 20 and archived / total > 0.5:
        insights.append(("decay_anomaly", f"{archived} of {total} memories archived: half-lives may be too short", []))
    rep = evolve_memory_system(service, dry_run=True, project=service._project_root_of(store))
    if rep.enough_data and rep.strategy_stats:
        best = max(rep.strategy_stats, key=lambda s: s.rate)
        insights.append(("retrieval_pattern", f"{best.key} recall was useful {best.rate:.0%} of "
                                              f"{best.judged} judged times", []))
    if not dry_run:
        for kind, text, ev in insights:
            store.create("meta_memory", {"insight_type": kind, "description": text, "evidence": ev})
    return [f"{k}: {t}" for k, t, _ in insights]


@api
def retrieval_history(service: EngramService, memory_id: str, project: str | None = None,
                      limit: int = 50) -> list[RetrievalLogEntry]:
    """The recalls that returned this memory, newest first, with its rank and any feedback."""
    store, key = locate(service, memory_id, project)
    targets = [store] if store.scope.value != "session" else []
    for s in (service.project_store(project) if project else None, service.user):
        if s is not None and s not in targets:
            targets.append(s)
    out: list[RetrievalLogEntry] = []
    for s in targets:
        rows = plain(s.q1("SELECT * FROM retrieval_log WHERE $k IN memory_ids ORDER BY created_at DESC LIMIT $n",
                          {"k": key, "n": limit})) or []
        for r in rows:
            ids = r.get("memory_ids") or []
            out.append(RetrievalLogEntry(id=key_of(r["id"]), query=r["query"], strategy=r.get("strategy") or "",
                                         query_type=r.get("query_type"), results_count=r.get("results_count", 0),
                                         rank=ids.index(key) + 1 if key in ids else None,
                                         was_useful=r.get("was_useful"), created_at=r["created_at"]))
    out.sort(key=lambda e: e.created_at, reverse=True)
    return out[:limit]
