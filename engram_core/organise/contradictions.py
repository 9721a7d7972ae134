"""Contradictions: found among candidates that share an endpoint or a topic, never across the whole graph
(unrelated facts invalidating each other is a known failure of other memory systems).

Three detectors:
- relation pairs that cannot both hold (`uses X` vs `Y replaces X`; `causes` vs `contradicts` on the same pair);
- functional relations: one subject `uses` two different things of a one-per-project category (two test
  frameworks, two package managers…);
- memories close in topic (cosine ≥ 0.80) that differ in a value (number, version, name) or in negation.

How two memories relate (duplicate, update, distinct) is `verdicts.judge`; this module queues and resolves.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

import numpy as np

from ..memory.writing import write_into
from ..models import (
    BulkOutcome,
    Contradiction,
    ContradictionCounts,
    ContradictionOutcome,
    MemoryIn,
    MemoryType,
)
from ..storage import ScopeStore, key_of, plain
from . import entities as ex
from . import subjects as sj
from .base import (
    EngramError,
    MemoryCore,
    NotFound,
    api,
    rid,
    short_hash,
    to_memory,
)
from .graph import entity_key, relation_key
from .verdicts import CANDIDATE_COSINE, DUPLICATE_COSINE, judge

# ── queueing ─────────────────────────────────────────────────
NEAR_MAX_PER_MEMORY = (
    2  # a new memory raises at most this many topic pairs (the closest): see docs/organise.md
)


@dataclass
class Candidate:
    """A pair worth raising, found while a chunk is written; `queue` writes a chunk's candidates at once."""

    kind: str
    a: str
    b: str
    evidence: list[str]
    at: datetime
    relation_a: str | None = None
    relation_b: str | None = None
    suggested: str | None = None  # keep_a / keep_b: the newer statement, when time says which holds
    confidence: float = 0.5
    strong: bool = False  # apply `suggested` without asking


def pair_key(a: str, b: str) -> str:
    """The queue row of a memory pair, whichever way round it was found."""
    lo, hi = sorted((a, b))
    return short_hash("contradiction", lo, hi)


def queue_key(c: Candidate) -> str:
    """One row per conflicting pair of relations (every memory that states one of them again adds its evidence
    to that row instead of raising a new one); else one per memory pair."""
    if c.relation_a and c.relation_b:
        lo, hi = sorted((c.relation_a, c.relation_b))
        return short_hash("contradiction-relations", lo, hi)
    return pair_key(c.a, c.b)


_QUEUE = """
-- The row of each pair: its own id, or (stores written before ids were derived from the pair) a lookup.
-- Two lookups on the cq_pair index, not one with OR (which scans the table).
LET $old = array::map($cands, |$c| IF record::exists($c.id) { $c.id } ELSE {
  (SELECT VALUE id FROM contradiction_queue WHERE memory_a = $c.row.memory_a AND memory_b = $c.row.memory_b
     LIMIT 1)[0]
  ?? (SELECT VALUE id FROM contradiction_queue WHERE memory_a = $c.row.memory_b AND memory_b = $c.row.memory_a
     LIMIT 1)[0] });
FOR $i IN 0..array::len($cands) {
  LET $c = $cands[$i];
  IF $old[$i] != NONE { UPDATE $old[$i] SET evidence = array::union(evidence, $c.row.evidence) RETURN NONE; }
  ELSE { CREATE $c.id CONTENT $c.row RETURN NONE; };
};
RETURN $old;
"""


def queue(store: ScopeStore, cands: list[Candidate]) -> list[str]:
    """Queue each pair once, whatever its state: a pair resolved or dismissed is not raised again (a pair met
    again gains the new evidence). A pair of conflicting relations is one pair, whichever memories state it
    (`queue_key`). One round trip; returns the ids of the pairs queued now."""
    merged: dict[str, Candidate] = {}
    # By memory pair first (the first finding names the row), then by `queue_key`.
    for key_of_cand in (lambda c: pair_key(c.a, c.b), queue_key):
        found, merged = [c for c in (merged.values() if merged else cands) if c.a != c.b], {}
        for c in found:
            k = key_of_cand(c)
            if k in merged:
                merged[k].evidence = list(dict.fromkeys([*merged[k].evidence, *c.evidence]))
            else:
                merged[k] = Candidate(
                    c.kind,
                    c.a,
                    c.b,
                    list(c.evidence),
                    c.at,
                    c.relation_a,
                    c.relation_b,
                    c.suggested,
                    c.confidence,
                    c.strong,
                )
    if not merged:
        return []
    rows = [
        {
            "id": rid("contradiction_queue", k),
            "row": {
                "kind": c.kind,
                "memory_a": c.a,
                "memory_b": c.b,
                "evidence": c.evidence,
                "relation_a": c.relation_a,
                "relation_b": c.relation_b,
                "detected_at": c.at,
                "suggested": c.suggested,
                "confidence": c.confidence,
            },
        }
        for k, c in merged.items()
    ]
    old = store.q(_QUEUE, {"cands": rows})[-1] or []
    return [k for k, was in zip(merged, old, strict=True) if was is None]


