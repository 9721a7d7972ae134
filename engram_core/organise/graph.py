"""The knowledge graph: entities (deduplicated per scope), typed relations that strengthen on repeated
evidence, mentions from memories, pruning, and graph traversal as a recall signal.

What is stored (schema 011): entity rows, the typed relations and the ones the agent states (`relates_to` edges), and
on each memory row the entities its text names (`memory.entities`, in order of first appearance). Two entities a
memory names together are linked (`related_to`, a co-mention) without a row of their own: the link is derived from
the memories' entity lists, in the graph mirror and in what the graph tools show (`co_mention_core`): stored as
edges they would be most of the relations and most of a memory's size on disk (docs/storage.md, schema 011)."""

from __future__ import annotations

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
    CONFLICT_TYPES,
    STRENGTHEN,
    SUBJECT_TYPES,
    GraphMirror,
    warm_hubs,
)
from ..storage.graph_tables import EVIDENCE_MAX
from . import entities as ex
from .base import (
    MemoryCore,
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


def entity_key(name_key: str, entity_type: str) -> str:
    return short_hash("entity", entity_type, name_key)


def relation_key(src: str, relation_type: str, dst: str) -> str:
    return short_hash("rel", src, relation_type, dst)


def subject_for(store: ScopeStore) -> ex.Extracted:
    return ex.SUBJECT_USER if store.scope.value == "user" else ex.SUBJECT_PROJECT


# ── writing ──────────────────────────────────────────────────


def entity_row(
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


def relation_row(
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
        ent_rows=[entity_row(e, now) for e in all_ents.values()],
        rel_rows=[relation_row(r, key, now) for r in rels],
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


def embed_names(core: MemoryCore, texts: list[str]) -> np.ndarray | None:
    vecs, _why = try_embed(core.embedder, texts) if getattr(core.embedder, "available", False) else (None, "")
    return vecs


# ── maintenance ──────────────────────────────────────────────
def merge_similar_entities(core: MemoryCore, store: ScopeStore, *, dry_run: bool = False) -> int:
    """Entity resolution by embedding: same scope and type, cosine > 0.88 → one entity. Runs in maintenance, not
    on the write path, because embedding each new name would cost ~15 ms per store."""
    missing = store.q1("SELECT id, name, description FROM entity WHERE embedding = NONE LIMIT 2000") or []
    if missing:
        vecs = embed_names(core, [f"{r['name']} {r.get('description') or ''}".strip() for r in missing])
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
