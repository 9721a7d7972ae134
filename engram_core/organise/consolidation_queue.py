"""What goes into the consolidation queue: the reasons and their risk, the extractive proposal (the strongest
statement, union of tags, summed access, max importance, sources linked), queuing an item, the duplicate
groups, and proposals for the items the core sweep queued. The detectors, the review API and the passes:
consolidation.py.
"""

from __future__ import annotations

from ..memory.scoring import days_between, memory_strength
from ..models import (
    Proposal,
)
from ..storage import ScopeStore, key_of
from . import associations
from .base import MemoryCore, NotFound, rid, short_hash

REASONS = ("decay", "duplicate", "promotion", "merge", "scheduled", "episodic_to_semantic")
BASE_RISK = {
    "duplicate": 0.1,
    "decay": 0.2,
    "promotion": 0.5,
    "merge": 0.6,
    "scheduled": 0.5,
    "episodic_to_semantic": 0.5,
}
DEFAULT_AUTO_BELOW = 0.3
SINGLE_DECAY_RISK = 0.35
MERGE_COSINE = 0.80
MIN_EPISODES = 3
LIVE = ("created", "active")


def auto_approve_below(core: MemoryCore) -> float:
    """Risk under which items are applied without review (evolution_state key, configurable)."""
    return float(core.param("consolidation_auto_approve_below", DEFAULT_AUTO_BELOW))


def risk_for(reason: str, n_sources: int, agent_summary: bool = False) -> float:
    # More sources folded into one statement lose more; an agent-written summary loses less than extraction.
    risk = BASE_RISK.get(reason, 0.5) + 0.05 * max(0, n_sources - 2) - (0.1 if agent_summary else 0.0)
    if reason == "decay" and n_sources == 1:
        risk = SINGLE_DECAY_RISK  # approving it archives the memory: a person decides
    return round(min(1.0, max(0.0, risk)), 3)


def replay_priority(core: MemoryCore, store: ScopeStore, key: str) -> float:
    lt = store.summaries.get(key)
    if lt is None:
        return 0.0
    recency = 0.5 ** (max(0.0, days_between(lt.last_accessed_at, core.now())) / 7.0)
    assoc = min(1.0, sum(associations.adjacency(core, store).get(key, {}).values()))
    return float(0.5 * lt.importance + 0.3 * recency + 0.2 * assoc)


def extractive(
    core: MemoryCore, store: ScopeStore, keys: list[str], reason: str, topic: str | None = None
) -> Proposal:
    rows = [r for r in (store.get_many(keys) or {}).values()]
    if not rows:
        raise NotFound("the sources of this item no longer exist")
    now = core.now()
    strongest = max(
        rows,
        key=lambda r: (
            memory_strength(
                r["importance"], r["half_life_days"], r["access_count"], r["last_accessed_at"], now
            ),
            r["access_count"],
            r["created_at"],
        ),
    )
    content = strongest["content"]
    mtype = strongest["memory_type"]
    if reason == "episodic_to_semantic":
        mtype = "semantic"
        # A different text from the source's, or the core would fold it back into that episode by hash.
        content = f"Recurring across {len(rows)} episodes" + (f" ({topic})" if topic else "") + f": {content}"
    elif reason == "scheduled":
        content = f"Episode summary ({len(rows)} memories): " + " | ".join(
            r["content"][:200] for r in sorted(rows, key=lambda r: r["created_at"])
        )
    if mtype == "working":
        mtype = "episodic"
    tags: list[str] = []
    for r in rows:
        tags += [t for t in r.get("tags", []) if t not in tags]
    return Proposal(
        content=content[:20_000],
        memory_type=mtype,
        tags=tags[:64],
        importance=max(r["importance"] for r in rows),
        access_count=sum(r["access_count"] for r in rows),
        source="promotion" if reason == "promotion" else "extractive",
    )


def queue(
    core: MemoryCore,
    store: ScopeStore,
    reason: str,
    keys: list[str],
    *,
    priority: float,
    topic: str | None = None,
    dry_run: bool = False,
    evidence: list[str] | None = None,
) -> str | None:
    """Queue once: an item pending (or rejected) on the same set of memories is not queued again."""
    keys = sorted(set(keys))
    existing = store.q1(
        "SELECT VALUE id FROM consolidation_queue WHERE reason = $r AND status IN ['pending', "
        "'rejected'] AND array::sort(memory_ids) = $ids LIMIT 1",
        {"r": reason, "ids": [rid("memory", k) for k in keys]},
    )
    if existing or dry_run:
        return None
    proposal = extractive(core, store, keys, reason, topic)
    # A duplicate group's id comes from its memories: the write path proposes it whenever its chunk ends, and
    # the ids the service hands out must not depend on when that is.
    key = short_hash("consolidation", reason, *keys) if reason == "duplicate" else None
    if key is not None and store.q1("SELECT VALUE id FROM ONLY $id", {"id": rid("consolidation_queue", key)}):
        return None
    row = store.create(
        "consolidation_queue",
        key=key,
        fields={
            "memory_id": rid("memory", keys[0]),
            "memory_ids": [rid("memory", k) for k in keys],
            "reason": reason,
            "priority": round(priority, 4),
            "risk": risk_for(reason, len(keys)),
            "topic": topic,
            "proposal": proposal.model_dump(),
            "created_at": core.now(),
            "evidence": evidence or [],
        },
    )
    return key_of(row["id"])


