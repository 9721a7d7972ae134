"""Which model wrote a store's vectors, and re-embedding a store that another model wrote.

A query is compared with stored vectors by cosine, which means something only when both come from the same
model (fp32 and int8 MiniLM differ enough to change a tenth of a top-10). Each store records the model of its
vectors in ``mirror_meta:embedding`` (a schemaless table: no migration). On open (`reconcile`):

- a store with no record and no vectors records the home's model;
- a store with no record but vectors was written before the record existed, by fp32 MiniLM (`LEGACY_MODEL`);
- a store written by another model than the home's (the setting changed, a store moved) has every memory and
  entity vector embedded again from its stored text, then its mirror reloaded, and says so in the log.
"""

from __future__ import annotations

import logging
from typing import Any

from ..storage import ScopeStore, encode_vector, key_of
from .embeddings import Embedder, EmbeddingError, local_model_id

log = logging.getLogger("engram.vector_model")

LEGACY_MODEL = local_model_id("fp32")  # what every store written before the record existed was embedded with
REEMBED_CHUNK = 256


def recorded_model(store: ScopeStore) -> str | None:
    got = store.q1("RETURN (SELECT VALUE model FROM ONLY mirror_meta:embedding)")
    return got if isinstance(got, str) else None


def record_model(store: ScopeStore, model: str) -> None:
    store.q("UPSERT mirror_meta:embedding SET model = $m RETURN NONE", {"m": model})


def _has_vectors(store: ScopeStore) -> bool:
    return bool(
        store.q1(
            "RETURN count(SELECT VALUE id FROM memory WHERE embedding != NONE LIMIT 1) "
            "+ count(SELECT VALUE id FROM entity WHERE embedding != NONE LIMIT 1)"
        )
    )


def written_by(store: ScopeStore) -> str | None:
    """The model of this store's vectors; None when it holds none and records none."""
    got = recorded_model(store)
    if got is None and _has_vectors(store):
        return LEGACY_MODEL
    return got


def reconcile(embedder: Any, store: ScopeStore) -> None:
    """Make the store's vectors the embedder's (see the module docstring). An embedder without a ``model_id``
    (none, a test's stand-in) leaves stores as they are."""
    if getattr(embedder, "model_id", None) is None:
        return
    was = written_by(store)
    want = embedder.model_id
    if was is not None and was != want:
        try:
            n = reembed(store, embedder)
        except EmbeddingError as exc:
            # The old vectors stay (a recall's cosine is then off for this store) and the next open tries again.
            log.warning(
                "store %s/%s was embedded by %s, not %s, and could not be re-embedded: %s",
                store.namespace,
                store.database,
                was,
                want,
                exc,
            )
            return
        log.warning(
            "store %s/%s was embedded by %s: re-embedded %d vectors with %s",
            store.namespace,
            store.database,
            was,
            n,
            want,
        )
    if recorded_model(store) != want:
        record_model(store, want)


def reembed(store: ScopeStore, embedder: Embedder) -> int:
    """Every memory vector from its search text and every entity vector from its name and description (the
    texts they were first embedded from), in chunks; then the mirror reloads. Returns how many were rewritten."""
    n = 0

    def memory_text(r: dict[str, Any]) -> str:
        return str(r.get("search_text") or r.get("content") or "")

    def entity_text(r: dict[str, Any]) -> str:
        return f"{r.get('name') or ''} {r.get('description') or ''}".strip()

    for table, text_of in (("memory", memory_text), ("entity", entity_text)):
        fields = "search_text, content" if table == "memory" else "name, description"
        rows = store.q1(f"SELECT id, {fields} FROM {table} WHERE embedding != NONE") or []
        for i in range(0, len(rows), REEMBED_CHUNK):
            part = rows[i : i + REEMBED_CHUNK]
            vecs = embedder.embed([text_of(r) for r in part])
            encoded = [(r["id"], encode_vector(v)) for r, v in zip(part, vecs, strict=True)]
            if table == "memory":
                store.memories.set_embeddings({key_of(i): e for i, e in encoded})
            else:
                store.q(
                    "FOR $u IN $rows { UPDATE $u.id SET embedding = $u.e RETURN NONE; };",
                    {"rows": [{"id": i, "e": e} for i, e in encoded]},
                )
            n += len(part)
    store.reload_mirror()
    return n
