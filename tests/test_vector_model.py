"""Which model wrote a store's vectors (vector_model.py): a store records its model, a store from before the record
is taken as fp32 (nothing re-embedded), and a store written by another model than the home's (int8 set, or
fp32 again) is re-embedded as it opens."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engram_core.models import EntityIn, MemoryIn
from engram_core.retrieval import vector_model
from engram_core.retrieval.embeddings import LocalEmbedder, local_model_id
from engram_core.service import EngramService
from engram_core.storage import decode_vector, encode_vector

TEXTS = [
    "We deploy with `make release` [x] \\ 🚀 after the tag is pushed",
    "The upload worker retries ECONNRESET three times with jitter",
    "Priya prefers pytest fixtures over setUp methods",
]


@pytest.fixture(scope="module")
def fp32() -> LocalEmbedder:
    emb = LocalEmbedder("onnx", precision="fp32")
    emb.embed(["warm up"])
    return emb


@pytest.fixture(scope="module")
def int8() -> LocalEmbedder:
    emb = LocalEmbedder("onnx", precision="int8")
    emb.embed(["warm up"])
    return emb


def _fill(home: Path, project: Path, embedder: LocalEmbedder) -> None:
    with EngramService(home, embedder=embedder, recover_sessions=False) as svc:
        svc.store_many([MemoryIn(content=t) for t in TEXTS], project=str(project))
        svc.add_entities(
            [EntityIn(name="UploadWorker", entity_type="class", description="retries uploads")],
            scope="project",
            project=str(project),
        )


def _vectors(svc: EngramService, project: Path) -> list[dict[str, np.ndarray]]:
    """The memory vectors and the entity vectors, by the text each was embedded from, in the order the store
    lists them (as vector_model.reembed reads them)."""
    store = svc.project_store(str(project))
    assert store is not None
    return [
        {r["t"]: decode_vector(r["embedding"]) for r in store.q1(sql)}
        for sql in (
            "SELECT search_text ?? content AS t, embedding FROM memory WHERE embedding != NONE",
            "SELECT string::concat(name, ' ', description) AS t, embedding FROM entity WHERE embedding != NONE",
        )
    ]


def test_int8_is_close_to_fp32_but_not_the_same_model(fp32: LocalEmbedder, int8: LocalEmbedder) -> None:
    a, b = fp32.embed(TEXTS), int8.embed(TEXTS)
    assert "int8" in int8.name and "fp32" in fp32.name
    assert fp32.model_id != int8.model_id
    cos = np.sum(a * b, axis=1)
    assert cos.min() > 0.97 and cos.max() < 0.99999  # per-channel int8: near fp32, yet its own vectors
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)


def test_an_int8_vector_does_not_depend_on_its_batch(int8: LocalEmbedder) -> None:
    """int8 quantises activations with one scale per run: embedded in a batch, a text's vector would move with
    the texts beside it, and an import in chunks would store other vectors (and episodes) than one by one."""
    alone = np.stack([int8.embed([t])[0] for t in TEXTS])
    together = int8.embed([*TEXTS, "word " * 200, "x"])[: len(TEXTS)]
    assert np.array_equal(alone, together)


def test_a_new_home_is_fp32_and_records_it(tmp_path: Path, project_dir: Path) -> None:
    emb = LocalEmbedder()
    with EngramService(tmp_path / "home", embedder=emb, recover_sessions=False) as svc:
        svc.store(MemoryIn(content=TEXTS[0]), project=str(project_dir))
        assert emb.model_id == local_model_id("fp32")
        assert vector_model.recorded_model(svc.user) == local_model_id("fp32")
        assert vector_model.recorded_model(svc.project_store(str(project_dir))) == local_model_id("fp32")
        assert (
            svc.recall("how do we deploy a release", project=str(project_dir)).hits[0].memory.content
            == TEXTS[0]
        )


def test_a_store_from_before_the_record_is_fp32_and_kept_as_it_is(
    tmp_path: Path, project_dir: Path, fp32: LocalEmbedder
) -> None:
    home = tmp_path / "home"
    _fill(home, project_dir, fp32)
    with EngramService(home, embedder=fp32, recover_sessions=False) as svc:
        before = _vectors(svc, project_dir)
        for store in (svc.user, svc.project_store(str(project_dir))):  # as a store before the record existed
            store.q("DELETE mirror_meta:embedding")
    auto = LocalEmbedder()
    with EngramService(home, embedder=auto, recover_sessions=False) as svc:
        assert auto.model_id == local_model_id("fp32")
        after = _vectors(svc, project_dir)
        assert vector_model.recorded_model(svc.project_store(str(project_dir))) == local_model_id("fp32")
    for b, a in zip(before, after, strict=True):
        assert b.keys() == a.keys() and all(np.array_equal(b[k], a[k]) for k in b)


def test_a_store_written_by_another_model_is_reembedded_on_open(
    tmp_path: Path, project_dir: Path, fp32: LocalEmbedder, int8: LocalEmbedder
) -> None:
    home = tmp_path / "home"
    _fill(home, project_dir, fp32)
    with EngramService(home, embedder=int8, recover_sessions=False) as svc:
        store = svc.project_store(str(project_dir))
        assert vector_model.recorded_model(store) == local_model_id("int8")
        for got in _vectors(svc, project_dir):
            want = [decode_vector(encode_vector(v)) for v in int8.embed(list(got))]  # as the store keeps them
            assert np.array_equal(np.stack(list(got.values())), np.stack(want))
            assert len(got) >= 1
        # The mirror recall ranks by was reloaded with the new vectors.
        key = next(k for k, lt in store.summaries.items() if lt is not None)
        row = store.q1("SELECT VALUE embedding FROM ONLY $id", {"id": vector_model_record(key)})
        assert np.allclose(store.index.embedding(key), decode_vector(row))
        hits = svc.recall("who likes pytest fixtures", project=str(project_dir)).hits
        assert hits[0].memory.content == TEXTS[2] and hits[0].scores.vector_rank == 1


def vector_model_record(key: str):  # noqa: ANN201 - a RecordID
    from engram_core.storage import record

    return record(key)


def test_a_bad_precision_is_refused() -> None:
    from engram_core.retrieval.embeddings import EmbeddingError

    with pytest.raises(EmbeddingError, match="precision"):
        LocalEmbedder(precision="int4")


def test_the_daemon_reembeds_a_store_of_another_model_and_recall_finds_by_vector(
    tmp_path: Path, fp32: LocalEmbedder
) -> None:
    """The real path: a project store written by fp32 (an existing home's), then a daemon of a home set to int8
    over its socket, through the real CLI: the store is re-embedded as the daemon opens it, says which model it
    records, and a recall that only the vector can answer finds it."""
    import json
    import subprocess
    import sys

    from support import DaemonProc, new_project

    proj = new_project(tmp_path, "vmproj")
    _fill(tmp_path / "old-home", proj, fp32)
    d = DaemonProc(tmp_path / "new-home", env={"ENGRAM_EMBEDDING_PRECISION": "int8"}).start()
    try:

        def engram(*args: str) -> dict:
            p = subprocess.run(
                [sys.executable, "-m", "engram_core.cli", *args, "--json"],
                capture_output=True,
                text=True,
                timeout=120,
                cwd=str(proj),
                env=d.env,
            )
            assert p.returncode == 0, p.stderr
            return json.loads(p.stdout)

        hits = engram("recall", "which test style does she like")["hits"]
        assert hits[0]["content"] == TEXTS[2] and hits[0]["scores"]["vector_rank"] == 1
        assert "int8" in engram("stats")["embedding"]
    finally:
        d.stop()
    with EngramService(
        tmp_path / "new-home", embedder=LocalEmbedder(precision="int8"), recover_sessions=False
    ) as svc:
        store = svc.project_store(str(proj))
        assert vector_model.recorded_model(store) == local_model_id("int8")
        assert vector_model.recorded_model(svc.user) == local_model_id("int8")
