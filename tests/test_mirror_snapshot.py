"""The vector snapshot: a store opens with its vectors read from a file, each validated against the database's
own sum of that vector; whatever does not match (or is missing) is read from the database."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engram_core.models import Scope
from engram_core.store import Connection, ScopeStore


def _fill(store: ScopeStore, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    vecs = {}
    for i in range(n):
        v = rng.random(384).astype(np.float32)
        key = f"k{i}"
        store.create_memory(key, {"content": f"note {i} about [x] \\ emoji 🚀", "content_hash": f"h{i}",
                                  "memory_type": "semantic", "scope": "project", "importance": 0.5,
                                  "half_life_days": 1.0, "search_text": f"note {i}",
                                  "embedding": None if i == 3 else [float(x) for x in v]})
        if i != 3:
            vecs[key] = v / np.linalg.norm(v)
    return vecs


def _embedding_reads(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    reads: list[object] = []
    real = Connection.run

    def spy(self: Connection, ns: str, db: str, sql: str, params: dict | None = None) -> list[object]:
        if sql.startswith("SELECT id, embedding FROM $ids"):
            reads.append(sorted(str(r.id) for r in (params or {})["ids"]))
        return real(self, ns, db, sql, params)

    monkeypatch.setattr(Connection, "run", spy)
    return reads


def test_open_reads_vectors_from_the_snapshot_and_checks_them(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    vecs = _fill(store, 8)
    store.save_snapshot()
    assert store.snapshot_path is not None and store.snapshot_path.stat().st_mode & 0o077 == 0
    reads = _embedding_reads(monkeypatch)

    store.reload_mirror()
    assert reads == [], "every vector should have come from the snapshot"
    for k, v in vecs.items():
        assert np.allclose(store.index.embedding(k), v, atol=1e-6)
    assert store.index.embedding("k3") is None and "k3" in store.light

    # A vector changed behind the mirror's back (any writer): its sum no longer matches, so it is re-read.
    conn.run("project", "p", "UPDATE memory:k1 SET embedding = $e", {"e": [0.5] * 384})
    store.reload_mirror()
    assert reads == [["k1"]]
    assert np.allclose(store.index.embedding("k1"), np.full(384, 1 / np.sqrt(384)), atol=1e-6)

    # A damaged snapshot costs only speed.
    store.snapshot_path.write_bytes(b"not a snapshot")
    store.reload_mirror()
    assert reads[-1] == sorted(k for k in vecs)
    assert np.allclose(store.index.embedding("k0"), vecs["k0"], atol=1e-6)
    conn.close()
