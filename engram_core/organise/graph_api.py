"""The knowledge graph as the agent reads and states it: the graph search (`search_knowledge_graph`, with the
co-mentions shown as relations), one memory's graph (`memory_graph`), entities the agent names (`add_entities`)
and relations it states (`state_relation`). The extraction, the mirror's rules and maintenance: graph.py."""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..models import (
    AddEntitiesResult,
    EntityIn,
    GraphEntity,
    GraphRelation,
    GraphResult,
    RelateResult,
    RelationType,
)
from ..redaction import redact_text
from ..storage import ScopeStore, decode_vector, encode_vector, key_of, plain
from ..storage.graph_mirror import CO_PREFIX, GraphMirror, co_mention_core
from ..storage.graph_tables import EVIDENCE_MAX
from . import entities as ex
from . import graph
from .base import EngramError, MemoryCore, api, as_dt, rid
from .graph import (
    ENTITY_COSINE,
    Extraction,
    embed_names,
    entity_key,
    mirror,
    query_seeds,
    relation_key,
    write_extractions,
)

# (Entity and relation rows come from graph.py's builders, looked up at each call: tests stand in older ones.)

# memory keys a graph answer lists for an entity, the newest: a library named in thousands of notes would put
# all of them in each answer (megabytes into the agent's context, and minutes to gather)
MENTIONS_SHOWN = 50


# ── reading ──────────────────────────────────────────────────
def _entities(rows: list[dict[str, Any]], scope: str, mentions: dict[str, list[str]]) -> list[GraphEntity]:
    out = []
    for r in rows:
        k = key_of(r["id"])
        out.append(
            GraphEntity(
                id=k,
                name=r["name"],
                entity_type=r["entity_type"],
                category=r.get("category"),
                description=r.get("description") or "",
                mention_count=r.get("mention_count", 0),
                confidence=r.get("confidence", 0.7),
                scope=scope,
                memory_ids=mentions.get(k, []),
            )
        )
    return out


def _relations(rows: list[dict[str, Any]], names: dict[str, str], scope: str) -> list[GraphRelation]:
    out = []
    for r in rows:
        a, b = key_of(r["in"]), key_of(r["out"])
        out.append(
            GraphRelation(
                id=key_of(r["id"]),
                source=a,
                target=b,
                source_name=names.get(a, ""),
                target_name=names.get(b, ""),
                relation_type=r["relation_type"],
                weight=r["weight"],
                confidence=r["confidence"],
                evidence=list(r.get("evidence") or []),
                valid_from=as_dt(r.get("valid_from")),
                invalid_at=as_dt(r.get("invalid_at")),
                scope=scope,
            )
        )
    return out


def _co_mention_rows(
    g: GraphMirror, store: ScopeStore, frontier: set[str], most: int
) -> list[dict[str, Any]]:
    """The co-mentions at the frontier, as the rows a stored relation has (they have none: derived from the
    memories' entity lists), the strongest ``most``. Evidence: the memories that link them in that order, newest
    last, among the newest 200 naming both (their lists read here: the mirror keeps who names an entity, not in what
    order); confidence as a stored relation's would be after that many (0.5, +0.05 a memory); valid from the first."""
    with g.lock:
        found: dict[str, tuple[str, str, float]] = {}
        for ekey in sorted(frontier):
            for k in g.touching.get(ekey, ()):
                if k.startswith(CO_PREFIX):
                    found[k] = g.rels[k]
        chosen = sorted(found.items(), key=lambda kv: (-kv[1][2], kv[0]))[:most]
        naming: dict[str, list[str]] = {}
        for k, (a, b, _w) in chosen:
            by_a, by_b = g.mentioned_by.get(a, {}), g.mentioned_by.get(b, {})
            small, large = (by_a, by_b) if len(by_a) <= len(by_b) else (by_b, by_a)
            # memory keys are ULIDs: oldest first; the newest few only (a pair of hubs is named by thousands)
            naming[k] = sorted(m for m in small if m in large)[-4 * EVIDENCE_MAX :]
        types = dict(g.types)
    wanted = sorted({m for ms in naming.values() for m in ms})
    lists = (
        {
            key_of(r["id"]): [key_of(e) for e in r.get("entities") or []]
            for r in store.q1("SELECT id, entities FROM $ids", {"ids": [rid("memory", m) for m in wanted]})
            or []
        }
        if wanted
        else {}
    )
    rows = []
    for k, (a, b, w) in chosen:
        both = []
        for m in naming[k]:
            core = co_mention_core(lists.get(m, []), types)
            if a in core and b in core and core.index(a) < core.index(b):
                both.append(m)
        first = store.summaries.get(both[0]) if both else None
        rows.append(
            {
                "id": rid("relates_to", k),
                "in": rid("entity", a),
                "out": rid("entity", b),
                "relation_type": "related_to",
                "weight": w,
                "confidence": min(1.0, 0.5 + 0.05 * max(0, len(both) - 1)),
                "evidence": both[-EVIDENCE_MAX:],
                "valid_from": first.created_at if first is not None else None,
                "invalid_at": None,
            }
        )
    return rows