def settle_strong(core: MemoryCore, store: ScopeStore, cands: list[Candidate], queued: list[str]) -> int:
    """Pairs queued now whose newer statement names the value it replaced: the suggested resolution is applied
    without asking (decided_by 'policy'), with the prior state kept for `reopen_contradiction`."""
    strong = {pair_key(c.a, c.b): c for c in cands if c.strong and c.suggested and c.relation_a is None}
    n = 0
    for key in queued:
        c = strong.get(key)
        if c is None:
            continue
        # Queued a moment ago by `queue` (and new then): no need to read it back.
        row = {"id": rid("contradiction_queue", key), "memory_a": c.a, "memory_b": c.b, "status": "open"}
        try:
            _resolve(core, store, row, c.suggested, None, "policy")  # type: ignore[arg-type]
            n += 1
        except (NotFound, EngramError):
            continue
    return n


def _live_evidence(store: ScopeStore, evidence: list[str], exclude: str | None) -> str | None:
    for k in reversed(evidence or []):
        if k != exclude and k in store.summaries:
            return k
    return None


def check_relations(
    core: MemoryCore,
    store: ScopeStore,
    memory_key: str | None,
    new_rels: list[ex.ExtractedRelation],
    live: list[dict[str, Any]],
) -> list[Candidate]:
    """Compare the relations a memory just stated with live relations sharing an endpoint."""
    if memory_key is None:
        return []
    found: list[Candidate] = []
    for r in new_rels:
        if r.relation_type not in ("uses", "replaces", "causes", "contradicts"):
            continue
        src = entity_key(r.source.key, r.source.entity_type)
        dst = entity_key(r.target.key, r.target.entity_type)
        for old in live:
            o_src, o_dst, o_type = key_of(old["in"]), key_of(old["out"]), old["relation_type"]
            if memory_key in (old.get("evidence") or []) and len(old.get("evidence") or []) == 1:
                continue  # stated by this same memory
            kind = reason = None
            if r.relation_type == "uses" and o_type == "uses" and o_src == src and o_dst != dst:
                cat = r.target.category
                if cat and cat in ex.FUNCTIONAL and old.get("category") == cat:
                    kind = "functional"
                    reason = (
                        f"{r.source.name} uses {old.get('out_name')} and {r.target.name}: one {cat} expected"
                    )
            elif r.relation_type == "replaces" and o_type == "uses" and o_dst == dst:
                kind, reason = (
                    "relation_pair",
                    f"{old.get('in_name')} uses {r.target.name}, "
                    f"but {r.source.name} replaces {r.target.name}",
                )
            elif r.relation_type == "uses" and o_type == "replaces" and o_dst == dst:
                kind, reason = (
                    "relation_pair",
                    f"{old.get('in_name')} replaces {r.target.name}, but {r.source.name} uses it",
                )
            elif {r.relation_type, o_type} == {"causes", "contradicts"} and o_src == src and o_dst == dst:
                kind, reason = "relation_pair", f"{r.source.name} both causes and contradicts {r.target.name}"
            if kind is None:
                continue
            other = _live_evidence(store, old.get("evidence") or [], memory_key)
            if other is None or not _same_subject(core, store, other, memory_key):
                continue
            found.append(
                Candidate(
                    kind,
                    other,
                    memory_key,
                    [reason or kind],
                    core.now(),
                    key_of(old["id"]),
                    relation_key(src, r.relation_type, dst),
                )
            )
    return found


