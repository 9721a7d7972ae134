"""Vectors are stored as bytes (schema 006; half precision since snapshot v6, float32 bytes before): what a new store
holds, how a store written before is upgraded (every vector as `encode_vector` writes it, recall unchanged), and
every reader of a vector (mirror, export, console, explore)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engram_core.models import MemoryIn, MemoryPatch, Scope
from engram_core.service import EngramService
from engram_core.storage import (
    HALF_TAG,
    VECTOR_BYTES_SCHEMA,
    Connection,
    ScopeStore,
    decode_vector,
    encode_vector,
    migrations,
)
from engram_core.tools_support import _strip

TEXTS = [
    "Builds use Bazel 7; the remote cache lives on the build box",
    "Run `pytest -x -q` before pushing [fast] \\ and never skip flaky tests 🚀",
    "The payments worker retries with exponential backoff, capped at 5 tries",
    "Alice prefers small pull requests with one commit each",
    "Postgres connections are pooled by pgbouncer in transaction mode",
]


def _old_format_store(path: Path, ns: str, db: str, vectors: list[list[float]]) -> None:
    """A store as Engram wrote it before schema 006: migrations 001-005, vectors as arrays of floats (a memory and
    an entity each), plus a forgotten memory that has none."""
    conn = Connection.file(path)
    old = [(v, text) for v, _name, text in migrations() if v < VECTOR_BYTES_SCHEMA]
    conn.run(
        ns,
        db,
        "BEGIN TRANSACTION;\n"
        + "\n".join(text for _v, text in old)
        + f"\nUPSERT schema_meta:current SET version = {old[-1][0]};\nCOMMIT TRANSACTION;",
    )
    for i, vec in enumerate(vectors):
        conn.run(
            ns,
            db,
            "CREATE type::record('memory', $k) CONTENT $f RETURN NONE",
            {
                "k": f"m{i}",
                "f": {
                    "content": TEXTS[i],
                    "content_hash": f"h{i}",
                    "memory_type": "semantic",
                    "scope": ns,
                    "importance": 0.6,
                    "half_life_days": 30.0,
                    "search_text": TEXTS[i],
                    "embedding": vec,
                    "status": "active",
                },
            },
        )
        conn.run(
            ns,
            db,
            "CREATE type::record('entity', $k) CONTENT $f RETURN NONE",
            {
                "k": f"e{i}",
                "f": {
                    "name": f"thing{i}",
                    "name_key": f"thing{i}",
                    "entity_type": "concept",
                    "scope": ns,
                    "embedding": vec,
                },
            },
        )
    conn.run(
        ns,
        db,
        "CREATE memory:gone CONTENT {content: '[forgotten]', content_hash: '', memory_type: 'semantic',"
        f" scope: '{ns}', status: 'forgotten'}}",
    )
    assert conn.run(ns, db, "RETURN type::of((SELECT VALUE embedding FROM ONLY memory:m0))")[-1] == "array"
    conn.close()


def test_an_old_store_is_upgraded_to_bytes_and_recall_finds_the_same(engram_home: Path, embedder) -> None:  # noqa: ANN001
    vecs = embedder.embed(TEXTS)
    floats = [[float(x) for x in v] for v in vecs]  # exactly what the old writer stored
    _old_format_store(engram_home / "user.db", "user", "default", floats)

    with EngramService(engram_home, embedder=embedder) as svc:
        store = svc.user
        assert store.schema_version() >= VECTOR_BYTES_SCHEMA
        for table, prefix in (("memory", "m"), ("entity", "e")):
            raw = store.q1(f"SELECT VALUE [record::id(id), embedding] FROM {table} WHERE embedding != NONE")
            got = {k: v for k, v in raw}
            assert sorted(got) == [f"{prefix}{i}" for i in range(len(TEXTS))]
            for i, f in enumerate(floats):
                assert isinstance(got[f"{prefix}{i}"], bytes) and len(got[f"{prefix}{i}"]) == 1 + 384 * 2
                assert got[f"{prefix}{i}"] == encode_vector(np.asarray(f, dtype=np.float32))
        assert store.q1("SELECT VALUE embedding FROM ONLY memory:gone") is None
        assert store.conn.erased, "the old floats are still in the files: the store is due for compaction"
        # An upgraded row can be written again (a row left with floats would be refused by the bytes type).
        store.q("UPDATE memory:m1 SET access_count += 1 RETURN NONE")
        for i, text in enumerate(TEXTS):
            hits = svc.recall(text, scope="user").hits
            assert hits and hits[0].memory.id == f"m{i}", (text, [h.memory.id for h in hits])
        # The mirror's vectors are the stored ones, within half precision of the model's.
        for i, v in enumerate(vecs):
            got_vec = store.index.embedding(f"m{i}")
            assert np.array_equal(got_vec, decode_vector(encode_vector(v)))
            assert np.allclose(got_vec, v, atol=1e-3) and float(np.dot(got_vec, v)) > 0.99999
        # The compaction the upgrade asks for copies the new definitions and the bytes (the engine's own
        # `embedding.*` float definition, left behind, made the copy refuse them).
        report = svc.compact(only_due=True)
        assert [s.path for s in report.stores] == [str(engram_home / "user.db")]
        assert "embedding.*" not in (store.q1("INFO FOR TABLE memory") or {}).get("fields", {})
        assert store.q1("SELECT VALUE embedding FROM ONLY memory:m3") == encode_vector(floats[3])

    # Opened again: nothing left to convert, the upgrade does not run twice.
    with EngramService(engram_home, embedder=embedder) as svc:
        assert not svc.user.conn.erased
        assert svc.recall(TEXTS[2], scope="user").hits[0].memory.id == "m2"


def test_a_new_memory_is_stored_as_half_precision_bytes(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    m = service.store(MemoryIn(content="Deploys go through Argo CD, never kubectl apply"), project=p).memory
    store = service.project_store(p)
    assert store is not None
    raw = store.q1("SELECT VALUE embedding FROM ONLY type::record('memory', $k)", {"k": m.id})
    assert isinstance(raw, bytes) and len(raw) == 1 + 384 * 2 and raw[:1] == HALF_TAG  # 769 B, not 1,536
    assert (
        store.q1(
            "RETURN type::of((SELECT VALUE embedding FROM ONLY type::record('memory', $k)))", {"k": m.id}
        )
        == "bytes"
    )
    assert np.array_equal(
        np.frombuffer(raw[1:], dtype="<f2").astype(np.float32), store.memories.get_embedding(m.id)
    )
    assert np.array_equal(store.index.embedding(m.id), store.memories.get_embedding(m.id))
    # The engine refuses a vector as floats now: one form only.
    with pytest.raises(Exception, match="bytes"):
        store.q("UPDATE type::record('memory', $k) SET embedding = [0.5, 0.5]", {"k": m.id})
    # An edit re-embeds into bytes too.
    service.update(m.id, MemoryPatch(content="Deploys go through Argo CD"), project=p)
    assert isinstance(
        store.q1("SELECT VALUE embedding FROM ONLY type::record('memory', $k)", {"k": m.id}), bytes
    )


def test_readers_show_a_vector_as_its_numbers(service: EngramService, project_dir: Path) -> None:
    """Export writes the floats (the format a person reads, unchanged); the console shows them too; the agent's
    explore tool shows a placeholder."""
    p = str(project_dir)
    m = service.store(
        MemoryIn(content="The cache key includes the [locale] \\ and 🚀 flag"), project=p
    ).memory
    store = service.project_store(p)
    assert store is not None
    stored = decode_vector(
        store.q1("SELECT VALUE embedding FROM ONLY type::record('memory', $k)", {"k": m.id})
    )
    assert stored is not None
    exported = [r for r in service.export_memories(project=p) if r.id == m.id][0]
    assert exported.embedding == [float(x) for x in stored]
    rows = service.run_query("SELECT * FROM memory", project=p).statements[0].rows
    assert rows[0]["embedding"] == [float(x) for x in stored]
    assert _strip({"embedding": encode_vector(stored)}) == {"embedding": "<384 floats>"}


def test_promotion_copies_the_vector_into_the_higher_scope(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    m = service.store(
        MemoryIn(content="Always pin the node version in .nvmrc", memory_type="procedural"), project=p
    ).memory
    store = service.project_store(p)
    assert store is not None
    report = service.promote(m.id, target_scope="user", project=p)
    target = report.promoted[0].split(":", 1)[1]
    user_raw = service.user.q1("SELECT VALUE embedding FROM ONLY type::record('memory', $k)", {"k": target})
    assert user_raw == store.q1("SELECT VALUE embedding FROM ONLY type::record('memory', $k)", {"k": m.id})


def test_forget_erase_clears_the_vector(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    m = service.store(MemoryIn(content="The staging password rotates monthly"), project=p).memory
    service.forget(m.id, project=p, erase=True, confirm=True)
    store = service.project_store(p)
    assert store is not None
    assert store.q1("SELECT VALUE embedding FROM ONLY type::record('memory', $k)", {"k": m.id}) is None
    assert store.index.embedding(m.id) is None


def test_scope_store_decodes_old_floats_only_in_the_upgrade(tmp_path: Path) -> None:
    """A store file opened by a bare ScopeStore (the daemon's path) is upgraded the same way."""
    floats = [[float(x) for x in np.random.default_rng(i).random(384).astype(np.float32)] for i in range(3)]
    _old_format_store(tmp_path / "project.db", "project", "p", floats)
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    for i, f in enumerate(floats):
        assert np.array_equal(store.memories.get_embedding(f"m{i}"), decode_vector(encode_vector(f)))
    conn.close()


def test_an_interrupted_upgrade_goes_on_at_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk of the conversion commits on its own (a store of any size, bounded memory): a crash after the
    first leaves some rows as bytes and the others as floats, both still writable, and the next open finishes."""
    import engram_core.storage.database as database_mod
    import engram_core.storage.schema as store_mod

    floats = [[float(x) for x in np.random.default_rng(i).random(384).astype(np.float32)] for i in range(5)]
    _old_format_store(tmp_path / "project.db", "project", "p", floats)
    real = store_mod.vectors_to_bytes
    written: list[int] = []
    real_q = database_mod.Database.write

    def crash_after_first_chunk(self: ScopeStore, sql: str, params: dict | None = None) -> list:
        if sql.startswith("FOR $u IN $vecs") and written:
            raise RuntimeError("power cut")
        out = real_q(self, sql, params)
        if sql.startswith("FOR $u IN $vecs"):
            written.append(len((params or {})["vecs"]))
        return out

    monkeypatch.setattr(store_mod, "vectors_to_bytes", lambda db: real(db, chunk=2))
    monkeypatch.setattr(database_mod.Database, "write", crash_after_first_chunk)
    conn = Connection.file(tmp_path / "project.db")
    with pytest.raises(RuntimeError, match="power cut"):
        ScopeStore(conn, Scope.project, "p")
    monkeypatch.setattr(database_mod.Database, "write", real_q)
    kinds = conn.run(
        "project", "p", "SELECT VALUE type::of(embedding) FROM memory WHERE embedding != NONE ORDER BY id"
    )[-1]
    assert written == [2] and sorted(kinds) == ["array", "array", "array", "bytes", "bytes"]
    assert (
        conn.run("project", "p", "RETURN (SELECT VALUE version FROM ONLY schema_meta:current)")[-1]
        < VECTOR_BYTES_SCHEMA
    )
    conn.run("project", "p", "UPDATE memory:m4 SET access_count += 1 RETURN NONE")  # still writable mid-way

    store = ScopeStore(conn, Scope.project, "p")
    assert store.schema_version() >= VECTOR_BYTES_SCHEMA
    for i, f in enumerate(floats):
        assert store.q1(f"SELECT VALUE embedding FROM ONLY memory:m{i}") == encode_vector(f)
    conn.close()


def test_a_vector_read_back_encodes_to_the_same_bytes() -> None:
    """What `engram export` writes (the stored vector's numbers) is stored again bit for bit by `engram import`,
    and every form a vector was ever stored in (float32 bytes, a list of floats) reads back as the half-precision
    vector a write stores now: the mirror holds the same values whichever form a row has."""
    rng = np.random.default_rng(5)
    for scale in (1.0, 3.7, 0.01):
        v = (rng.normal(size=384) * scale).astype(np.float32)
        if scale == 1.0:
            v /= np.linalg.norm(v)
        raw = encode_vector(v)
        assert raw is not None and len(raw) == 1 + 384 * 2
        back = decode_vector(raw)
        assert back is not None and abs(float(np.linalg.norm(back)) - 1.0) < 1e-3
        assert encode_vector(back) == raw and encode_vector([float(x) for x in back]) == raw
        assert np.array_equal(decode_vector(v.astype("<f4").tobytes()), back)  # float32 bytes, written before
        assert np.array_equal(decode_vector([float(x) for x in v]), back)  # floats, before schema 006
    assert encode_vector(np.zeros(0)) is None and decode_vector(None) is None


def test_a_compaction_rewrites_float32_vectors_in_half_precision(
    service: EngramService, project_dir: Path
) -> None:
    """A store written before half precision holds float32 bytes: they are read as they are, and its next
    compaction copies them in today's form (half the bytes), with recall and the mirror unchanged."""
    p = str(project_dir)
    keys = [service.store(MemoryIn(content=t), project=p).memory.id for t in TEXTS]
    store = service.project_store(p)
    assert store is not None
    vecs = {k: store.memories.get_embedding(k) for k in keys}
    for k, v in vecs.items():  # as the version before wrote them
        store.conn.run(
            store.namespace,
            store.database,
            "UPDATE type::record('memory', $k) SET embedding = $e",
            {"k": k, "e": np.asarray(v, dtype="<f4").tobytes()},
        )
    store.reload_mirror()
    before = [[h.memory.id for h in service.recall(t, project=p, strengthen=False).hits] for t in TEXTS]
    assert all(np.array_equal(store.index.embedding(k), v) for k, v in vecs.items())
    store.conn.erased = True  # due
    report = service.compact(project=p, only_due=True)
    assert [s.path for s in report.stores] == [str(store.conn.path)]
    for k, v in vecs.items():
        raw = store.q1("SELECT VALUE embedding FROM ONLY type::record('memory', $k)", {"k": k})
        assert raw == encode_vector(v) and len(raw) == 1 + 384 * 2
        assert np.array_equal(store.index.embedding(k), v)
    store.reload_mirror()
    assert [
        [h.memory.id for h in service.recall(t, project=p, strengthen=False).hits] for t in TEXTS
    ] == before