def _expand(
    core: MemoryCore, store: ScopeStore, seeds: set[str], depth: int, limit: int, include_invalid: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, list[str]]]:
    g = mirror(core, store)
    frontier, seen = set(seeds), set(seeds)
    # Sets are walked sorted: the entities, edges and memories returned (and which ones `limit` keeps) must not
    # depend on string hashing (PYTHONHASHSEED).
    edges: dict[str, dict[str, Any]] = {}
    cond = "" if include_invalid else " WHERE invalid_at IS NONE"
    for _ in range(max(0, depth)):
        if not frontier:
            break
        # The stored relations through the graph keys (schema 008), bound by LET first: the engine (3.2.4) orders
        # and limits a function's result wrongly when it is the FROM itself. With the co-mentions, strongest
        # first, ties by id.
        rows = [
            plain(r)
            for r in store.q1(
                f"LET $x = array::distinct($f<->relates_to); SELECT * FROM $x{cond} "
                "ORDER BY weight DESC, id LIMIT $lim",
                {"f": [rid("entity", k) for k in sorted(frontier)], "lim": limit * 5},
            )
            or []
        ]
        rows += [plain(r) for r in _co_mention_rows(g, store, frontier, limit * 5)]
        rows.sort(key=lambda r: (-float(r["weight"]), key_of(r["id"])))
        nxt: set[str] = set()
        for r in rows[: limit * 5]:
            edges[key_of(r["id"])] = r
            for end in (key_of(r["in"]), key_of(r["out"])):
                if end not in seen and len(seen) < limit:
                    seen.add(end)
                    nxt.add(end)
        frontier = nxt
    ids = [rid("entity", k) for k in sorted(seen)]
    ents = plain(store.q1("SELECT * OMIT embedding FROM $ids", {"ids": ids})) or []
    with g.lock:
        # memory keys are ULIDs: the newest MENTIONS_SHOWN, oldest first
        mentions = {
            k: sorted(heapq.nlargest(MENTIONS_SHOWN, g.mentioned_by[k]))
            for k in sorted(seen)
            if g.mentioned_by.get(k)
        }
    return ents, list(edges.values()), mentions