def _same_subject(core: MemoryCore, store: ScopeStore, a: str, b: str) -> bool:
    """Relations are extracted with the project as their subject when a text names none, so "the web app uses
    Jest" and "the docs site uses Mocha" both read as "this project uses …", and "use `uv run pytest`" reads
    as using uv: the texts must be about one topic (cosine ≥ RELATION_COSINE) and not name two different
    subjects for their relations to conflict."""
    la, lb = store.summaries.get(a), store.summaries.get(b)
    if la is None or lb is None:
        return True
    va, vb = store.index.embedding(a), store.index.embedding(b)
    if va is not None and vb is not None:
        na, nb = float(np.linalg.norm(va)), float(np.linalg.norm(vb))
        if na > 0 and nb > 0 and float(np.dot(va, vb)) / (na * nb) < RELATION_COSINE:
            return False
    vocab = sj.vocabulary(core, store)
    sa = sj.read(la.content, vocab)
    if sj.compare(sa, sj.read(lb.content, vocab)).same_subject is False or sj.subject_slots(
        la.content, lb.content, sa.values, vocab
    ):
        return False
    # "Uses redis for the rate limiter" and "switched from redis to mongodb for the token refresh" say it of two
    # attributes: the relations ("uses", "replaces") do not tell, the purposes do.
    return sj.other_purposes(la.content, lb.content) is None


RELATION_COSINE = 0.5  # two memories whose relations conflict must be about one topic at least this much
NEAR_K = 12  # how many nearest neighbours of a new memory are judged (besides itself)
CROWDED_SLOT = (
    3  # other values a new memory's one swapped slot takes among its neighbours: a template, not a fact
)


def nearest_for_check(
    store: ScopeStore, vecs: Sequence[np.ndarray | None], later: Sequence[Collection[str]]
) -> list[list[tuple[str, float]]]:
    """`check_near`'s neighbours for a chunk of new memories in one pass over the store's vectors: for each,
    its NEAR_K + 1 nearest (itself among them), leaving out ``later[i]``, the chunk's memories written after it.
    Taken before the chunk's checks: nothing in them takes a memory out of the index (a working memory over
    capacity spills to episodic, which changes its type, read at the check, not its vector)."""
    return store.index.nearest_many(vecs, NEAR_K + 1, later)


@dataclass
class NearFindings:
    """What a new memory's nearest neighbours say of it: contradictions to queue, and duplicates (other key,
    cosine, why) to propose for consolidation."""

    contradictions: list[Candidate]
    duplicates: list[tuple[str, float, str]]


def check_near(
    core: MemoryCore,
    store: ScopeStore,
    key: str,
    content: str,
    near: Sequence[tuple[str, float]],
    *,
    memory_type: str | None = None,
    created_at: datetime | None = None,
    vocab: sj.Vocabulary | None = None,
    gone: Collection[str] = (),
) -> NearFindings:
    """Judge a new memory against its nearest neighbours ``near`` (`nearest_for_check`: best first, the memory
    itself among them, none written after it in its chunk): at most NEAR_MAX_PER_MEMORY contradictions (each
    suggesting the newer statement, by ``created_at``), and every neighbour that says the same thing.

    An episode is never the older side: it records something that happened ("fixed a bug in auth with
    graphql"), which a later change ("we switched from graphql") does not make untrue. As the newer side it
    contradicts a fact or a procedure only when it names the value it replaced ("migrated auth from jest to
    vitest today"): an event that merely mentions a tool says nothing of what is in use."""
    out = NearFindings([], [])
    updates: list[tuple[Candidate, set[str]]] = []
    # This memory's value in a slot -> the values its same-subject neighbours of one shape put there.
    others_at: dict[str, set[str]] = {}
    for other, cos in near:
        if other == key or cos < CANDIDATE_COSINE or other in gone:
            continue
        lt = store.summaries.get(other)
        if lt is None or lt.status in ("archived",) or lt.memory_type == "working":
            continue
        swaps = [(x, y) for x, y in sj.changed_slots(content, lt.content) or [] if x and y]
        new_is_newer = created_at is None or created_at >= lt.created_at
        old_text, new_text = (lt.content, content) if new_is_newer else (content, lt.content)
        v = judge(old_text, new_text, cos, vocab)
        if v.about_same:
            for x, y in swaps:
                others_at.setdefault(x, set()).add(y)
        if v.cls == "update":
            older_type = lt.memory_type if new_is_newer else memory_type
            newer_type = memory_type if new_is_newer else lt.memory_type
            if older_type == "episodic":
                continue  # what happened stays true: a later change supersedes facts and procedures only
            if newer_type == "episodic" and not (v.strong and sj.says_replaced(new_text)):
                continue  # an event mentions what it touched; only one that names what it replaced is a change
            candidate = Candidate(
                v.kind,
                other,
                key,
                [v.why],
                core.now(),
                suggested="keep_b" if new_is_newer else "keep_a",
                confidence=v.confidence,
                strong=v.strong,
            )
            updates.append((candidate, set() if v.strong else {x for x, _ in swaps}))
        elif (
            v.cls == "duplicate"
            and lt.status in ("created", "active")
            # An event and a fact are one statement only when nearly the same text, not by shared values.
            and (memory_type is None or lt.memory_type == memory_type or cos >= DUPLICATE_COSINE)
        ):
            out.duplicates.append((other, cos, v.why))
    # One shape said of one subject with many values in one slot is a template used in many contexts (a command
    # per repository, a tool per task), not one fact that changed: only a stated change is raised there.
    crowded = {mine for mine, values in others_at.items() if len(values) >= CROWDED_SLOT}
    kept = [c for c, mine in updates if not mine & crowded]
    out.contradictions = kept[:NEAR_MAX_PER_MEMORY]
    return out


