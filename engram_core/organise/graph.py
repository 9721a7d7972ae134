"""The knowledge graph: entities (deduplicated per scope), typed relations that strengthen on repeated
evidence, mentions from memories, pruning, and graph traversal as a recall signal.

What is stored (schema 011): entity rows, the typed relations and the ones the agent states (`relates_to` edges), and
on each memory row the entities its text names (`memory.entities`, in order of first appearance). Two entities a
memory names together are linked (`related_to`, a co-mention) without a row of their own: the link is derived from
the memories' entity lists, in the graph mirror and in what the graph tools show (`co_mention_core`): stored as
edges they would be most of the relations and most of a memory's size on disk (docs/storage.md, schema 011)."""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

import numpy as np
from surrealdb import RecordID

from ..entity_order import in_text_order
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
from ..retrieval.embeddings import try_embed
from ..retrieval.ranking import best_first
from ..retrieval.search_index import tokenize
from ..storage import (
    ScopeStore,
    decode_vector,
    encode_vector,
    key_of,
    plain,
    works_in_background,
)
from ..storage.graph_mirror import (
    CO_MENTION_WEIGHT,
    CO_PREFIX,
    CONFLICT_TYPES,
    STRENGTHEN,
    SUBJECT_TYPES,
    GraphMirror,
    co_mention_core,
    warm_hubs,
)
from ..storage.graph_tables import EVIDENCE_MAX
from . import entities as ex
from .base import (
    EngramError,
    MemoryCore,
    api,
    as_dt,
    rid,
    short_hash,
)

log = logging.getLogger(__name__)
ENTITY_COSINE = 0.88  # same scope and type, cosine above this → the same entity
TYPED_WEIGHT = 0.5
# Bounds that keep a recall's graph step small however popular an entity is (a library named in 500 notes):
# the strongest neighbours only, and an entity's most recent mentions only. The fusion takes 100 at most.
TRAVERSE_MAX_NEIGHBOURS = 12
TRAVERSE_MAX_MENTIONS = 150
GRAPH_LIST_MAX = 100  # how many graph-found memories join the fusion
# memory keys a graph answer lists for an entity, the newest: a library named in thousands of notes would put
# all of them in each answer (megabytes into the agent's context, and minutes to gather)
MENTIONS_SHOWN = 50


def entity_key(name_key: str, entity_type: str) -> str:
    return short_hash("entity", entity_type, name_key)


def relation_key(src: str, relation_type: str, dst: str) -> str:
    return short_hash("rel", src, relation_type, dst)


def subject_for(store: ScopeStore) -> ex.Extracted:
    return ex.SUBJECT_USER if store.scope.value == "user" else ex.SUBJECT_PROJECT


# ── writing ──────────────────────────────────────────────────


def _entity_row(
    e: ex.Extracted, now: datetime, source: str = "extracted", description: str | None = None
) -> dict[str, Any]:
    # Lean (schema 010): no scope (the store's own), no created_at (first_seen is that instant), a source only when
    # the agent named it (none means extracted), a description only when one was given.
    row: dict[str, Any] = {
        "id": rid("entity", entity_key(e.key, e.entity_type)),
        "name": e.name,
        "name_key": e.key,
        "entity_type": e.entity_type,
        "confidence": 0.6,
        "first_seen": now,
        "last_seen": now,
        "updated_at": now,
    }
    if source != "extracted":
        row["source"] = source
    if e.category:
        row["category"] = e.category
    if description:
        row["description"] = description
    return row