@api
def search_knowledge_graph(
    core: MemoryCore,
    query: str,
    project: str | None = None,
    session: str | None = None,
    depth: int = 1,
    limit: int = 20,
    include_invalid: bool = False,
) -> GraphResult:
    """Entities whose name matches the query (or that the query names), their relations up to `depth` hops,
    and the memories mentioning them."""
    if not query.strip():
        raise EngramError("the query is empty: name an entity, a file, a library…")
    depth = max(0, min(depth, 3))
    limit = max(1, min(limit, 200))
    result = GraphResult(query=query)
    memory_ids: dict[str, None] = {}  # in the order met, each once
    for store in core.scopes.stores("all", project, session):
        named = sorted(query_seeds(core, store, query))
        needle = query.strip().lower()
        rows = store.q1(
            "SELECT id, mention_count FROM entity WHERE string::contains(name_key, $n) "
            "ORDER BY mention_count DESC, id LIMIT $lim",
            {"n": needle, "lim": limit},
        )
        # The entities the query names first, then those whose name contains it, most mentioned first.
        seeds = list(dict.fromkeys([*named, *(key_of(r["id"]) for r in rows or [])]))[:limit]
        if not seeds:
            continue
        ents, edges, mentions = _expand(core, store, set(seeds), depth, limit, include_invalid)
        names = {key_of(e["id"]): e["name"] for e in ents}
        result.entities += _entities(ents, store.scope.value, mentions)
        result.relations += _relations(edges, names, store.scope.value)
        for e in ents:
            memory_ids.update(dict.fromkeys(mentions.get(key_of(e["id"]), [])))
    result.entities.sort(key=lambda e: (-e.mention_count, e.name, e.id))
    result.memory_ids = list(memory_ids)[: limit * 5]
    return result


@api
def memory_graph(
    core: MemoryCore, memory_id: str, project: str | None = None, session: str | None = None
) -> GraphResult:
    """The entities one memory mentions and the relations among them and their neighbours (TUI detail pane)."""
    store, key = core.scopes.locate(memory_id, project, session)
    listed = store.q1("SELECT VALUE entities FROM ONLY $m", {"m": rid("memory", key)})
    seeds = {key_of(r) for r in listed or []}
    result = GraphResult(query=None)
    if not seeds:
        return result
    ents, edges, mentions = _expand(core, store, seeds, 1, 50, True)
    names = {key_of(e["id"]): e["name"] for e in ents}
    # The pane shows this memory's entities; neighbours appear only as relation endpoints.
    result.entities = _entities([e for e in ents if key_of(e["id"]) in seeds], store.scope.value, mentions)
    result.relations = _relations(edges, names, store.scope.value)
    result.memory_ids = [key]
    return result


def _similar_entity(store: ScopeStore, vec: np.ndarray, entity_type: str) -> dict[str, Any] | None:
    rows = store.q1(
        "SELECT id, name, embedding FROM entity WHERE entity_type = $t AND embedding != NONE",
        {"t": entity_type},
    )
    best, best_sim = None, ENTITY_COSINE
    for r in rows or []:
        stored = decode_vector(r["embedding"])
        if stored is None:
            continue
        sim = float(np.dot(stored, vec))
        if sim > best_sim:
            best, best_sim = r, sim
    return best


@api
def add_entities(
    core: MemoryCore,
    entities: list[EntityIn],
    scope: str = "project",
    project: str | None = None,
    session: str | None = None,
) -> AddEntitiesResult:
    """Entities the agent names explicitly. An existing entity (same name and type, or embedding cosine
    > 0.88 within the scope and type) is strengthened instead of duplicated."""
    store = core.scopes.primary(project, session, scope)
    out = AddEntitiesResult()
    vecs = embed_names(core, [f"{e.name} {e.description or ''}".strip() for e in entities])
    now = core.now()
    for i, e in enumerate(entities):
        x = ex.Extracted(e.name.strip(), e.entity_type)
        k = entity_key(x.key, x.entity_type)
        existing = store.graph.entity(k)
        if not existing and vecs is not None:
            similar = _similar_entity(store, vecs[i], x.entity_type)
            if similar is not None:
                k, existing = key_of(similar["id"]), similar
        if existing:
            store.graph.strengthen_entity(k, e.description, now)
            out.merged.append(_get_entity(store, k))
            continue
        row = graph.entity_row(x, now, source="agent", description=e.description)
        row["confidence"] = 0.8
        cat = ex.GAZETTEER.get(x.key)
        if cat and cat[0] == x.entity_type and cat[1]:
            row["category"] = cat[1]
        if vecs is not None:
            row["embedding"] = encode_vector(vecs[i])
        store.graph.create_entity(row, x.entity_type, x.key)
        out.created.append(_get_entity(store, k))
    return out