MAX_GROUP = 6  # a duplicate group grows to this many memories; past it a new item starts


def propose_duplicates(core: MemoryCore, store: ScopeStore, pairs: list[tuple[str, str, float, str]]) -> int:
    """Near-duplicates found as memories are written (or by the reflection pass): (memory, memory, cosine, why).
    Pairs that share a memory form one group; a group that meets a pending duplicate item joins it. A pair a
    person rejected is not proposed again. Returns how many items were created or grown."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    why: dict[frozenset[str], tuple[float, str]] = {}
    for a, b, cos, reason in pairs:
        if a == b:
            continue
        parent[find(a)] = find(b)
        why[frozenset((a, b))] = (cos, reason)
    if not why:
        return 0
    groups: dict[str, set[str]] = {}
    for k in list(parent):
        groups.setdefault(find(k), set()).add(k)
    members = sorted(parent)
    rows = (
        store.q1(
            "SELECT id, memory_ids, status, evidence FROM consolidation_queue WHERE reason = 'duplicate' "
            "AND status IN ['pending', 'rejected'] AND memory_ids CONTAINSANY $ids",
            {"ids": [rid("memory", k) for k in members]},
        )
        or []
    )
    rejected = [{key_of(m) for m in r["memory_ids"]} for r in rows if r["status"] == "rejected"]
    pending = [
        (r["id"], {key_of(m) for m in r["memory_ids"]}, list(r.get("evidence") or []))
        for r in rows
        if r["status"] == "pending"
    ]
    n = 0
    for group in groups.values():
        evidence = [
            f"{_short(a)} ≈ {_short(b)}: {w[1]}"
            for pair, w in sorted(why.items(), key=lambda x: -x[1][0])
            if pair <= group and not any(pair <= r for r in rejected)
            for a, b in [sorted(pair)]
        ]
        if not evidence:
            continue
        cos = max(w[0] for pair, w in why.items() if pair <= group)
        joined = next((p for p in pending if p[1] & group and len(p[1] | group) <= MAX_GROUP), None)
        if joined is not None:
            item_id, old, old_evidence = joined
            keys = sorted(old | group)
            if set(keys) == old:
                continue
            proposal = extractive(core, store, keys, "duplicate")
            store.q(
                "UPDATE $id SET memory_ids = $ids, evidence = $ev, proposal = $p, risk = $r, "
                "priority = math::max([priority, $pr])",
                {
                    "id": item_id,
                    "ids": [rid("memory", k) for k in keys],
                    "ev": list(dict.fromkeys([*old_evidence, *evidence]))[:20],
                    "p": proposal.model_dump(),
                    "r": risk_for("duplicate", len(keys)),
                    "pr": round(cos, 4),
                },
            )
            joined[1].update(keys)
            n += 1
        elif queue(core, store, "duplicate", sorted(group)[:MAX_GROUP], priority=cos, evidence=evidence):
            n += 1
    return n


def _short(key: str) -> str:
    return key[-8:]


def fill_proposals(core: MemoryCore, store: ScopeStore) -> int:
    """Items the core sweep queued (decay) carry no proposal yet."""
    rows = (
        store.q1(
            "SELECT id, reason, memory_ids, topic FROM consolidation_queue WHERE status = 'pending' "
            "AND proposal IS NONE LIMIT 500"
        )
        or []
    )
    n = 0
    for r in rows:
        keys = [key_of(m) for m in r.get("memory_ids") or []]
        try:
            p = extractive(core, store, keys, r["reason"], r.get("topic"))
        except NotFound:
            store.q("UPDATE $id SET status = 'failed', note = 'sources gone'", {"id": r["id"]})
            continue
        store.q(
            "UPDATE $id SET proposal = $p, risk = $k",
            {"id": r["id"], "p": p.model_dump(), "k": risk_for(r["reason"], len(keys))},
        )
        n += 1
    return n