def _relation_row(
    r: ex.ExtractedRelation, memory_key: str | None, now: datetime, source: str = "extracted"
) -> dict[str, Any]:
    src = entity_key(r.source.key, r.source.entity_type)
    dst = entity_key(r.target.key, r.target.entity_type)
    weight = CO_MENTION_WEIGHT if r.relation_type == "related_to" else TYPED_WEIGHT
    # Lean (schema 009): no scope (the store's own), no created_at (valid_from is that instant), and a source only
    # when the agent stated it (none means extracted): each field is paid for in every row.
    fields: dict[str, Any] = {
        "relation_type": r.relation_type,
        "weight": weight,
        "confidence": r.confidence,
        "evidence": [memory_key] if memory_key else [],
        "valid_from": now,
        "updated_at": now,
    }
    if source != "extracted":
        fields["source"] = source
    return {
        "id": rid("relates_to", relation_key(src, r.relation_type, dst)),
        "src": rid("entity", src),
        "dst": rid("entity", dst),
        "ev": memory_key,
        "fields": fields,
    }


@dataclass
class Extraction:
    """What one memory (or one stated relation) writes into the graph, planned before the chunk's round trip."""

    key: str | None  # the memory; None for a relation the agent states
    mentioned: list[ex.Extracted]  # the entities the memory's text names, in order: its entity list
    rels: list[ex.ExtractedRelation]
    ent_rows: list[dict[str, Any]]
    rel_rows: list[dict[str, Any]]
    check: list[str]  # entity keys whose live conflict-prone relations the caller wants back
    episode: str | None = None
    episode_on_row: bool = False
    now: datetime | None = None
    entities: list[ex.Extracted] = field(default_factory=list)  # mentioned + relation endpoints
    list_on_row: bool = True  # the memory's row was written with its entity list (`entity_list`)


def entity_list(ents: Sequence[ex.Extracted]) -> list[RecordID]:
    """What a memory row holds in `entities`: the entities its text names, in order (`named`)."""
    return [rid("entity", entity_key(e.key, e.entity_type)) for e in ents]


def named(content: str) -> list[ex.Extracted]:
    """The entities a memory's text names, in the order it first names them (entity_order.py: the rule the lists
    of a store written before schema 011 were given by too)."""
    ents = {entity_key(e.key, e.entity_type): e for e in ex.extract_entities(content)}
    return [ents[k] for k in in_text_order(content, {k: e.key for k, e in ents.items()})]


def plan_extraction(
    core: MemoryCore,
    store: ScopeStore,
    key: str,
    content: str,
    episode_id: str | None,
    *,
    episode_on_row: bool = False,
    mentioned: Sequence[ex.Extracted] | None = None,
    list_on_row: bool = True,
) -> Extraction | None:
    """Entities, mentions and relations of one memory, or None when it writes nothing into the graph.
    ``mentioned``: its entities as already extracted (before its row was written, `on_row`); ``list_on_row``:
    whether that row holds its entity list (else this write adds it, an empty one included)."""
    ents = list(mentioned) if mentioned is not None else named(content)
    subject = subject_for(store)
    rels = ex.extract_relations(content, ents, subject) if ents else []
    now = core.now()
    all_ents = {(e.key, e.entity_type): e for e in ents}
    for r in rels:
        all_ents.setdefault((r.source.key, r.source.entity_type), r.source)
        all_ents.setdefault((r.target.key, r.target.entity_type), r.target)
    if not all_ents and episode_id is None and list_on_row:
        return None
    check: set[str] = set()
    for r in rels:
        if r.relation_type in CONFLICT_TYPES:
            check.add(entity_key(r.source.key, r.source.entity_type))
            check.add(entity_key(r.target.key, r.target.entity_type))
    return Extraction(
        key=key,
        mentioned=ents,
        rels=rels,
        ent_rows=[_entity_row(e, now) for e in all_ents.values()],
        rel_rows=[_relation_row(r, key, now) for r in rels],
        check=sorted(check),
        episode=episode_id,
        episode_on_row=episode_on_row,
        now=now,
        entities=list(all_ents.values()),
        list_on_row=list_on_row,
    )


