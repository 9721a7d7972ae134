"""The mirror snapshot: a store opens from a file while the store's change counter matches it; otherwise every row
is read from the database, each vector one bytes value. The vectors come back exactly as the store holds them
(half precision), whichever way the mirror was filled."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from engram_core.models import Scope
from engram_core.storage import HALF_TAG, Connection, ScopeStore, decode_vector, encode_vector


def _fill(store: ScopeStore, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(3)
    vecs = {}
    for i in range(n):
        v = rng.random(384).astype(np.float32)
        key = f"k{i}"
        store.create_memory(
            key,
            {
                "content": f"note {i} about [x] \\ emoji 🚀",
                "content_hash": f"h{i}",
                "memory_type": "semantic",
                "scope": "project",
                "importance": 0.5,
                "half_life_days": 1.0,
                "search_text": f"note {i}",
                "embedding": None if i == 3 else [float(x) for x in v],
            },
        )
        if i != 3:
            vecs[key] = decode_vector(
                encode_vector(v)
            )  # what the store keeps: the unit vector, half precision
    return vecs


def _mirror_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[dict]]:
    """The rows the engine returned to each query that reads the memory table's vectors."""
    reads: list[list[dict]] = []
    real = Connection.run

    def spy(self: Connection, ns: str, db: str, sql: str, params: dict | None = None) -> list[object]:
        out = real(self, ns, db, sql, params)
        if "embedding" in sql and "FROM memory" in sql and sql.lstrip().startswith("SELECT"):
            reads.append(out[-1])
        return out

    monkeypatch.setattr(Connection, "run", spy)
    return reads


def test_an_out_of_date_snapshot_reads_every_vector_as_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the snapshot does not match the store (a write since, a damaged file), the mirror is read from the rows in
    one query, each vector one bytes value (schema 006): no float of it is decoded one by one. A vector written as
    float32 bytes (by a version before half precision) is read too."""
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    vecs = _fill(store, 8)
    store.save_snapshot()
    assert store.snapshot_path is not None and store.snapshot_path.stat().st_mode & 0o077 == 0
    reads = _mirror_reads(monkeypatch)

    # A vector changed behind the mirror's back (any writer): the snapshot is out of date, the rows are read.
    conn.run(
        "project", "p", "UPDATE memory:k1 SET embedding = $e", {"e": np.full(384, 0.5, np.float32).tobytes()}
    )
    store.reload_mirror()
    assert len(reads) == 1 and len(reads[0]) == 8
    assert {type(r.get("embedding")) for r in reads[0]} == {bytes, type(None)}
    assert {len(r["embedding"]) for r in reads[0] if r.get("embedding") is not None} == {1 + 384 * 2, 384 * 4}
    assert all(r["embedding"][:1] == HALF_TAG for r in reads[0] if r.get("embedding") and r["id"].id != "k1")
    assert np.array_equal(store.index.embedding("k1"), decode_vector(encode_vector(np.full(384, 0.5))))
    assert np.allclose(store.index.embedding("k1"), np.full(384, 1 / np.sqrt(384)), atol=1e-4)
    for k, v in vecs.items():
        if k != "k1":
            assert np.array_equal(store.index.embedding(k), v)
    assert store.index.embedding("k3") is None and "k3" in store.summaries

    # A damaged snapshot costs only speed.
    store.snapshot_path.write_bytes(b"not a snapshot")
    store.reload_mirror()
    assert len(reads) == 2
    assert np.array_equal(store.index.embedding("k0"), vecs["k0"])
    conn.close()


def test_unchanged_store_opens_from_the_snapshot_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing wrote a memory since the snapshot (the store's change counter says so): the whole mirror comes
    from the file, no row is read. Any write, by Engram or anyone else, sends the next open back to the rows."""
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    _fill(store, 6)
    before = {
        k: (lt.status, lt.access_count, lt.content, lt.last_accessed_at) for k, lt in store.summaries.items()
    }
    bm25 = store.index.bm25("note 4", 3)
    store.save_snapshot()
    sent: list[str] = []
    real = Connection.run

    def spy(self: Connection, ns: str, db: str, sql: str, params: dict | None = None) -> list[object]:
        sent.append(sql)
        return real(self, ns, db, sql, params)

    monkeypatch.setattr(Connection, "run", spy)
    import engram_core.retrieval.search_index as si

    tokenised: list[str] = []
    real_tokenize = si.tokenize
    monkeypatch.setattr(
        si, "tokenize", lambda text, **kw: tokenised.append(text) or real_tokenize(text, **kw)
    )
    store.reload_mirror()
    assert not [s for s in sent if "FROM memory" in s], sent
    assert tokenised == [], "the BM25 postings come from the snapshot too"
    assert {
        k: (lt.status, lt.access_count, lt.content, lt.last_accessed_at) for k, lt in store.summaries.items()
    } == before
    assert store.index.bm25("note 4", 3) == bm25
    monkeypatch.setattr(si, "tokenize", real_tokenize)

    conn.run(
        "project", "p", "UPDATE memory:k2 SET access_count = 5"
    )  # a console write, not through the store
    store.reload_mirror()
    assert any("FROM memory" in s for s in sent)
    assert store.summaries["k2"].access_count == 5
    conn.close()


