"""The organise layer's graph tables (entity, relates_to, associated_with, episode): every write to them, named
(`GraphTables`, ``store.graph``), and the graph mirror (graph_mirror.py) those writes keep in step. Organise decides
what to write and when; these say how. Where a write reaches the memory table (a memory's episode, its entity
list) it keeps the memory mirror in step too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from surrealdb import RecordID

from ..collector import paused_collector
from .database import Database
from .graph_mirror import GraphMirror, GraphSource, load_mirror, read_snapshot, save_snapshot
from .values import key_of, plain, query_file

EVIDENCE_MAX = 50  # memory keys kept as a relation's evidence, newest last

# An import chunk's or a memory's episodes, entities and typed relations in one statement (organise/graph.py
# builds the parameters: `graph.write_extractions`).
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


class GraphTables:
    """The graph tables of one store and their mirror (``mirror``: None until loaded, or dropped for a reload
    after a write that rewrites the graph wholesale)."""

    def __init__(self, db: Database, source: GraphSource, writers: dict[str, Callable[[], None]]) -> None:
        self.db = db
        self.source = source
        self.writers = writers
        self.mirror: GraphMirror | None = None

    # ── the mirror ────────────────────────────────────────────
    def load(self) -> tuple[GraphMirror, bool]:
        """The mirror, loaded (from its snapshot, else the tables) when absent or when an erasure changed the
        graph under it; and whether it was loaded now."""
        g = self.mirror
        if g is not None and g.version == self.db.graph_version:
            return g, False
        with paused_collector():
            g = None if self.mirror is not None else read_snapshot(self.source)
            g = self.mirror = g or load_mirror(self.source)
        self.writers.setdefault("graph", self.save_snapshot)
        return g, True

    def drop(self) -> None:
        """The graph changed wholesale (entities merged or pruned, relations restored): reload when next needed."""
        self.mirror = None

    def save_snapshot(self) -> None:
        save_snapshot(self.source, self.mirror)

    def _end_in_mirror(self, keys: Sequence[str]) -> None:
        g = self.mirror
        if g is None:
            return
        with g.lock:
            for k in keys:
                r = g.rels.get(k)
                if r is not None:
                    g.set_relation(k, r[0], r[1], r[2], False)

    def _add_entities(self, entities: Sequence[tuple[str, str, str]]) -> None:
        """Entities written join the mirror if it is loaded (otherwise its load will see them)."""
        g = self.mirror
        if g is None:
            return
        with g.lock:
            for ekey, etype, nkey in entities:
                g.add_entity(ekey, etype, nkey)

    # ── reads ─────────────────────────────────────────────────
    def entity(self, key: str) -> dict[str, Any] | None:
        """One entity's row without its embedding (None if there is none)."""
        row: dict[str, Any] | None = self.db.write1(
            "SELECT * OMIT embedding FROM ONLY $id", {"id": RecordID("entity", key)}
        )
        return row

    # ── writes ────────────────────────────────────────────────
    def write_chunk(
        self,
        params: Mapping[str, Any],
        entities: Sequence[tuple[str, str, str]],
        mentions: Sequence[tuple[str, list[str]]],
        conflict_types: Sequence[str],
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """`write_chunk`, then the mirror: ``entities`` (key, type, name key) and ``mentions`` (memory key, its
        entity keys) in order, and the relations as written. Returns the statement's answer and the relations
        after it by key."""
        got = write_chunk(self.db, params)
        post = {key_of(r["id"]): plain(r) for r in got.get("post") or []}
        g = self.mirror
        if g is not None:
            with g.lock:
                # All entities first: a memory's co-mentions need its entities' types (an entity's type is part
                # of its key, so the order among plans changes nothing).
                for ekey, etype, nkey in entities:
                    g.add_entity(ekey, etype, nkey)
                for memory, ekeys in mentions:
                    g.add_memory(memory, ekeys)
                for k, r in post.items():
                    g.set_relation(
                        k,
                        key_of(r["in"]),
                        key_of(r["out"]),
                        float(r["weight"]),
                        r.get("invalid_at") is None,
                        conflict=r.get("relation_type") in conflict_types,
                    )
        return got, post

    def strengthen_entity(self, key: str, description: str | None, now: datetime) -> None:
        """An entity named again by the agent: one more mention, a little more confidence, and its description
        if it had none."""
        self.db.write(
            "UPDATE $id SET mention_count += 1, last_seen = $now, "
            "confidence = math::min([1.0, confidence + 0.05]), "
            "description = IF $d != NONE AND (description ?? '') = '' THEN $d ELSE description END",
            {"id": RecordID("entity", key), "d": description, "now": now},
        )

    def create_entity(self, row: dict[str, Any], etype: str, nkey: str) -> None:
        """A new entity row (``row["id"]`` its record id), into the mirror too."""
        fields = dict(row)
        rid = fields.pop("id")
        self.db.write("CREATE $id CONTENT $c RETURN NONE", {"id": rid, "c": fields})
        self._add_entities([(key_of(rid), etype, nkey)])

    def set_entity_embeddings(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Entity embeddings ({id, e}: record id, encoded vector); the mirror holds none."""
        self.db.write(
            "FOR $u IN $rows { UPDATE $u.id SET embedding = $u.e RETURN NONE; };", {"rows": list(rows)}
        )

    def merge_entity(self, old: str, new: str, naming: Sequence[str]) -> None:
        merge_entity(self.db, old, new, naming)
        self.drop()

    def delete_entities(self, weak: Sequence[Any], naming: Sequence[str]) -> None:
        delete_entities(self.db, weak, naming)
        self.drop()

    def invalidate_relations(self, ids: Sequence[Any], now: datetime) -> None:
        """End these relations (record ids) as of ``now``; they leave the mirror."""
        self.db.write("UPDATE $s SET invalid_at = $n RETURN NONE", {"s": list(ids), "n": now})
        self._end_in_mirror([key_of(i) for i in ids])

    def end_relations_evidenced_only_by(self, key: str, when: datetime) -> list[str]:
        """End the live relations whose only evidence is memory ``key`` (superseded); returns their keys, which
        leave the mirror."""
        ended = self.db.write1(
            "UPDATE relates_to SET invalid_at = $t WHERE invalid_at IS NONE AND $k IN evidence "
            "AND array::len(array::complement(evidence, [$k])) = 0 RETURN VALUE record::id(id)",
            {"t": when, "k": key},
        )
        keys = [str(k) for k in ended or []]
        self._end_in_mirror(keys)
        return keys

    def restore_relations(self, keys: Sequence[str]) -> None:
        """These relations hold again (a resolution undone); the mirror reloads."""
        self.db.write(
            "UPDATE $ids SET invalid_at = NONE RETURN NONE",
            {"ids": [RecordID("relates_to", k) for k in keys]},
        )
        self.drop()

    def merge_fields(self, record: Any, changes: Mapping[str, Any]) -> None:
        """Rewrite some fields of one graph row (re-redaction); the mirror, which holds entity names, reloads."""
        self.db.write("UPDATE $id MERGE $changes RETURN NONE", {"id": record, "changes": dict(changes)})
        self.drop()

    def end_episode(self, episode: str, when: datetime, reason: str) -> list[dict[str, Any]]:
        """End an episode now (asked for); returns its row as written (none if it is gone)."""
        rows = self.db.write1(
            "UPDATE $id SET ended_at = $t, end_reason = $r",
            {"id": RecordID("episode", episode), "t": when, "r": reason},
        )
        return list(rows or [])

    def decay_associations(self, per_day: float, now: datetime, prune_below: float) -> int:
        """Weaken every co-activation edge by ``per_day`` a day since its last decay, then delete those below
        ``prune_below``; returns how many went."""
        res = self.db.write(
            """
      UPDATE associated_with SET weight = math::max([0.0, weight - $pd * math::max([0.0,
          duration::secs($now - decayed_at) / 86400.0])]), decayed_at = $now RETURN NONE;
      LET $gone = (SELECT VALUE id FROM associated_with WHERE weight < $min);
      DELETE $gone;
      RETURN array::len($gone);""",
            {"pd": per_day, "now": now, "min": prune_below},
        )
        return int(res[-1] or 0)
