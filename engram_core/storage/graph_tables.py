"""The organise layer's graph tables (entity, relates_to, associated_with, episode) where their writes reach the
memory table: a memory's episode and its entity list. Organise keeps its own graph mirror (organise/graph.py) in
step with what it writes; these functions keep the memory mirror in step with the memory fields they change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from surrealdb import RecordID

from .database import Database
from .values import key_of, query_file

EVIDENCE_MAX = 50  # memory keys kept as a relation's evidence, newest last

# An import chunk's or a memory's episodes, entities and typed relations in one statement (organise/graph.py
# builds the parameters: `graph.write_plans`).
CHUNK_WRITE = """
LET $pre_rels = (SELECT id, evidence, invalid_at FROM $pre_ids);
-- $touching: the conflict-prone relations at either end of a checked entity, from the graph mirror
-- (`_conflict_relations`). No IF around the SELECT: an IF block (3.2.4) hands back a one-row result as the row
-- itself, not a list.
LET $pre_live = (SELECT id, in, out, relation_type, evidence, out.category AS category, out.name AS out_name,
                        in.name AS in_name FROM $touching
                 WHERE invalid_at IS NONE AND relation_type IN $conflict_types);
FOR $w IN $ep_writes {
  IF $w.op = 'open' { CREATE $w.id CONTENT $w.c RETURN NONE; }
  ELSE IF $w.op = 'end' { UPDATE $w.id SET ended_at = ended_at ?? $w.t, end_reason = end_reason ?? $w.r RETURN NONE; }
  ELSE { UPDATE $w.id SET ended_at = $w.t, end_reason = 'task_completion' RETURN NONE; };
};
FOR $e IN $set_ep { UPDATE $e.mem SET episode_id = $e.ep RETURN NONE; };
FOR $e IN $eps { UPDATE $e.id SET memory_count += $e.n, last_at = $now RETURN NONE; };
IF array::len($ents) > 0 {
  -- Only `+=` sees the stored value inside ON DUPLICATE KEY UPDATE (3.2.4), hence the clamp after.
  INSERT INTO entity array::map($ents, |$e| $e + {first_seen: $now, last_seen: $now, updated_at: $now})
    ON DUPLICATE KEY UPDATE mention_count += 1, last_seen = $now, updated_at = $now,
    confidence += 0.02 RETURN NONE;
  UPDATE $ent_ids SET confidence = 1.0 WHERE confidence > 1.0 RETURN NONE;
};
-- A memory written without its entity list (promoted, or older than schema 011): the list now.
FOR $m IN $set_ents { UPDATE $m.id SET entities = $m.e RETURN NONE; };
FOR $r IN $rels {
  LET $cur = (SELECT VALUE evidence FROM ONLY $r.id);
  IF $cur != NONE {
    IF $r.ev = NONE OR $r.ev NOT IN $cur {
      UPDATE $r.id SET weight = math::min([1.0, weight + $inc]), confidence = math::min([1.0, confidence + 0.05]),
        evidence = IF $r.ev = NONE THEN $cur ELSE array::slice(array::append($cur, $r.ev), -EVIDENCE_MAX) END,
        invalid_at = NONE, updated_at = $now RETURN NONE;
    };
  } ELSE {
    RELATE ($r.src)->($r.id)->($r.dst) CONTENT $r.fields + {valid_from: $now, updated_at: $now}
      RETURN NONE;
  };
};
-- Names and categories only when contradiction candidates are wanted (each is a fetch of the entity).
RETURN {pre_rels: $pre_rels, pre_live: $pre_live,
        post: IF array::len($check) > 0 {
          (SELECT id, in, out, weight, invalid_at, relation_type, out.category AS category, out.name AS out_name,
                  in.name AS in_name FROM $rel_ids)
        } ELSE { (SELECT id, in, out, weight, invalid_at, relation_type FROM $rel_ids) }};
""".replace("EVIDENCE_MAX", str(EVIDENCE_MAX))


def write_chunk(db: Database, params: Mapping[str, Any]) -> dict[str, Any]:
    """Run `CHUNK_WRITE`. The memory fields it writes are the episode (of a memory written without it), which the
    mirror takes here, and the entity list, which no memory mirror holds."""
    got = db.write(CHUNK_WRITE, params)[-1] or {}
    for e in params["set_ep"]:
        db.mirror.patch(key_of(e["mem"]), {"episode_id": e["ep"]})
    return got


def merge_entity(db: Database, old: str, new: str, naming: Sequence[str]) -> None:
    """Point the old entity's mentions (the entity lists of ``naming``, the memories naming it) and relations at the
    survivor, then delete it (maintenance only). No memory mirror holds an entity list."""
    o, n = RecordID("entity", old), RecordID("entity", new)
    edges = db.write1("SELECT * FROM array::distinct($o<->relates_to)", {"o": o}) or []
    db.write("LET $x = array::distinct($o<->relates_to); DELETE $x RETURN NONE;", {"o": o})
    if naming:
        db.write(
            "UPDATE $m SET entities = array::distinct(entities.map(|$e| IF $e = $o THEN $n ELSE $e END)) "
            "WHERE entities CONTAINS $o RETURN NONE",
            {"m": [RecordID("memory", k) for k in naming], "o": o, "n": n},
        )
    for e in edges:
        a = n if key_of(e["in"]) == old else e["in"]
        b = n if key_of(e["out"]) == old else e["out"]
        if key_of(a) == key_of(b):
            continue
        fields = {
            k: e[k]
            for k in ("relation_type", "weight", "confidence", "evidence", "valid_from", "source")
            if e.get(k) is not None
        }
        if e.get("invalid_at") is not None:
            fields["invalid_at"] = e["invalid_at"]
        db.write("RELATE $a->relates_to->$b CONTENT $f RETURN NONE", {"a": a, "b": b, "f": fields})
    db.write(
        "LET $c = (SELECT VALUE mention_count FROM ONLY $o) ?? 0; "
        "UPDATE $n SET mention_count += $c, confidence = math::min([1.0, confidence + 0.05]), "
        "last_seen = $now RETURN NONE; DELETE $o;",
        {"o": o, "n": n, "now": db.clock.now()},
    )


def delete_entities(db: Database, weak: Sequence[Any], naming: Sequence[str]) -> None:
    """Delete these entities with their edges and take them off the entity lists of ``naming`` (the memories
    naming them). Edges by the graph keys of their ends (schema 008), bound by LET: DELETE refuses the walk in
    place. No memory mirror holds an entity list."""
    db.write(
        "LET $x = array::distinct($w<->relates_to); DELETE $x RETURN NONE; "
        "UPDATE $m SET entities = array::complement(entities, $w) RETURN NONE; DELETE $w;",
        {"w": list(weak), "m": [RecordID("memory", k) for k in naming]},
    )


def coactivate(
    db: Database,
    pairs: list[Mapping[str, Any]],
    delta: float,
    when: datetime,
    kind: str,
    *,
    hold: bool = False,
) -> None:
    """Strengthen co-activation edges (``pairs``: {id, a, b} record ids) by ``delta`` each. ``hold`` (after a
    recall): summed per edge and written with the access counts (`BookkeepingQueue.drain_due`), since the engine
    keeps every version of a rewritten edge until compaction and a recall would otherwise rewrite three edges."""
    if hold:
        db.bookkeeping.coactivate(pairs, delta, when, kind)
        return
    db.write(
        query_file("coactivate.surql"),
        {"pairs": [{**p, "d": delta, "n": 1, "at": when, "kind": kind} for p in pairs]},
    )
