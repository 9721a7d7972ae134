"""The schema: `schema/*.surql` applied in order at open (the version in `schema_meta`), and the data migrations
some versions need first (vectors to bytes, lean graph rows, organise's entity lists)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Sequence
from pathlib import Path

from surrealdb import RecordID

from ..entity_order import in_text_order
from .database import Database
from .values import MEMORY_TABLE, encode_vector, record

log = logging.getLogger(__name__)
SCHEMA_DIR = Path(__file__).parent.parent / "schema"
# Schema 006 stores every vector as bytes; `vectors_to_bytes` converts a store written before it.
VECTOR_BYTES_SCHEMA = 6
# Schema 011 keeps a memory's entities on its row and stores no co-mention; `entity_lists` moves a store written before.
ENTITY_LISTS_SCHEMA = 11
# What schemas 009 (graph edges) and 010 (entities) stop writing, as the rows written before get it cleared
# (`lean_rows`): schema version → (table, which rows still hold it, how it is cleared).
_LEAN_ROWS = {
    9: (
        (
            "relates_to",
            "scope != NONE OR created_at != NONE OR source = 'extracted'",
            "scope = NONE, created_at = NONE, source = IF source = 'agent' THEN 'agent' ELSE NONE END",
        ),
        ("mentions", "created_at != NONE", "created_at = NONE"),
    ),
    10: (
        (
            "entity",
            "scope != NONE OR created_at != NONE OR source = 'extracted' OR description = ''",
            "scope = NONE, created_at = NONE, source = IF source = 'agent' THEN 'agent' ELSE NONE END, "
            "description = IF description = '' THEN NONE ELSE description END",
        ),
    ),
}


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, text) of every schema file, in order."""
    out = []
    for entry in SCHEMA_DIR.iterdir():
        m = re.match(r"(\d+)_.*\.surql$", entry.name)
        if m:
            out.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(out)


def schema_version(db: Database) -> int:
    rows = db.write1("SELECT VALUE version FROM ONLY schema_meta:current")
    return int(rows) if isinstance(rows, int) else 0


def apply_schema(db: Database) -> int:
    """Apply every migration newer than the recorded version, each in one transaction."""
    current = schema_version(db) if has_schema_meta(db) else 0
    for version, _name, text in migrations():
        if version > current:
            if version == VECTOR_BYTES_SCHEMA:
                vectors_to_bytes(db)
            if version in _LEAN_ROWS:
                lean_rows(db, version, text)
            if version == ENTITY_LISTS_SCHEMA:
                entity_lists(db)
            db.write(
                f"BEGIN TRANSACTION;\n{text}\nUPSERT schema_meta:current SET version = {version}, "
                f"applied_at = time::now();\nCOMMIT TRANSACTION;"
            )
            current = version
    return current


def vectors_to_bytes(db: Database, chunk: int = 1000) -> None:
    """Before schema 006: rewrite every vector stored as a list of floats (memories and entities) as bytes
    (`encode_vector`, the form every vector is written in now). The field first accepts both forms, so
    each chunk commits on its own (a store of any size, in bounded memory) and a row not yet converted can still
    be written; an interrupted upgrade goes on from the rows still holding floats at the next open, and
    schema 006 then narrows the type to bytes. The floats are read once (the SDK decodes them one by one:
    ~0.5 s per 1,000 rows)."""
    widen = "\n".join(
        f"DEFINE FIELD OVERWRITE embedding ON {t} TYPE option<bytes | array<float>>;"
        for t in (MEMORY_TABLE, "entity")
    )
    db.write(widen)
    for table in (MEMORY_TABLE, "entity"):
        ids = db.write1(f"SELECT VALUE id FROM {table} WHERE type::is_array(embedding)") or []
        for i in range(0, len(ids), chunk):
            vecs, empty = [], []
            for r in db.write1("SELECT id, embedding FROM $ids", {"ids": ids[i : i + chunk]}) or []:
                raw = encode_vector(r.get("embedding"))
                if raw is None:  # an empty list was never a vector
                    empty.append(r["id"])
                else:
                    vecs.append({"id": r["id"], "e": raw})
            db.write(
                "FOR $u IN $vecs { UPDATE $u.id SET embedding = $u.e RETURN NONE; };"
                "UPDATE $empty SET embedding = NONE RETURN NONE;",
                {"vecs": vecs, "empty": empty},
            )
        if ids:
            db.conn.erased = True  # the old floats stay in the engine's files until the next compaction