def _get_entity(store: ScopeStore, key: str) -> GraphEntity:
    row = plain(store.graph.entity(key))
    return _entities([row], store.scope.value, {})[0]


def _resolve_entity(core: MemoryCore, store: ScopeStore, name: str) -> tuple[str, ex.Extracted]:
    """An entity by id or by name (any type, most mentioned first); unknown names become concepts."""
    name = name.strip()
    if name.startswith("entity:"):
        name = name.split(":", 1)[1]
    row = store.q1("SELECT id, name, entity_type, category FROM ONLY $id", {"id": rid("entity", name)})
    if row:
        return key_of(row["id"]), ex.Extracted(row["name"], row["entity_type"], row.get("category"))
    rows = store.q1(
        "SELECT id, name, entity_type, category, mention_count FROM entity WHERE name_key = $k "
        "ORDER BY mention_count DESC LIMIT 1",
        {"k": ex.name_key(name)},
    )
    if rows:
        r = rows[0]
        return key_of(r["id"]), ex.Extracted(r["name"], r["entity_type"], r.get("category"))
    guess = ex.extract_entities(name)
    x = guess[0] if guess and guess[0].key == ex.name_key(name) else ex.Extracted(name, "concept")
    add_entities(
        core,
        [EntityIn(name=x.name, entity_type=x.entity_type)],
        scope=store.scope.value,
        project=core.scopes.root_of(store),
    )
    return entity_key(x.key, x.entity_type), x


@dataclass
class StatedRelation:
    """A relation written as stated, before it is checked against the live ones (relations.py does that)."""

    result: RelateResult  # its contradictions not yet checked
    relation: ex.ExtractedRelation
    evidence_key: str | None  # the evidence, when it names a live memory of this store
    live: list[dict[str, Any]]  # live relations sharing an endpoint with it


def state_relation(
    core: MemoryCore,
    store: ScopeStore,
    source: str,
    target: str,
    relation_type: RelationType,
    evidence: str | None,
    confidence: float,
) -> StatedRelation:
    """Write a relation between two entities (by id or name; unknown names become concepts). A repeated
    relation strengthens (weight +0.1, confidence +0.05) rather than duplicating."""
    src_key, src = _resolve_entity(core, store, source)
    dst_key, dst = _resolve_entity(core, store, target)
    if src_key == dst_key:
        raise EngramError("an entity cannot relate to itself")
    ev = None
    if evidence:
        ev = (
            key_of(evidence)
            if key_of(evidence) in store.summaries or store.get(key_of(evidence))
            else redact_text(evidence)[:500]
        )
    rel = ex.ExtractedRelation(src, relation_type, dst, confidence)
    now = core.now()
    row = graph.relation_row(rel, ev, now, source="agent")
    row["src"], row["dst"] = rid("entity", src_key), rid("entity", dst_key)
    row["id"] = rid("relates_to", relation_key(src_key, relation_type, dst_key))
    existed = bool(store.q1("SELECT VALUE id FROM ONLY $id", {"id": row["id"]}))
    live = write_extractions(
        core,
        store,
        [
            Extraction(
                key=None,
                mentioned=[],
                rels=[rel],
                ent_rows=[],
                rel_rows=[row],
                check=sorted({src_key, dst_key}),
                now=now,
            )
        ],
    )[0]
    got = plain(store.q1("SELECT * FROM ONLY $id", {"id": row["id"]}))
    names = {src_key: src.name, dst_key: dst.name}
    result = RelateResult(relation=_relations([got], names, store.scope.value)[0], strengthened=existed)
    return StatedRelation(
        result=result, relation=rel, evidence_key=ev if ev in store.summaries else None, live=live
    )