def list_into_row(fields: dict[str, Any]) -> list[ex.Extracted]:
    """Before a new memory's row is written: its entity list goes into the row (`fields["entities"]`), so the row
    is written once; returns the entities for its graph write (`plan_extraction`)."""
    ents = named(fields.get("content", ""))
    fields["entities"] = entity_list(ents)
    return ents


def write_extraction(
    core: MemoryCore,
    store: ScopeStore,
    key: str,
    content: str,
    episode_id: str | None,
    *,
    episode_on_row: bool = False,
    list_on_row: bool = True,
) -> tuple[list[ex.ExtractedRelation], list[dict[str, Any]]]:
    """One memory's `write_extractions`: the relations written and the live ones sharing an endpoint with a
    conflict-prone one (the contradiction candidates)."""
    plan = plan_extraction(
        core, store, key, content, episode_id, episode_on_row=episode_on_row, list_on_row=list_on_row
    )
    if plan is None:
        return [], []
    return plan.rels, write_extractions(core, store, [plan])[0]


def write_extractions(
    core: MemoryCore,
    store: ScopeStore,
    plans: Sequence[Extraction],
    episode_writes: Sequence[dict[str, Any]] = (),
) -> list[list[dict[str, Any]]]:
    """One round trip for a chunk of memories: the episodes opened and ended for them (``episode_writes``, from
    episodes.assign), episode ids and counts, entities, mentions, relations. Returns, for each plan in order, the live relations
    sharing an endpoint with its conflict-prone ones as they stood right after that plan's own writes (what
    writing the memories one by one would have returned), sorted by id."""
    rel_ids = list(dict.fromkeys(r["id"] for p in plans for r in p.rel_rows))
    # One instant for the chunk's stamps (the rows are written by one statement), sent once: a datetime per row
    # field would be most of the parameters' encoding time.
    now = plans[-1].now if plans and plans[-1].now else core.now()
    eps: dict[str, dict[str, Any]] = {}
    for p in plans:
        if p.episode is not None:
            e = eps.setdefault(p.episode, {"id": rid("episode", p.episode), "n": 0})
            e["n"] += 1
    check = sorted({c for p in plans for c in p.check})
    params: dict[str, Any] = {
        "now": now,
        "inc": STRENGTHEN,
        "ep_writes": list(episode_writes),
        "conflict_types": sorted(CONFLICT_TYPES),
        "check": [rid("entity", c) for c in check],
        "touching": _conflict_relations(core, store, check),
        "pre_ids": rel_ids if check else [],
        "rel_ids": rel_ids,
        "eps": list(eps.values()),
        "set_ep": [
            {"mem": rid("memory", p.key), "ep": p.episode}
            for p in plans
            if p.episode is not None and not p.episode_on_row and p.key is not None
        ],
        "ents": [_unstamped(e) for p in plans for e in p.ent_rows],
        "ent_ids": list(dict.fromkeys(e["id"] for p in plans for e in p.ent_rows)),
        "set_ents": [
            {"id": rid("memory", p.key), "e": entity_list(p.mentioned)}
            for p in plans
            if p.key is not None and not p.list_on_row
        ],
        "rels": [{**r, "fields": _unstamped(r["fields"])} for p in plans for r in p.rel_rows],
    }
    got, post = store.graph.write_chunk(
        params,
        [(entity_key(e.key, e.entity_type), e.entity_type, e.key) for p in plans for e in p.entities],
        [
            (p.key, [entity_key(e.key, e.entity_type) for e in p.mentioned])
            for p in plans
            if p.key is not None
        ],
        CONFLICT_TYPES,
    )
    if not check:
        return [[] for _ in plans]
    return _live_after_each(plans, got, post)


def _conflict_relations(core: MemoryCore, store: ScopeStore, check: Sequence[str]) -> list[RecordID]:
    """The live relations of a conflict-prone type at either end of these entities, from the graph mirror. The
    database reaches them only through every relation of each entity (graph keys, then each edge's row for its
    type): a library named in thousands of memories has thousands of co-mention relations, and fetching them for
    every import chunk that checks it grows with the store."""
    if not check:
        return []
    g = mirror(core, store)
    with g.lock:
        keys = sorted({k for c in check for k in g.conflicting.get(c, ())})
    return [rid("relates_to", k) for k in keys]