def lean_rows(db: Database, version: int, definitions: str, chunk: int = 2000) -> None:
    """Before schema 009 or 010 is recorded: its field definitions (the dropped values become optional), then the
    values cleared from every row written before, ``chunk`` rows a transaction. The graph's change counter
    (schema 005) is bumped by an event per row written: each chunk lifts the table's events, rewrites its rows,
    defines them again as they were and bumps the counter once, all in its transaction (measured at 1,000
    memories: 0.37 s against 2.1 s with the events firing). An interrupted upgrade goes on from the rows left."""
    db.write(definitions)
    for table, holding, clear in _LEAN_ROWS[version]:
        ids = db.write1(f"SELECT VALUE id FROM {table} WHERE {holding}") or []
        for i in range(0, len(ids), chunk):
            db.write(
                eventless(db, [table], f"UPDATE $ids SET {clear} RETURN NONE;\n"),
                {"ids": ids[i : i + chunk]},
            )
        if ids:
            db.conn.erased = True  # the old versions stay in the engine's files until the next compaction


def eventless(db: Database, tables: Sequence[str], body: str, counters: Sequence[str] = ("graph",)) -> str:
    """``body`` in one transaction with the tables' events lifted (they fire per row: a rewrite of every row is
    several times slower with them) and defined again as they were, the change counters bumped once instead."""
    lift, back = "", ""
    for table in tables:
        events = (db.write1(f"INFO FOR TABLE {table}") or {}).get("events") or {}
        lift += "".join(f"REMOVE EVENT {name} ON TABLE {table};\n" for name in events)
        back += "".join(
            re.sub(r"^DEFINE EVENT ", "DEFINE EVENT OVERWRITE ", str(d)) + ";\n" for d in events.values()
        )
    bump = "".join(f"UPSERT mirror_meta:{c} SET n = (n ?? 0) + 1 RETURN NONE;\n" for c in counters)
    return f"BEGIN TRANSACTION;\n{lift}{body}{back}{bump}COMMIT TRANSACTION;"


def entity_lists(db: Database, chunk: int = 2000) -> None:
    """Before schema 011 is recorded: each memory's mention edges become its entity list (`memory.entities`,
    the entities in the order its text first names them), and the co-mention relations the extraction stored
    (`related_to` with no source: the agent's say 'agent') are deleted; the graph derives them from the lists
    now (organise/graph.py); the mention edges go with their table (schema 011), their graph keys at the next
    compaction, which is due. ``chunk`` memories a transaction; an interrupted upgrade goes on at the next open
    (a memory that has its list keeps it)."""
    db.write("DEFINE FIELD OVERWRITE entities ON memory TYPE option<array<record<entity>>>;")
    tables = (db.write1("INFO FOR DB") or {}).get("tables") or {}
    began = time.monotonic()
    if "mentions" in tables:
        log.info(
            "upgrading %s/%s to schema 11: each memory's entities onto its row (once; minutes for a large "
            "store)",
            db.namespace,
            db.database,
        )
        got = db.write1(
            "RETURN {m: array::join((SELECT VALUE <string>record::id(in) + ' ' + <string>record::id(out) "
            "FROM mentions), '\n'), e: array::join((SELECT VALUE <string>record::id(id) + ' ' + name_key "
            "FROM entity), '\n')}"
        )
        names = dict(line.split(" ", 1) for line in (got.get("e") or "").split("\n") if " " in line)
        lists: dict[str, set[str]] = {}
        for line in (got.get("m") or "").split("\n"):
            memory, _, ekey = line.partition(" ")
            if ekey:
                lists.setdefault(memory, set()).add(ekey)
        keys = sorted(lists)
        for i in range(0, len(keys), chunk):
            part = keys[i : i + chunk]
            texts = dict(
                db.write1(
                    "SELECT VALUE [record::id(id), content] FROM $ids", {"ids": [record(k) for k in part]}
                )
                or []
            )
            lists_of = {
                k: [
                    RecordID("entity", e)
                    for e in in_text_order(texts.get(k) or "", {e: names.get(e, "") for e in lists[k]})
                ]
                for k in part
            }
            # Only the graph's change counter moves: no mirror of the memory rows holds the lists, so the vector
            # snapshot stays valid (counted, a 10,000-memory store read every row again: 5.9 s more).
            db.write(
                eventless(
                    db,
                    [MEMORY_TABLE],
                    "UPDATE $ids SET entities = $lists[record::id(id)] WHERE entities = NONE RETURN NONE;\n",
                    ("graph",),
                ),
                {"ids": [record(k) for k in part], "lists": lists_of},
            )
        if keys:
            db.conn.erased = True  # the rows before their lists stay in the files until compacted
    co = (
        db.write1("SELECT VALUE id FROM relates_to WHERE relation_type = 'related_to' AND source = NONE")
        or []
    )
    for i in range(0, len(co), chunk):
        db.write(eventless(db, ["relates_to"], "DELETE $ids RETURN NONE;\n"), {"ids": co[i : i + chunk]})
    if co:
        db.conn.erased = True
    if "mentions" in tables or co:
        log.info(
            "upgraded %s/%s to schema 11 in %.1f s: %d co-mention relations deleted (derived now)",
            db.namespace,
            db.database,
            time.monotonic() - began,
            len(co),
        )


def has_schema_meta(db: Database) -> bool:
    info = db.write1("INFO FOR DB")
    return isinstance(info, dict) and "schema_meta" in (info.get("tables") or {})