def test_the_snapshot_keeps_each_indexed_text_once_and_compressed(tmp_path: Path) -> None:
    """An indexed text equal to the content is written once (most are: context is added only within an episode),
    and the light rows are zlib-compressed; both come back exactly."""
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    _fill(store, 3)  # indexed text "note i", content different
    same = "Use `make test` [fast] \\ 🚀 before pushing"
    store.create_memory(
        "same",
        {
            "content": same,
            "content_hash": "hs",
            "memory_type": "semantic",
            "scope": "project",
            "importance": 0.5,
            "half_life_days": 1.0,
            "search_text": same,
        },
    )
    store.save_snapshot()
    assert store.snapshot_path is not None
    with np.load(store.snapshot_path) as z:
        rows = {r[0]: r for r in json.loads(zlib.decompress(bytes(z["light"])))}
    assert rows["same"][14] is None and rows["k1"][14] == "note 1"
    store.reload_mirror()
    assert store.index.text("same") == same and store.index.text("k1") == "note 1"
    assert store.index.bm25("make test", 1)[0][0] == "same"
    conn.close()


@pytest.mark.parametrize("n", [3, 6], ids=["every memory has a vector", "one has none"])
def test_the_vectors_come_back_from_the_snapshot_in_their_places(tmp_path: Path, n: int) -> None:
    """With a vector for every memory the snapshot's matrix is taken as it is (no reordering copy: at 100,000
    memories one 154 MB copy less at each start); with gaps each row still lands on its own memory."""
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    vecs = _fill(store, n)
    store.save_snapshot()
    assert store.snapshot_path is not None
    with np.load(store.snapshot_path) as z:
        assert z["vecs"].dtype == np.float16  # as the store keeps them: half the bytes of float32
    store.reload_mirror()
    assert set(store.summaries) == {f"k{i}" for i in range(n)}
    for key in store.summaries:
        if key in vecs:
            assert np.array_equal(store.index.embedding(key), vecs[key]), key
        else:
            assert store.index.embedding(key) is None
    top = store.index.vector(vecs["k1"], 1)
    assert top[0][0] == "k1"
    conn.close()


def test_the_two_stage_scans_basis_comes_back_from_the_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large index computes the two-stage scan's basis (an SVD: 0.36 s at 100k) at its first query; the snapshot
    keeps it, so after a start the slots are only projected on it, and the vector search answers the same."""
    import engram_core.retrieval.search_index as si

    monkeypatch.setattr(si.SearchIndex, "COARSE_MIN_DOCS", 20)
    monkeypatch.setattr(si.SearchIndex, "COARSE_CANDIDATES", 10)
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    vecs = _fill(store, 40)
    query = vecs["k5"] + 0.3 * vecs["k9"]
    assert store.index.projection() is None  # nothing built before a query
    before = store.index.vector(query, 8)
    basis, basis_at = store.index.projection()  # type: ignore[misc]
    store.save_snapshot()

    svds: list[int] = []
    real_svd = np.linalg.svd
    monkeypatch.setattr(np.linalg, "svd", lambda *a, **kw: svds.append(1) or real_svd(*a, **kw))
    store.reload_mirror()
    kept = store.index.projection()
    assert kept is not None and kept[1] == basis_at and np.array_equal(kept[0], basis)
    assert store.index.vector(query, 8) == before
    assert svds == [], "the basis came from the snapshot: no SVD at the first query after a start"
    conn.close()
