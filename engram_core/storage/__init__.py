"""Storage: the embedded SurrealDB stores and the in-process mirrors of what they hold.

Below every other part of the core: it imports no API, service, organise or front-end module. Its modules:

    engine.py        the engine connection (`Connection`) and the thread that drives it in the daemon
    compaction.py    copying a store into fresh files, and finishing a swap a crash interrupted
    engine_levels.py the engine's level layout, read from its manifest (merged at close, settled after a copy)
    schema.py        `schema/*.surql` applied in order, and the data migrations some versions need
    database.py      one scope's database: the query path (`q`) and the state its parts share
    store.py         `ScopeStore`, the parts put together
    memories.py      the memory table: create, read, update, erase, the sweep, export and restore
    mirror.py        the memory mirror (memory summaries, search index, hash index) and row_mirror.py (the full rows)
    snapshots.py     the mirror loaded from its snapshot or the database, and saved beside the store
    bookkeeping.py   what a recall owes the database, written after the answer, and the thread that writes it
    retrieval_log.py the recall log
    graph_tables.py  organise's graph tables (entity, relates_to, associated_with, episode): every write, named
    graph_mirror.py  the knowledge graph's mirror, its load and its snapshot
    guard.py         the test-time check that no raw query writes the memory table
    locks.py         the lock order and the lock that checks it
    values.py        record ids, plain rows, vectors as bytes, the store's errors
"""

from .engine import Connection, use_engine_thread, works_in_background
from .mirror import MemorySummary
from .schema import SCHEMA_DIR, VECTOR_BYTES_SCHEMA, migrations
from .store import GRAPH_TABLES, MIRRORED_TABLES, ScopeStore
from .values import (
    FORGOTTEN,
    HALF_TAG,
    MEMORY_FIELDS,
    CompactionOvertaken,
    CompactionStopped,
    EngineRefused,
    StoreError,
    content_hash,
    decode_vector,
    encode_vector,
    key_of,
    plain,
    record,
    text_array,
    text_lines,
    vector_size,
    with_vector_bytes,
    write_private,
)

__all__ = [
    "FORGOTTEN",
    "GRAPH_TABLES",
    "HALF_TAG",
    "MEMORY_FIELDS",
    "MIRRORED_TABLES",
    "SCHEMA_DIR",
    "VECTOR_BYTES_SCHEMA",
    "CompactionOvertaken",
    "CompactionStopped",
    "Connection",
    "EngineRefused",
    "MemorySummary",
    "ScopeStore",
    "StoreError",
    "content_hash",
    "decode_vector",
    "encode_vector",
    "key_of",
    "migrations",
    "plain",
    "record",
    "text_array",
    "text_lines",
    "use_engine_thread",
    "vector_size",
    "with_vector_bytes",
    "works_in_background",
    "write_private",
]
