"""The knowledge graph as Engram wrote it before schema 011, for the upgrade tests: a `mentions` edge per entity a
memory names, and a stored `related_to` relation (a co-mention) between each two of its first six entities that are
not commands, unless the text also relates them by a typed relation. Written by plain SurrealQL, one memory at a
time, as the write path of that time left the rows (``before_009``: with the fields schemas 009 and 010 dropped)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from surrealdb import RecordID

from engram_core.organise import entities as ex
from engram_core.organise import graph
from engram_core.storage import ScopeStore

CO_MENTION_MAX = 6


def old_relations(
    content: str, ents: list[ex.Extracted], subject: ex.Extracted
) -> list[ex.ExtractedRelation]:
    """What `extract_relations` returned before schema 011: the typed relations, then the co-mentions."""
    rels = ex.extract_relations(content, ents, subject)
    typed = {(r.source.key, r.target.key) for r in rels} | {(r.target.key, r.source.key) for r in rels}
    core = [e for e in ents if e.entity_type != "command"][:CO_MENTION_MAX]
    for i, a in enumerate(core):
        for b in core[i + 1 :]:
            if (a.key, b.key) not in typed:
                rels.append(ex.ExtractedRelation(a, "related_to", b, 0.5))
    return rels


def write_legacy_graph(
    store: ScopeStore, memories: list[tuple[str, str]], now: datetime, *, before_009: bool = False
) -> None:
    """The graph rows of these (memory key, content) pairs, as the code before schema 011 wrote them."""
    subject = graph.subject_for(store)
    extra_entity: dict[str, Any] = (
        {"scope": store.scope.value, "created_at": now, "source": "extracted", "description": ""}
        if before_009
        else {}
    )
    extra_edge: dict[str, Any] = (
        {"scope": store.scope.value, "created_at": now, "source": "extracted"} if before_009 else {}
    )
    for key, content in memories:
        ents = ex.extract_entities(content)
        rels = old_relations(content, ents, subject) if ents else []
        every = {(e.key, e.entity_type): e for e in ents}
        for r in rels:
            every.setdefault((r.source.key, r.source.entity_type), r.source)
            every.setdefault((r.target.key, r.target.entity_type), r.target)
        for e in every.values():
            row = {
                "id": RecordID("entity", graph.entity_key(e.key, e.entity_type)),
                "name": e.name,
                "name_key": e.key,
                "entity_type": e.entity_type,
                "confidence": 0.6,
                "first_seen": now,
                "last_seen": now,
                "updated_at": now,
                **extra_entity,
            }
            if e.category:
                row["category"] = e.category
            store.q(
                "INSERT INTO entity $r ON DUPLICATE KEY UPDATE mention_count += 1, last_seen = $now RETURN NONE",
                {"r": row, "now": now},
            )
        for e in ents:
            store.q(
                "RELATE $m->mentions->$e CONTENT $c RETURN NONE",
                {
                    "m": RecordID("memory", key),
                    "e": RecordID("entity", graph.entity_key(e.key, e.entity_type)),
                    "c": {"created_at": now} if before_009 else {},
                },
            )
        for r in rels:
            src = graph.entity_key(r.source.key, r.source.entity_type)
            dst = graph.entity_key(r.target.key, r.target.entity_type)
            rid = RecordID("relates_to", graph.relation_key(src, r.relation_type, dst))
            cur = store.q1("SELECT VALUE evidence FROM ONLY $id", {"id": rid})
            if cur is not None:
                if key not in cur:
                    store.q(
                        "UPDATE $id SET weight = math::min([1.0, weight + 0.1]), "
                        "confidence = math::min([1.0, confidence + 0.05]), evidence += $k RETURN NONE",
                        {"id": rid, "k": key},
                    )
                continue
            weight = graph.CO_MENTION_WEIGHT if r.relation_type == "related_to" else graph.TYPED_WEIGHT
            store.q(
                "RELATE $a->$id->$b CONTENT $c RETURN NONE",
                {
                    "a": RecordID("entity", src),
                    "b": RecordID("entity", dst),
                    "id": rid,
                    "c": {
                        "relation_type": r.relation_type,
                        "weight": weight,
                        "confidence": r.confidence,
                        "evidence": [key],
                        "valid_from": now,
                        "updated_at": now,
                        **extra_edge,
                    },
                },
            )