_STAMPS = ("first_seen", "last_seen", "created_at", "updated_at", "valid_from")


def _unstamped(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in _STAMPS}


def _live_after_each(
    plans: Sequence[Extraction], got: dict[str, Any], post: dict[str, dict[str, Any]]
) -> list[list[dict[str, Any]]]:
    """Replay the chunk's relation writes over the state before it, plan by plan: the live conflict-prone
    relations each plan would have seen had it been written alone, right after the plans before it."""
    state_: dict[str, dict[str, Any]] = {}
    for r in got.get("pre_live") or []:
        r = plain(r)
        state_[key_of(r["id"])] = {**r, "evidence": list(r.get("evidence") or []), "live": True}
    for r in got.get("pre_rels") or []:
        k = key_of(r["id"])
        base = state_.get(k) or {**post.get(k, {}), "id": r["id"]}
        state_[k] = {**base, "evidence": list(r.get("evidence") or []), "live": r.get("invalid_at") is None}
    out: list[list[dict[str, Any]]] = []
    for p in plans:
        for row in p.rel_rows:
            k = key_of(row["id"])
            cur = state_.get(k)
            if cur is None:
                state_[k] = {
                    **post.get(k, {}),
                    "id": row["id"],
                    "evidence": [row["ev"]] if row["ev"] else [],
                    "live": True,
                }
            elif row["ev"] is None or row["ev"] not in cur["evidence"]:
                if row["ev"] is not None:
                    cur["evidence"] = [*cur["evidence"], row["ev"]][-EVIDENCE_MAX:]
                cur["live"] = True
        if not p.check:
            out.append([])
            continue
        check = set(p.check)
        live = [
            {k: v for k, v in s.items() if k not in ("live", "weight", "invalid_at")}
            for _k, s in sorted(state_.items())
            if s["live"]
            and s.get("relation_type") in CONFLICT_TYPES
            and (key_of(s["in"]) in check or key_of(s["out"]) in check)
        ]
        out.append([{**r, "evidence": list(r["evidence"])} for r in live])
    return out


def mirror(core: MemoryCore, store: ScopeStore) -> GraphMirror:
    """The store's graph mirror, loaded on first use; a mirror loaded now has its hubs' neighbours worked out in
    the background (`warm_hubs`)."""
    g, loaded = store.graph.load()
    if loaded and works_in_background():
        threading.Thread(
            target=warm_hubs, args=(g, core.bookkeeper.wait_idle), name="engram-graph-warm", daemon=True
        ).start()
    return g


def _names(core: MemoryCore, store: ScopeStore) -> dict[str, set[str]]:
    return mirror(core, store).names


# ── graph traversal as a recall signal ───────────────────────
def query_seeds(core: MemoryCore, store: ScopeStore, query: str) -> set[str]:
    """Entities the query names: extracted ones, plus known entity names among its 1-3 word n-grams."""
    names = _names(core, store)
    if not names:
        return set()
    seeds: set[str] = set()
    for e in ex.extract_entities(query):
        seeds |= names.get(e.key, set())
    words = re.findall(r"[\w./@-]+", query.lower())
    words = [w.strip(".,;:") for w in words]
    for n in (1, 2, 3):
        for i in range(len(words) - n + 1):
            gram = " ".join(words[i : i + n])
            if gram in names and (n > 1 or len(gram) > 2):
                seeds |= names[gram]
    return seeds


