"""Embedding providers: the local model, and an OpenAI-compatible API spoken to over real HTTP.

The remote API cannot run here, so a local HTTP server speaks its wire format (POST /v1/embeddings,
{model, input, dimensions} → {data: [{embedding, index}]}); everything on our side is the real code."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import numpy as np
import pytest

from engram_core.config import load_settings
from engram_core.models import MemoryIn
from engram_core.retrieval.embeddings import ApiEmbedder, EmbeddingError, make_embedder, normalise
from engram_core.service import EngramService


class _Api(BaseHTTPRequestHandler):
    native_dim = 1536
    honour_dimensions = True
    requests: list[dict] = []
    status = 200

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"body": body, "auth": self.headers.get("Authorization")})
        if type(self).status != 200:
            self.send_response(type(self).status)
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "rate limited"}}')
            return
        dim = body.get("dimensions") if self.honour_dimensions and body.get("dimensions") else self.native_dim
        data = []
        for i, text in enumerate(body["input"]):
            rng = np.random.default_rng(abs(hash(text)) % (2**32))
            data.append({"object": "embedding", "index": i, "embedding": rng.normal(size=dim).tolist()})
        payload = json.dumps(
            {"object": "list", "data": list(reversed(data)), "model": body["model"]}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_url() -> Iterator[str]:
    _Api.requests = []
    _Api.status = 200
    _Api.honour_dimensions = True
    server = HTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1/embeddings"
    server.shutdown()


def test_api_provider_requests_384_dimensions(api_url: str) -> None:
    emb = ApiEmbedder(api_url, "text-embedding-3-small", "sk-test")
    vecs = emb.embed(["alpha", "beta"])
    assert vecs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0)
    req = _Api.requests[-1]
    assert req["body"] == {"model": "text-embedding-3-small", "input": ["alpha", "beta"], "dimensions": 384}
    assert req["auth"] == "Bearer sk-test"
    # Results come back in index order even when the server shuffles them.
    again = emb.embed(["beta"])
    assert np.allclose(again[0], vecs[1])


def test_api_provider_truncates_and_renormalises_when_dimensions_ignored(api_url: str) -> None:
    _Api.honour_dimensions = False
    vecs = ApiEmbedder(api_url, "m", None).embed(["gamma"])
    assert vecs.shape == (1, 384) and np.isclose(np.linalg.norm(vecs[0]), 1.0)
    raw = np.random.default_rng(abs(hash("gamma")) % (2**32)).normal(size=1536)[:384]
    assert np.allclose(vecs[0], raw / np.linalg.norm(raw), atol=1e-5)


def test_api_errors_are_clear_and_store_falls_back_to_bm25(
    api_url: str, engram_home: Path, project_dir: Path
) -> None:
    _Api.status = 429
    emb = ApiEmbedder(api_url, "m", None)
    with pytest.raises(EmbeddingError, match="429"):
        emb.embed(["x"])
    with EngramService(engram_home, embedder=emb) as svc:
        res = svc.store(MemoryIn(content="Kafka topics are created by terraform"), project=str(project_dir))
        assert "without an embedding" in res.message
        hits = svc.recall("kafka terraform", project=str(project_dir))
        assert hits.strategy == "bm25" and "429" in (hits.degraded or "") and hits.hits


def test_unreachable_api_says_where(engram_home: Path) -> None:
    with pytest.raises(EmbeddingError, match="unreachable"):
        ApiEmbedder("http://127.0.0.1:9/v1/embeddings", "m", None, timeout_s=1).embed(["x"])


def test_settings_from_local_md_frontmatter_and_env(
    project_dir: Path, monkeypatch: pytest.MonkeyPatch, api_url: str
) -> None:
    (project_dir / ".claude").mkdir()
    (project_dir / ".claude" / "engram.local.md").write_text(
        "---\nembedding_provider: api\nembedding_url: "
        + api_url
        + "\nembedding_model: text-embedding-3-small\n"
        "embedding_api_key: ${MY_KEY}\ninjection_token_budget: 900\n---\n# notes for humans\n"
    )
    monkeypatch.setenv("MY_KEY", "sk-from-env")
    settings = load_settings(project_dir)
    assert settings.embedding_provider == "api" and settings.embedding_api_key == "sk-from-env"
    assert settings.injection_token_budget == 900
    emb = make_embedder(settings)
    emb.embed(["hello"])
    assert _Api.requests[-1]["auth"] == "Bearer sk-from-env"
    monkeypatch.setenv("ENGRAM_INJECTION_TOKEN_BUDGET", "1200")
    assert load_settings(project_dir).injection_token_budget == 1200  # environment wins


def test_bad_settings_name_the_problem(project_dir: Path) -> None:
    from engram_core.config import ConfigError

    (project_dir / ".claude").mkdir()
    (project_dir / ".claude" / "engram.local.md").write_text("---\nembeding_provider: api\n---\n")
    with pytest.raises(ConfigError, match="embeding_provider"):
        load_settings(project_dir)


def test_local_model_is_real_and_normalised(embedder) -> None:  # noqa: ANN001
    vecs = embedder.embed(["The build uses Gradle", "Gradle builds the project", "I had pasta for lunch"])
    assert vecs.shape == (3, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert float(vecs[0] @ vecs[1]) > float(vecs[0] @ vecs[2]) + 0.2
    assert normalise(np.ones((1, 400)), 384).shape == (1, 384)


def test_onnx_backend_gives_the_same_vectors_as_sentence_transformers(embedder) -> None:  # noqa: ANN001
    """The ONNX backend at fp32 (onnxruntime on the exported model) must be the same model, not an approximation
    (int8 is a model of its own: tests/test_vector_model.py)."""
    from engram_core.retrieval.embeddings import LocalEmbedder

    texts = [
        "hello world",
        "Command failed: make test → ECONNRESET",
        "word " * 400,
        "The auth middleware lives in src/middleware/auth.ts",
    ]
    onnx = LocalEmbedder("onnx", precision="fp32")
    torch_ = LocalEmbedder("torch")
    a, b = onnx.embed(texts), torch_.embed(texts)
    assert "onnx" in onnx.name and "torch" in torch_.name
    assert np.min(np.sum(a * b, axis=1)) > 0.9999
    # Batching and length-sorting must not mix rows up.
    assert np.allclose(onnx.embed([texts[2], texts[0]])[1], a[0], atol=1e-5)


def test_unknown_backend_is_refused() -> None:
    from engram_core.retrieval.embeddings import LocalEmbedder

    with pytest.raises(EmbeddingError, match="backend"):
        LocalEmbedder("tpu")


def test_a_repeated_query_is_embedded_once(embedder, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    """The hook recalls the prompt and the agent often asks the same words again: the second costs no model run,
    and gives the same vector (a copy: a caller changing it must not change the next answer)."""
    model = embedder._load()
    runs: list[list[str]] = []
    real = model.encode
    monkeypatch.setattr(
        model, "encode", lambda texts, *a, **kw: runs.append(list(texts)) or real(texts, *a, **kw)
    )
    first = embedder.embed(["why does the upload retry fail [x] \\\\ 🚀"])
    first_copy = first.copy()
    first[0, 0] = 99.0
    again = embedder.embed(["why does the upload retry fail [x] \\\\ 🚀"])
    assert runs == [["why does the upload retry fail [x] \\\\ 🚀"]]
    assert np.array_equal(again, first_copy)
    embedder.embed(["something else"])
    embedder.embed(["why does the upload retry fail [x] \\\\ 🚀", "something else"])  # batches always run
    assert len(runs) == 3