# ── API ──────────────────────────────────────────────────────
def _to_contradiction(core: MemoryCore, store: ScopeStore, row: dict[str, Any]) -> Contradiction | None:
    try:
        a = to_memory(core, store, row["memory_a"])
        b = to_memory(core, store, row["memory_b"])
    except NotFound:
        return None
    return Contradiction(
        id=key_of(row["id"]),
        kind=row["kind"],
        a=a,
        b=b,
        evidence=row.get("evidence") or [],
        detected_at=row["detected_at"],
        status=row["status"],
        resolution=row.get("resolution"),
        scope=store.scope.value,
        suggested=row.get("suggested"),
        confidence=float(row.get("confidence") or 0.5),
        decided_by=row.get("decided_by"),
        resolved_at=row.get("resolved_at"),
    )


_ORDER = {
    "strongest": "confidence DESC, detected_at DESC, memory_b DESC, memory_a DESC",
    "newest": "detected_at DESC, memory_b DESC, memory_a DESC",
}


@api
def list_contradictions(
    core: MemoryCore,
    project: str | None = None,
    status: Literal["open", "resolved", "all"] = "open",
    limit: int = 100,
    session: str | None = None,
    order: Literal["strongest", "newest"] = "strongest",
    decided_by: str | None = None,
) -> list[Contradiction]:
    """Contradictions with both statements, the evidence and the suggested resolution: the strongest first
    (the detector's confidence), or the newest. `count_contradictions` gives the true totals."""
    out: list[Contradiction] = []
    for store in core.scopes.stores("all", project, session):
        cond = "true" if status == "all" else "status = $s"
        if decided_by:
            cond += " AND decided_by = $d"
        rows = (
            store.q1(
                f"SELECT * FROM contradiction_queue WHERE {cond} ORDER BY {_ORDER[order]} LIMIT $n",
                {"s": status, "n": limit, "d": decided_by},
            )
            or []
        )
        for r in rows:
            c = _to_contradiction(core, store, plain(r))
            if c is not None:
                out.append(c)
    if order == "strongest":
        out.sort(key=lambda c: (c.confidence, c.detected_at, c.b.id, c.a.id), reverse=True)
    else:
        # Pairs detected at the same instant by their newer memory (ids are ULIDs), not row ids.
        out.sort(key=lambda c: (c.detected_at, c.b.id, c.a.id), reverse=True)
    return out[:limit]


@api
def count_contradictions(
    core: MemoryCore, project: str | None = None, session: str | None = None
) -> ContradictionCounts:
    """True totals: open, resolved by a person or an agent, resolved without asking, by kind (open ones)."""
    out = ContradictionCounts()
    for store in core.scopes.stores("all", project, session):
        rows = (
            store.q1(
                "SELECT status, kind, decided_by, count() AS n FROM contradiction_queue "
                "GROUP BY status, kind, decided_by"
            )
            or []
        )
        for r in rows:
            n = int(r["n"])
            if r["status"] == "open":
                out.open += n
                out.open_by_kind[r["kind"]] = out.open_by_kind.get(r["kind"], 0) + n
            elif r.get("decided_by") == "policy":
                out.resolved_without_asking += n
            else:
                out.resolved += n
    return out


def find_item(
    core: MemoryCore, table: str, item_id: str, project: str | None, session: str | None = None
) -> tuple[ScopeStore, dict[str, Any]]:
    key = key_of(item_id)
    for store in core.scopes.stores("all", project, session):  # the caller's project only (issue #13)
        row = store.q1("SELECT * FROM ONLY $id", {"id": rid(table, key)})
        if row:
            return store, plain(row)
    raise NotFound(f"no {table.replace('_', ' ')} item {key!r} (list them first)")