def traverse(core: MemoryCore, store: ScopeStore, seeds: set[str]) -> dict[str, float]:
    """Memory key → graph score: 1 for a memory naming a query entity, edge weight × 0.5 one hop away.
    Read from the mirror: no database round trip."""
    if not seeds:
        return {}
    g = mirror(core, store)
    near: dict[str, float] = {}
    with g.lock:
        # Seeds in sorted order: the running sums below must not depend on a set's (hash) order.
        for s in sorted(seeds):
            # Only the strongest TRAVERSE_MAX_NEIGHBOURS of all seeds are kept, and the seeds themselves are
            # skipped: one seed contributes at most that many plus one per other seed.
            taken = 0
            for other, score in g.near(s, TRAVERSE_MAX_NEIGHBOURS + len(seeds)):
                if other in seeds:
                    continue
                if score > near.get(other, 0.0):
                    near[other] = score
                taken += 1
                if taken >= TRAVERSE_MAX_NEIGHBOURS:
                    break
        ent_score: dict[str, float] = {s: 1.0 for s in sorted(seeds)}
        ent_score.update(best_first(list(near.items()))[:TRAVERSE_MAX_NEIGHBOURS])
        # A memory's score sums its entities, dampened so a note listing twenty files does not dominate.
        total: dict[str, float] = {}
        count: dict[str, int] = {}
        for ekey, score in ent_score.items():
            mems = g.mentioned_by.get(ekey)
            if not mems:
                continue
            # The newest mentions (the dict keeps insertion order), without copying a popular entity's thousands.
            for m in itertools.islice(reversed(mems), TRAVERSE_MAX_MENTIONS):
                if m in total:
                    total[m] += score
                    count[m] += 1
                else:
                    total[m] = score
                    count[m] = 1
    return {k: v / math.sqrt(count[k]) if count[k] > 1 else v for k, v in total.items()}


def graph_ranker(
    core: MemoryCore, stores: Sequence[ScopeStore], query: str, qvec: Any, filters: Any
) -> list[tuple[str, float]]:
    scored: list[tuple[str, float, ScopeStore]] = []
    for store in stores:
        seeds = query_seeds(core, store, query)
        if seeds:
            found = traverse(core, store, seeds)
            scored += zip(found, found.values(), itertools.repeat(store, len(found)), strict=True)
    # Best first without a sort key built in Python per memory (a popular entity names a thousand memories or
    # more), filtered only until GRAPH_LIST_MAX are kept.
    best_first(scored)
    out: list[tuple[str, float]] = []
    for k, score, store in scored:
        lt = store.summaries.get(k)
        if lt is not None and filters.admits(lt):
            out.append((k, score))
            if len(out) >= GRAPH_LIST_MAX:
                break
    return out


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


def _embed_names(core: MemoryCore, texts: list[str]) -> np.ndarray | None:
    vecs, _why = try_embed(core.embedder, texts) if getattr(core.embedder, "available", False) else (None, "")
    return vecs


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
    vecs = _embed_names(core, [f"{e.name} {e.description or ''}".strip() for e in entities])
    now = core.now()
    for i, e in enumerate(entities):
        x = ex.Extracted(e.name.strip(), e.entity_type)
        k = entity_key(x.key, x.entity_type)
        existing = store.q1("SELECT * OMIT embedding FROM ONLY $id", {"id": rid("entity", k)})
        if not existing and vecs is not None:
            similar = _similar_entity(store, vecs[i], x.entity_type)
            if similar is not None:
                k, existing = key_of(similar["id"]), similar
        if existing:
            store.graph.strengthen_entity(k, e.description, now)
            out.merged.append(_get_entity(store, k))
            continue
        row = _entity_row(x, now, source="agent", description=e.description)
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
    row = plain(store.q1("SELECT * OMIT embedding FROM ONLY $id", {"id": rid("entity", key)}))
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
    row = _relation_row(rel, ev, now, source="agent")
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


