"""Re-redacting what is already stored: rows written before a field was redacted, or before a rule existed.

Engram redacts on the way in (see docs/security.md, "Where it runs"). Stores written by an older version, or
before a newer rule, can still hold secrets in fields that were not redacted then (tags, source, metadata,
reasons, recall queries). `redact_store` walks every row of every table of one store and rewrites only the
string fields redaction changes; `engram redact` runs it over the stores Engram knows.
"""

from __future__ import annotations

from typing import Any

from ..redaction import redact_value
from ..retrieval.embeddings import try_embed
from ..storage import GRAPH_TABLES, ScopeStore, content_hash, encode_vector, key_of

# Fields never rewritten: identity, graph edges, vectors, and the engine's computed strength.
_KEEP = frozenset({"id", "in", "out", "embedding", "memory_strength"})


def redact_store(store: ScopeStore, embedder: Any, *, dry_run: bool = False) -> dict[str, int]:
    """Rows changed per table (or that would change, with ``dry_run``)."""
    changed_per_table: dict[str, int] = {}
    for table in sorted(store.q1("INFO FOR DB")["tables"]):
        rows = store.q1(f"SELECT * FROM `{table}`") or []
        n = 0
        for row in rows:
            fields = {k: v for k, v in row.items() if k not in _KEEP}
            clean: dict[str, Any] = redact_value(fields)
            changes = {k: clean[k] for k in fields if clean[k] != fields[k]}
            if not changes:
                continue
            n += 1
            if dry_run:
                continue
            if table == "memory" and "content" in changes:
                changes["content_hash"] = content_hash(changes["content"])
            if table == "memory" and ("content" in changes or "search_text" in changes):
                # the vector was of the text with the secret in it
                vecs, _ = try_embed(embedder, [clean.get("search_text") or clean.get("content") or ""])
                if vecs is not None:
                    changes["embedding"] = encode_vector(vecs[0])
            if table == "memory":
                store.memories.merge_fields(key_of(row["id"]), changes)
            elif table in GRAPH_TABLES:
                store.graph.merge_fields(row["id"], changes)
            else:
                store.q("UPDATE $id MERGE $changes RETURN NONE", {"id": row["id"], "changes": changes})
        if n:
            changed_per_table[table] = n
    if changed_per_table.get("memory") and not dry_run:
        store.reload_mirror()
    return changed_per_table