def supersede(store: ScopeStore, key: str, by: str, reason: str, when: datetime) -> list[str]:
    """Keep for audit, hide from recall: status superseded, invalid_at set, relations it alone evidenced end.
    Returns the keys of the relations ended."""
    row = store.get(key) or {}
    store.update_memory(
        key,
        {
            "status": "superseded",
            "status_reason": reason,
            "status_changed_at": when,
            "invalid_at": when,
            "metadata": {**row.get("metadata", {}), "superseded_by": by},
        },
    )
    return store.graph.end_relations_evidenced_only_by(key, when)


Resolution = Literal["keep_a", "keep_b", "keep_both", "merge"]


@api
def resolve_contradiction(
    core: MemoryCore,
    contradiction_id: str,
    resolution: Resolution,
    merged_content: str | None = None,
    project: str | None = None,
    session: str | None = None,
    decided_by: str = "user",
) -> ContradictionOutcome:
    """keep_a / keep_b: the other is superseded (kept for audit, hidden from recall, its relations end);
    keep_both: both hold (in different contexts) and the pair is not raised again; merge: one new memory
    replaces both (give `merged_content`, else the two statements are joined, newer first).
    `reopen_contradiction` undoes any of them."""
    store, row = find_item(core, "contradiction_queue", contradiction_id, project, session)
    return _resolve(core, store, row, resolution, merged_content, decided_by)


def _resolve(
    core: MemoryCore,
    store: ScopeStore,
    row: dict[str, Any],
    resolution: Resolution,
    merged_content: str | None,
    decided_by: str,
) -> ContradictionOutcome:
    if row["status"] != "open":
        raise EngramError(f"contradiction {key_of(row['id'])} is already resolved ({row.get('resolution')})")
    a, b = row["memory_a"], row["memory_b"]
    when = core.now()
    out = ContradictionOutcome(id=key_of(row["id"]), resolution=resolution)
    merged_key = None
    ended: list[str] = []
    undo: dict[str, Any] = {"statuses": {}, "metadata": {}}
    for k in (a, b):
        r = store.get(k)
        if r is not None:
            undo["statuses"][k] = r.get("status")
            undo["metadata"][k] = r.get("metadata") or {}
    if resolution in ("keep_a", "keep_b"):
        keep, drop = (a, b) if resolution == "keep_a" else (b, a)
        ended += supersede(store, drop, keep, f"contradiction {out.id}: kept {keep}", when)
        out.kept, out.superseded = [keep], [drop]
        how = (
            "without asking: the newer statement names the value it replaced; "
            if decided_by == "policy"
            else ""
        )
        out.message = f"kept {keep}; {drop} is superseded ({how}hidden from recall, kept for audit)"
    elif resolution == "keep_both":
        for k in (a, b):
            r = store.get(k) or {}
            store.update_memory(
                k,
                {
                    "metadata": {
                        **r.get("metadata", {}),
                        "coexists_with": [
                            *r.get("metadata", {}).get("coexists_with", []),
                            b if k == a else a,
                        ],
                    }
                },
            )
        out.kept = [a, b]
        out.message = "both kept: they hold in different contexts"
    else:
        ra, rb = store.get(a), store.get(b)
        if ra is None or rb is None:
            raise NotFound("one of the two memories no longer exists")
        newer, older = (rb, ra) if rb["created_at"] >= ra["created_at"] else (ra, rb)
        content = (merged_content or "").strip() or f"{newer['content']} (previously: {older['content']})"
        mem = write_into(
            core,
            store,
            MemoryIn(
                content=content,
                memory_type=MemoryType(
                    newer["memory_type"] if newer["memory_type"] != "working" else "episodic"
                ),
                tags=sorted(set(ra.get("tags", [])) | set(rb.get("tags", []))),
                importance=max(ra["importance"], rb["importance"]),
                metadata={"merged_from": [a, b], "contradiction": out.id},
                source="contradiction-merge",
            ),
        )
        merged_key = mem.id
        # The merged memory may itself look like an update of its sources; that pair is settled already.
        for k in (a, b):
            store.q(
                "UPDATE contradiction_queue SET status = 'resolved', resolution = 'merge', resolved_at = $t "
                "WHERE status = 'open' AND ((memory_a = $k AND memory_b = $m) OR (memory_a = $m AND memory_b = $k))",
                {"k": k, "m": merged_key, "t": when},
            )
            ended += supersede(
                store, k, merged_key, f"contradiction {out.id}: merged into {merged_key}", when
            )
            store.update_memory(k, {"consolidated_into": merged_key})
        out.superseded = [a, b]
        out.merged = to_memory(core, store, merged_key)
        out.message = f"merged into {merged_key}; both sources superseded"
    undo["relations"] = ended
    undo["merged"] = merged_key
    store.q(
        "UPDATE $id SET status = 'resolved', resolution = $r, resolved_at = $t, merged_into = $m, "
        "decided_by = $d, undo = $u",
        {
            "id": rid("contradiction_queue", out.id),
            "r": resolution,
            "t": when,
            "m": merged_key,
            "d": decided_by,
            "u": undo,
        },
    )
    return out