# ── maintenance ──────────────────────────────────────────────
def merge_similar_entities(core: MemoryCore, store: ScopeStore, *, dry_run: bool = False) -> int:
    """Entity resolution by embedding: same scope and type, cosine > 0.88 → one entity. Runs in maintenance, not
    on the write path, because embedding each new name would cost ~15 ms per store."""
    missing = store.q1("SELECT id, name, description FROM entity WHERE embedding = NONE LIMIT 2000") or []
    if missing:
        vecs = _embed_names(core, [f"{r['name']} {r.get('description') or ''}".strip() for r in missing])
        if vecs is None:
            return 0
        if not dry_run:
            store.graph.set_entity_embeddings(
                [{"id": r["id"], "e": encode_vector(v)} for r, v in zip(missing, vecs, strict=True)]
            )
    rows = (
        store.q1("SELECT id, entity_type, mention_count, embedding FROM entity WHERE embedding != NONE") or []
    )
    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_type.setdefault(r["entity_type"], []).append(r)
    merged = 0
    g = mirror(core, store)
    for etype, group in by_type.items():
        if etype in SUBJECT_TYPES or len(group) < 2:
            continue
        group.sort(key=lambda r: -int(r.get("mention_count") or 0))
        mat = np.stack([cast(np.ndarray, decode_vector(r["embedding"])) for r in group])
        mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-9)
        sims = mat @ mat.T
        gone: set[int] = set()
        for i in range(len(group)):
            if i in gone:
                continue
            for j in range(i + 1, len(group)):
                if j in gone or sims[i, j] <= ENTITY_COSINE:
                    continue
                gone.add(j)
                merged += 1
                if not dry_run:
                    old = key_of(group[j]["id"])
                    with g.lock:
                        naming = sorted(g.mentioned_by.get(old, ()))
                    store.graph.merge_entity(old, key_of(group[i]["id"]), naming)
    return merged


def prune_graph(
    core: MemoryCore, store: ScopeStore, *, now: datetime | None = None, dry_run: bool = False
) -> tuple[int, int]:
    """Graph pruning: delete weak entities (confidence < 0.3, < 2 mentions, unseen 30 days) with their edges;
    invalidate stale edges (confidence < 0.2, older than 30 days). Returns (entities pruned, edges invalidated)."""
    cutoff = (now or core.now()) - timedelta(days=30)
    weak = (
        store.q1(
            "SELECT VALUE id FROM entity WHERE confidence < 0.3 AND mention_count < 2 AND last_seen < $c",
            {"c": cutoff},
        )
        or []
    )
    stale = (
        store.q1(
            "SELECT VALUE id FROM relates_to WHERE confidence < 0.2 AND valid_from < $c "
            "AND invalid_at IS NONE",
            {"c": cutoff},
        )
        or []
    )
    if not dry_run:
        if weak:
            g = mirror(core, store)
            with g.lock:
                naming = sorted({m for w in weak for m in g.mentioned_by.get(key_of(w), ())})
            store.graph.delete_entities(weak, naming)
        if stale:
            store.graph.invalidate_relations(stale, now or core.now())
    return len(weak), len(stale)


def backfill(core: MemoryCore, store: ScopeStore, *, limit: int = 500, dry_run: bool = False) -> int:
    """Memories that never went through the store hook (stored with the organise layer off, imported by an older
    version) get their entities now. A memory without an entity list has not been read for them (an empty list:
    read, and it names none; before schema 011, `metadata.graph_scanned` said so)."""
    rows = (
        store.q1(
            "SELECT id, content FROM memory WHERE status NOT IN ['forgotten', 'superseded'] "
            "AND entities = NONE AND metadata.graph_scanned != true LIMIT $n",
            {"n": limit},
        )
        or []
    )
    done = 0
    for r in rows:
        k = key_of(r["id"])
        if dry_run:
            done += bool(ex.extract_entities(r["content"]))
            continue
        _, _ = write_extraction(core, store, k, r["content"], None, list_on_row=False)
        done += 1
    return done


def tokens(text: str) -> list[str]:
    return tokenize(text)
