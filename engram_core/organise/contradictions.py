"""Contradictions: found among candidates that share an endpoint or a topic, never across the whole graph
(unrelated facts invalidating each other is a known failure of other memory systems).

Three detectors:
- relation pairs of seed 001 §5.3 (`uses X` vs `Y replaces X`; `causes` vs `contradicts` on the same pair);
- functional relations: one subject `uses` two different things of a one-per-project category (two test
  frameworks, two package managers…);
- memories close in topic (cosine ≥ 0.80) that differ in a value (number, version, name) or in negation.

`classify_pair` is also what near-duplicate consolidation uses to tell a duplicate from an update.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import numpy as np

from ..models import Contradiction, ContradictionOutcome, MemoryIn, MemoryType
from ..search_index import tokenize
from ..store import ScopeStore, key_of, plain
from ..writing import write_into
from . import entities as ex
from .base import (
    EngramError,
    MemoryCore,
    NotFound,
    api,
    rid,
    short_hash,
    to_memory,
)
from .graph import end_relations, entity_key, relation_key

TOPIC_COSINE = 0.80  # below this (and little word overlap) two memories are about different things
TOPIC_OVERLAP = 0.6  # share of the longer memory's words the other also has
CANDIDATE_COSINE = 0.5  # nearest neighbours above this are worth a closer look
DUPLICATE_COSINE = 0.86  # at or above (and no differing value/negation): the same statement
FUNCTIONAL_CATEGORIES = {"test_framework", "package_manager", "formatter", "type_checker", "bundler",
                         "web_framework", "frontend_framework", "database", "orm", "linter", "task_queue"}

PairClass = Literal["duplicate", "update", "distinct"]

_NEG = re.compile(r"\b(?:not|no|never|none|nothing|without|cannot|can't|don't|doesn't|didn't|isn't|aren't|"
                  r"wasn't|won't|shouldn't|mustn't|no longer|stopped|avoid|disabled?|deprecated|removed|"
                  r"dropped|forbid(?:den)?|instead of|rather than|n't)\b", re.I)
_VALUE = re.compile(r"\b[a-z]+(?:-[a-z0-9]+)*-\d+[a-z]?\b"  # regions, zones: us-east-1
                    r"|\b\d+(?:[.:]\d+)*(?:ms|s|m|h|d|mb|gb|kb|k|%)?\b|\bv\d+(?:\.\d+)*\b", re.I)
_ANTONYMS = [("enable", "disable"), ("enabled", "disabled"), ("sync", "async"), ("true", "false"),
             ("allow", "deny"), ("on", "off"), ("before", "after"), ("add", "remove"), ("increase", "decrease"),
             ("always", "never"), ("tabs", "spaces"), ("single", "double"), ("local", "remote"),
             ("public", "private"), ("required", "optional"), ("upper", "lower"), ("min", "max"),
             ("ascending", "descending"), ("dev", "prod"), ("staging", "production"), ("http", "https"),
             ("get", "post"), ("asc", "desc"), ("left", "right"), ("first", "last"), ("tab", "space"),
             ("camelcase", "snake_case"), ("blocking", "non-blocking"), ("main", "master")]
_ANT = {a: b for a, b in _ANTONYMS} | {b: a for a, b in _ANTONYMS}


def _negations(text: str) -> int:
    return len(_NEG.findall(text))


def _values(text: str) -> set[str]:
    vals = {m.group(0).lower() for m in _VALUE.finditer(text)}
    for e in ex.extract_entities(text):
        if e.entity_type in ("library", "tool", "file", "url", "error", "function", "class", "command"):
            vals.add(e.key)
    return vals


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z_][a-z0-9_-]*", text.lower()))


def _substitution(ta: set[str], tb: set[str]) -> tuple[str, str] | None:
    """Exactly one word swapped for another ("Jest" → "Vitest", "tabs" → "spaces"), not an inflection."""
    a, b = ta - tb, tb - ta
    if len(a) != 1 or len(b) != 1:
        return None
    x, y = next(iter(a)), next(iter(b))
    if len(os.path.commonprefix([x, y])) >= 4 or x in y or y in x:
        return None  # built/build, config/configs: the same word
    return x, y


def classify_pair(a: str, b: str, cosine: float) -> tuple[PairClass, str]:
    """Duplicate (same statement), update (same topic, a different value or polarity), or distinct.
    Errs towards `update`: treating an update as a duplicate would silently lose the newer fact.

    Same topic means close embeddings, or most words shared: embeddings put "We use Jest for unit tests"
    and "We use Vitest for unit tests" at 0.61, because the one word that differs is the one that matters."""
    ta, tb = set(tokenize(a)), set(tokenize(b))
    overlap = len(ta & tb) / max(len(ta), len(tb)) if ta and tb else 0.0
    if cosine < TOPIC_COSINE and overlap < TOPIC_OVERLAP:
        return "distinct", f"cosine {cosine:.2f}, word overlap {overlap:.2f}: different topics"
    va, vb = _values(a), _values(b)
    if va != vb and (va - vb) and (vb - va):
        return "update", f"values differ: {sorted(va - vb)[:3]} vs {sorted(vb - va)[:3]}"
    na, nb = _negations(a), _negations(b)
    if (na > 0) != (nb > 0):
        return "update", "one states it, the other negates it"
    wa, wb = _words(a), _words(b)
    for w in wa - wb:
        if _ANT.get(w) in wb - wa:
            return "update", f"opposites: {w} vs {_ANT[w]}"
    sub = _substitution(ta, tb)
    if sub and cosine < 0.9:
        return "update", f"one word changed: {sub[0]} → {sub[1]}"
    if va != vb and cosine < 0.93:
        # One side names a value the other lacks: a refinement at best, a change at worst.
        return "update", f"values differ: {sorted(va ^ vb)[:3]}"
    if cosine >= DUPLICATE_COSINE or (ta and tb and len(ta & tb) / len(ta | tb) >= 0.8):
        return "duplicate", f"cosine {cosine:.2f}, same values and polarity"
    return "distinct", f"cosine {cosine:.2f}: related but not the same statement"


# ── queueing ─────────────────────────────────────────────────
NEAR_MAX_PER_MEMORY = 2  # a new memory raises at most this many topic pairs (the closest): see docs/organise.md


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
                merged[k] = Candidate(c.kind, c.a, c.b, list(c.evidence), c.at, c.relation_a, c.relation_b)
    if not merged:
        return []
    rows = [{"id": rid("contradiction_queue", k), "row": {
        "kind": c.kind, "memory_a": c.a, "memory_b": c.b, "evidence": c.evidence, "relation_a": c.relation_a,
        "relation_b": c.relation_b, "detected_at": c.at}} for k, c in merged.items()]
    old = store.q(_QUEUE, {"cands": rows}, memory_rows=())[-1] or []
    return [k for k, was in zip(merged, old, strict=True) if was is None]


def _live_evidence(store: ScopeStore, evidence: list[str], exclude: str | None) -> str | None:
    for k in reversed(evidence or []):
        if k != exclude and k in store.light:
            return k
    return None


def check_relations(core: MemoryCore, store: ScopeStore, memory_key: str | None,
                    new_rels: list[ex.ExtractedRelation], live: list[dict[str, Any]]) -> list[Candidate]:
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
                if cat and cat in FUNCTIONAL_CATEGORIES and old.get("category") == cat:
                    kind = "functional"
                    reason = f"{r.source.name} uses {old.get('out_name')} and {r.target.name}: one {cat} expected"
            elif r.relation_type == "replaces" and o_type == "uses" and o_dst == dst:
                kind, reason = "relation_pair", f"{old.get('in_name')} uses {r.target.name}, " \
                                                f"but {r.source.name} replaces {r.target.name}"
            elif r.relation_type == "uses" and o_type == "replaces" and o_dst == dst:
                kind, reason = "relation_pair", f"{old.get('in_name')} replaces {r.target.name}, " \
                                                f"but {r.source.name} uses it"
            elif {r.relation_type, o_type} == {"causes", "contradicts"} and o_src == src and o_dst == dst:
                kind, reason = "relation_pair", f"{r.source.name} both causes and contradicts {r.target.name}"
            if kind is None:
                continue
            other = _live_evidence(store, old.get("evidence") or [], memory_key)
            if other is None:
                continue
            found.append(Candidate(kind, other, memory_key, [reason or kind], core.now(), key_of(old["id"]),
                                   relation_key(src, r.relation_type, dst)))
    return found


NEAR_K = 5  # how many nearest neighbours of a new memory are judged (besides itself)


def nearest_for_check(store: ScopeStore, vecs: Sequence[np.ndarray | None],
                      later: Sequence[Collection[str]]) -> list[list[tuple[str, float]]]:
    """`check_near`'s neighbours for a chunk of new memories in one pass over the store's vectors: for each,
    its NEAR_K + 1 nearest (itself among them), leaving out ``later[i]``, the chunk's memories written after it.
    Taken before the chunk's checks: nothing in them takes a memory out of the index (a working memory over
    capacity spills to episodic, which changes its type, read at the check, not its vector)."""
    return store.index.nearest_many(vecs, NEAR_K + 1, later)


def check_near(core: MemoryCore, store: ScopeStore, key: str, content: str,
               near: Sequence[tuple[str, float]], *, memory_type: str | None = None) -> list[Candidate]:
    """Memories close in topic to the new one that differ in a value or in negation: the closest
    NEAR_MAX_PER_MEMORY of its NEAR_K nearest neighbours ``near`` (`nearest_for_check`: best first, the memory
    itself among them, none written after it in its chunk).

    Two episodes never contradict each other: each records something that happened ("fixed a bug in auth",
    "fixed the same kind of bug in payments"); a fact or a procedure can be contradicted, by either."""
    found: list[Candidate] = []
    for other, cos in near:
        if other == key or cos < CANDIDATE_COSINE:
            continue
        lt = store.light.get(other)
        if lt is None or lt.status in ("archived",) or lt.memory_type == "working":
            continue
        if memory_type == "episodic" and lt.memory_type == "episodic":
            continue
        cls, why = classify_pair(lt.content, content, cos)
        if cls != "update":
            continue
        kind = "negation" if "negat" in why else "value"
        found.append(Candidate(kind, other, key, [why], core.now()))
        if len(found) >= NEAR_MAX_PER_MEMORY:
            break
    return found


# ── API ──────────────────────────────────────────────────────
def _to_contradiction(core: MemoryCore, store: ScopeStore, row: dict[str, Any]) -> Contradiction | None:
    try:
        a = to_memory(core, store, row["memory_a"])
        b = to_memory(core, store, row["memory_b"])
    except NotFound:
        return None
    return Contradiction(id=key_of(row["id"]), kind=row["kind"], a=a, b=b, evidence=row.get("evidence") or [],
                         detected_at=row["detected_at"], status=row["status"], resolution=row.get("resolution"),
                         scope=store.scope.value)


@api
def list_contradictions(core: MemoryCore, project: str | None = None,
                        status: Literal["open", "resolved", "all"] = "open", limit: int = 100,
                        session: str | None = None) -> list[Contradiction]:
    out: list[Contradiction] = []
    for store in core.scopes.stores("all", project, session):
        cond = "true" if status == "all" else "status = $s"
        rows = store.q1(f"SELECT * FROM contradiction_queue WHERE {cond} "
                        "ORDER BY detected_at DESC, memory_b DESC, memory_a DESC LIMIT $n",
                        {"s": status, "n": limit}) or []
        for r in rows:
            c = _to_contradiction(core, store, plain(r))
            if c is not None:
                out.append(c)
    # Newest first; pairs detected at the same instant by their newer memory (ids are ULIDs), not row ids.
    out.sort(key=lambda c: (c.detected_at, c.b.id, c.a.id), reverse=True)
    return out[:limit]


def find_item(core: MemoryCore, table: str, item_id: str, project: str | None,
               session: str | None = None) -> tuple[ScopeStore, dict[str, Any]]:
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
    store.update_memory(key, {"status": "superseded", "status_reason": reason, "status_changed_at": when,
                              "invalid_at": when,
                              "metadata": {**row.get("metadata", {}), "superseded_by": by}})
    ended = store.q1("UPDATE relates_to SET invalid_at = $t WHERE invalid_at IS NONE AND $k IN evidence "
                     "AND array::len(array::complement(evidence, [$k])) = 0 RETURN VALUE record::id(id)",
                     {"t": when, "k": key})
    return [str(k) for k in ended or []]


@api
def resolve_contradiction(core: MemoryCore, contradiction_id: str,
                          resolution: Literal["keep_a", "keep_b", "keep_both", "merge"],
                          merged_content: str | None = None, project: str | None = None,
                          session: str | None = None) -> ContradictionOutcome:
    """keep_a / keep_b: the other is superseded (kept for audit, hidden from recall, its relations end);
    keep_both: both hold (in different contexts) and the pair is not raised again; merge: one new memory
    replaces both (give `merged_content`, else the two statements are joined, newer first)."""
    store, row = find_item(core, "contradiction_queue", contradiction_id, project, session)
    if row["status"] != "open":
        raise EngramError(f"contradiction {key_of(row['id'])} is already resolved ({row.get('resolution')})")
    a, b = row["memory_a"], row["memory_b"]
    when = core.now()
    out = ContradictionOutcome(id=key_of(row["id"]), resolution=resolution)
    merged_key = None
    ended: list[str] = []
    if resolution in ("keep_a", "keep_b"):
        keep, drop = (a, b) if resolution == "keep_a" else (b, a)
        ended += supersede(store, drop, keep, f"contradiction {out.id}: kept {keep}", when)
        out.kept, out.superseded = [keep], [drop]
        out.message = f"kept {keep}; {drop} is superseded (hidden from recall, kept for audit)"
    elif resolution == "keep_both":
        for k in (a, b):
            r = store.get(k) or {}
            store.update_memory(k, {"metadata": {**r.get("metadata", {}),
                                                 "coexists_with": [*r.get("metadata", {}).get("coexists_with", []),
                                                                   b if k == a else a]}})
        out.kept = [a, b]
        out.message = "both kept: they hold in different contexts"
    else:
        ra, rb = store.get(a), store.get(b)
        if ra is None or rb is None:
            raise NotFound("one of the two memories no longer exists")
        newer, older = (rb, ra) if rb["created_at"] >= ra["created_at"] else (ra, rb)
        content = (merged_content or "").strip() or f"{newer['content']} (previously: {older['content']})"
        mem = write_into(core, store, MemoryIn(
            content=content, memory_type=MemoryType(newer["memory_type"] if newer["memory_type"] != "working"
                                                    else "episodic"),
            tags=sorted(set(ra.get("tags", [])) | set(rb.get("tags", []))),
            importance=max(ra["importance"], rb["importance"]),
            metadata={"merged_from": [a, b], "contradiction": out.id}, source="contradiction-merge"))
        merged_key = mem.id
        # The merged memory may itself look like an update of its sources; that pair is settled already.
        for k in (a, b):
            store.q("UPDATE contradiction_queue SET status = 'resolved', resolution = 'merge', resolved_at = $t "
                    "WHERE status = 'open' AND ((memory_a = $k AND memory_b = $m) OR (memory_a = $m AND memory_b = $k))",
                    {"k": k, "m": merged_key, "t": when})
            ended += supersede(store, k, merged_key, f"contradiction {out.id}: merged into {merged_key}", when)
            store.update_memory(k, {"consolidated_into": merged_key})
        out.superseded = [a, b]
        out.merged = to_memory(core, store, merged_key)
        out.message = f"merged into {merged_key}; both sources superseded"
    store.q("UPDATE $id SET status = 'resolved', resolution = $r, resolved_at = $t, merged_into = $m",
            {"id": rid("contradiction_queue", out.id), "r": resolution, "t": when, "m": merged_key})
    if ended:
        end_relations(core, store, ended)
    return out


def open_count(core: MemoryCore, project: str | None) -> int:
    store = core.scopes.primary(project)
    rows = store.q1("SELECT count() AS n FROM contradiction_queue WHERE status = 'open' GROUP ALL")
    return int(rows[0]["n"]) if rows else 0