@api
def reopen_contradiction(
    core: MemoryCore, contradiction_id: str, project: str | None = None, session: str | None = None
) -> Contradiction:
    """Undo a resolution (a person's, an agent's or one applied without asking): the memories get back their
    status and metadata (a merged memory is archived), the relations it ended hold again, and the pair is open."""
    store, row = find_item(core, "contradiction_queue", contradiction_id, project, session)
    if row["status"] != "resolved":
        raise EngramError(f"contradiction {key_of(row['id'])} is open: nothing to undo")
    undo = row.get("undo") or {}
    if not undo.get("statuses"):
        raise EngramError(
            f"contradiction {key_of(row['id'])} was resolved before resolutions could be undone"
        )
    when = core.now()
    merged = undo.get("merged")
    if merged and store.get(merged) is not None:
        store.set_status(merged, "archived", f"contradiction {key_of(row['id'])} reopened", when)
    for k, status in undo["statuses"].items():
        if store.get(k) is None:
            continue
        store.update_memory(
            k,
            {
                "status": status,
                "status_reason": f"contradiction {key_of(row['id'])} reopened",
                "status_changed_at": when,
                "invalid_at": None,
                "consolidated_into": None,
                "metadata": undo.get("metadata", {}).get(k, {}),
            },
        )
    relations = undo.get("relations") or []
    if relations:
        store.graph.restore_relations(relations)
    store.q(
        "UPDATE $id SET status = 'open', resolution = NONE, resolved_at = NONE, merged_into = NONE, "
        "decided_by = NONE, undo = NONE",
        {"id": rid("contradiction_queue", key_of(row["id"]))},
    )
    c = _to_contradiction(
        core,
        store,
        plain(store.q1("SELECT * FROM ONLY $id", {"id": rid("contradiction_queue", key_of(row["id"]))})),
    )
    if c is None:
        raise NotFound("one of the two memories no longer exists")
    return c


@api
def resolve_contradictions(
    core: MemoryCore,
    resolution: Literal["suggested", "keep_both"] = "suggested",
    project: str | None = None,
    min_confidence: float = 0.0,
    kind: str | None = None,
    session: str | None = None,
) -> BulkOutcome:
    """A bulk resolution of open contradictions: every one at or above ``min_confidence`` (and of ``kind``)
    settled by its suggested resolution (those without one are left open), or a whole class dismissed as
    holding both (keep_both). Each can be undone with `reopen_contradiction`; the ids are in the answer."""
    done: list[str] = []
    left = 0
    for store in core.scopes.stores("all", project, session):
        cond, params = "status = 'open' AND confidence >= $c", dict[str, Any](c=min_confidence)
        if kind:
            cond += " AND kind = $k"
            params["k"] = kind
        for r in (
            store.q1(
                f"SELECT * FROM contradiction_queue WHERE {cond} ORDER BY confidence DESC LIMIT 1000", params
            )
            or []
        ):
            row = plain(r)
            how = row.get("suggested") if resolution == "suggested" else "keep_both"
            if how not in ("keep_a", "keep_b", "keep_both"):
                left += 1
                continue
            try:
                _resolve(core, store, row, cast(Resolution, how), None, "user")
                done.append(key_of(row["id"]))
            except (NotFound, EngramError):
                left += 1
    msg = f"{len(done)} contradiction(s) resolved; each can be undone (reopen_contradiction)"
    if left:
        msg += f"; {left} left open (no suggested resolution)"
    return BulkOutcome(ids=done, count=len(done), message=msg)


def open_count(core: MemoryCore, project: str | None) -> int:
    store = core.scopes.primary(project)
    rows = store.q1("SELECT count() AS n FROM contradiction_queue WHERE status = 'open' GROUP ALL")
    return int(rows[0]["n"]) if rows else 0
