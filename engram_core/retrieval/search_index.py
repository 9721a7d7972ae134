"""In-process search mirror of one scope store's searchable memories.

SurrealDB stays the source of truth; this mirror exists because the engine's own HNSW (~70 ms) and FULLTEXT
BM25 (~25 ms) per scope are too slow for a recall across three scopes in <= 20 ms. The store rebuilds it at
open and keeps it in step on every write, so every mutation here is incremental (O(document), amortised).
"""

from __future__ import annotations

import math
import os
import re
import threading
import unicodedata
import zlib
from collections import Counter
from collections.abc import Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import cast

import numpy as np
import Stemmer

__all__ = ["STOPWORDS_EN", "Postings", "SearchIndex", "analyser_id", "rrf", "tokenize"]

# The cosine scan reads a whole matrix, which on one core is bound by memory bandwidth (BLAS runs on one thread:
# its pool spins after each call, engram_core/__init__.py). A large scan runs in two halves, one helper thread
# taking the second while the caller scans the first: numpy releases the GIL in the product and in a row gather.
# Measured in the daemon: at 100k memories (the two-stage scan) recall p50 31.8 -> 26.4 ms; a full scan of the
# 10,000-row store of the 15k set was no faster (the helper's wake-up costs what the half saves), so full scans
# split from SPLIT_MIN_ROWS rows, and the two-stage scan (from SearchIndex.COARSE_MIN_DOCS) always.
SPLIT_MIN_ROWS = 20_000
_CORES = os.cpu_count() or 1
_helper: ThreadPoolExecutor | None = None
_helper_lock = threading.Lock()


def _helper_thread() -> ThreadPoolExecutor:
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = ThreadPoolExecutor(1, thread_name_prefix="engram-scan")
        return _helper


def _scan_rows(matrix: np.ndarray, rows: np.ndarray | None, vec: np.ndarray, *, split: bool) -> np.ndarray:
    """``matrix[rows] @ vec`` (``rows`` None: every row); with ``split``, the two halves on two threads."""
    n = matrix.shape[0] if rows is None else len(rows)
    if not split or n < 2 or _CORES < 2:
        out: np.ndarray = (matrix if rows is None else matrix[rows]) @ vec
        return out
    out = np.empty(n, dtype=np.float32)
    half = n // 2

    def part(lo: int, hi: int) -> None:
        np.matmul(matrix[lo:hi] if rows is None else matrix[rows[lo:hi]], vec, out=out[lo:hi])

    later = _helper_thread().submit(part, half, n)
    part(0, half)
    later.result()
    return out


# The list bm25s uses for its English baseline; short on purpose: a longer list (e.g. dropping "when",
# "what", pronouns) throws away words that matter in questions about people and time.
STOPWORDS_EN: frozenset[str] = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)

# SurrealDB's `class` tokenizer splits where the character class changes (letters / digits / punctuation);
# after the `ascii` and `lowercase` filters that is exactly runs of [a-z] and runs of [0-9].
_TOKEN_RE = re.compile(r"[a-z]+|[0-9]+")

# PyStemmer objects are not safe to share between threads; the daemon serves many clients at once.
_stemmers = threading.local()
# Stemming dominates tokenisation cost and the vocabulary is small; a plain dict is safe under the GIL
# (a race only recomputes the same value).
_stem_cache: dict[str, str] = {}
_STEM_CACHE_MAX = 200_000


def _stemmer() -> Stemmer.Stemmer:
    st = getattr(_stemmers, "stemmer", None)
    if st is None:
        st = Stemmer.Stemmer("english")
        _stemmers.stemmer = st
    return st


def _stem(word: str) -> str:
    s = _stem_cache.get(word)
    if s is None:
        s = _stemmer().stemWord(word)
        if len(_stem_cache) >= _STEM_CACHE_MAX:
            _stem_cache.clear()
        _stem_cache[word] = s
    return s


def _ascii_fold(text: str) -> str:
    if text.isascii():
        return text
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def tokenize(text: str, *, drop_stopwords: bool = True) -> list[str]:
    """Analyse text like SurrealDB's `blank, class` + `ascii, lowercase, snowball(english)` analyzer.

    Stopwords are dropped before stemming (the bm25s baseline does the same) unless told otherwise.
    """
    words = _TOKEN_RE.findall(_ascii_fold(text).lower())
    if drop_stopwords:
        return [_stem(w) for w in words if w not in STOPWORDS_EN]
    return [_stem(w) for w in words]


# Bump when tokenize() changes in a way its pattern and stopwords do not show (the stemmer's rules, the folding):
# postings saved by an older analyser are then rebuilt from the texts instead of being trusted.
ANALYSER_VERSION = 1


def analyser_id(drop_stopwords: bool = True) -> str:
    """What saved postings were analysed with; they are loaded only by an index analysing the same way."""
    return (
        f"v{ANALYSER_VERSION}:{_TOKEN_RE.pattern}:{int(drop_stopwords)}:{len(STOPWORDS_EN)}:"
        f"{zlib.crc32(' '.join(sorted(STOPWORDS_EN)).encode())}:{getattr(Stemmer, '__version__', '?')}"
    )


@dataclass
class Postings:
    """An index's BM25 postings in compact form (for the store's snapshot): term i's documents are
    ``slots[offsets[i]:offsets[i + 1]]`` (positions in the id list they were exported for), with their term
    frequencies in ``tfs``; ``doc_len`` is each document's token count."""

    analyser: str
    terms: list[str]
    offsets: np.ndarray
    slots: np.ndarray
    tfs: np.ndarray
    doc_len: np.ndarray


def _fits(p: Postings, n: int, drop_stopwords: bool) -> bool:
    """Saved postings that belong to these n documents and this analyser (anything else is rebuilt)."""
    return (
        p.analyser == analyser_id(drop_stopwords)
        and len(p.doc_len) == n
        and len(p.offsets) == len(p.terms) + 1
        and int(p.offsets[-1]) == len(p.slots) == len(p.tfs)
        and (len(p.slots) == 0 or (int(p.slots.min()) >= 0 and int(p.slots.max()) < n))
    )


UNIT_TOLERANCE = 2e-3  # a unit vector in float16 is off by ~1e-4 at most


def _as_unit_vector(vec: np.ndarray | Sequence[float], dim: int) -> np.ndarray | None:
    arr = np.asarray(vec, dtype=np.float32).reshape(-1)
    if arr.shape[0] != dim:
        raise ValueError(f"embedding has dimension {arr.shape[0]}, index expects {dim}")
    norm = float(np.linalg.norm(arr))
    if not math.isfinite(norm) or norm == 0.0:
        return None
    # A stored vector is a unit vector rounded to half precision (store.encode_vector): kept as it is, the index
    # holds exactly what the store and the snapshot hold, whichever way it was filled.
    return arr if abs(norm - 1.0) <= UNIT_TOLERANCE else arr / norm


class SearchIndex:
    """BM25 inverted index + dense cosine matrix over one scope's memories, guarded by one RLock.

    Documents live in slots; a removed document's slot goes onto a free list and is reused, and the
    matrices grow by doubling, so upsert/remove never touch the whole corpus.

    k1=0.9, b=0.4 (Anserini's defaults) beat Lucene's 1.2/0.75 on LoCoMo: memories are short and of similar
    length, so length normalisation mostly adds noise.
    """

    _INITIAL_CAPACITY = 64
    MEMO_TOP = 200  # how many of the last query vector's best documents are kept for the next ask (`vector`)
    # From this many documents on, the cosine scan goes in two stages (`_coarse_top`): reading the whole float32
    # matrix is memory-bound (100k × 384: 153 MB, ~19 ms a query on this machine), so a PCA projection of it is
    # scanned first and only its best candidates are scored exactly. Below it (LoCoMo, a 15k store) the scan is exact.
    COARSE_MIN_DOCS = 30_000
    COARSE_DIMS = 96
    COARSE_CANDIDATES = 4_000  # at least; COARSE_PER_ASKED × what is asked when that is more
    COARSE_PER_ASKED = 20
    # And at least a tenth of the documents: on the 12.2k store's real vectors, the best tenth by projection held
    # 99.5 % of the exact top 200 (the top 10 identical for 100 questions of 100); the best 4 % held 93 %.
    COARSE_SHARE = 10

    def __init__(
        self, dim: int = 384, *, k1: float = 0.9, b: float = 0.4, drop_stopwords: bool = True
    ) -> None:
        self.dim = dim
        self.k1 = k1
        self.b = b
        self.drop_stopwords = drop_stopwords
        self._lock = threading.RLock()
        cap = self._INITIAL_CAPACITY
        self._slot_of: dict[str, int] = {}
        self._id_of: list[str | None] = [None] * cap
        self._free: list[int] = []
        self._high = 0  # slots [0, _high) have ever been used; searches only scan that prefix
        self._vecs = np.zeros((cap, dim), dtype=np.float32)
        self._has_vec = np.zeros(cap, dtype=bool)
        self._doc_len = np.zeros(cap, dtype=np.float32)
        # term -> {slot: term frequency}; the per-slot term counts let remove() undo exactly what upsert did.
        self._postings: dict[str, dict[int, int]] = {}
        self._doc_terms: dict[int, Counter[str]] = {}
        # Postings read whole from a snapshot (load(..., postings=)): term -> (start, end) in the two arrays. A term
        # moves into _postings the first time a write changes it; a slot loaded this way (in _lazy_docs) has its
        # term counts computed from its text when first needed. Opening a 10k store then tokenises nothing.
        self._base: dict[str, tuple[int, int]] = {}
        self._base_slots = np.zeros(0, dtype=np.int64)
        self._base_tfs = np.zeros(0, dtype=np.float32)
        self._lazy_docs: set[int] = set()
        self._texts: dict[str, str] = {}
        # Posting lists as numpy arrays, built lazily per term and dropped when that term's postings change.
        self._posting_arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._n_text_docs = 0
        self._total_len = 0
        # The last query vector's best documents: one recall asks for the same vector more than once (spreading
        # activation, then ranking); any write invalidates it.
        self._version = 0
        self._vec_memo: tuple[bytes, int, int, list[tuple[str, float]]] | None = None
        # The two-stage scan's projection (dim × COARSE_DIMS) and every slot's projected vector, built at the first
        # query of a large index and kept in step by every write after; None below COARSE_MIN_DOCS.
        self._basis: np.ndarray | None = None
        self._coarse: np.ndarray | None = None
        self._basis_at = 0  # how many slots were in use when the projection was computed

    # ------------------------------------------------------------------ mutation

    def _grow(self) -> None:
        old = len(self._id_of)
        new = old * 2
        self._id_of.extend([None] * (new - old))
        vecs = np.zeros((new, self.dim), dtype=np.float32)
        vecs[:old] = self._vecs
        self._vecs = vecs
        self._has_vec = np.concatenate([self._has_vec, np.zeros(new - old, dtype=bool)])
        self._doc_len = np.concatenate([self._doc_len, np.zeros(new - old, dtype=np.float32)])
        if self._coarse is not None:
            coarse = np.zeros((new, self.COARSE_DIMS), dtype=np.float32)
            coarse[:old] = self._coarse
            self._coarse = coarse

    def _alloc_slot(self) -> int:
        if self._free:
            return self._free.pop()
        if self._high >= len(self._id_of):
            self._grow()
        slot = self._high
        self._high += 1
        return slot

    def _plist(self, term: str) -> dict[int, int] | None:
        """The postings a write may change (taken out of the loaded arrays first). Caller holds the lock."""
        span = self._base.pop(term, None)
        if span is not None:
            a, b = span
            self._postings[term] = dict(
                zip(self._base_slots[a:b].tolist(), self._base_tfs[a:b].astype(int).tolist(), strict=True)
            )
        return self._postings.get(term)

    def _clear_slot_text(self, slot: int, old_text: str) -> None:
        terms = self._doc_terms.pop(slot, None)
        if terms is None and slot in self._lazy_docs:
            self._lazy_docs.discard(slot)
            terms = Counter(tokenize(old_text, drop_stopwords=self.drop_stopwords))
        if terms is None:
            return
        for term in terms:
            plist = self._plist(term)
            if plist is not None:
                plist.pop(slot, None)
                if not plist:
                    del self._postings[term]
            self._posting_arrays.pop(term, None)
        self._total_len -= int(self._doc_len[slot])
        self._n_text_docs -= 1
        self._doc_len[slot] = 0.0

    def load(
        self,
        ids: list[str],
        texts: list[str],
        vecs: np.ndarray,
        has_vec: np.ndarray,
        postings: Postings | None = None,
        projection: tuple[np.ndarray, int] | None = None,
    ) -> None:
        """Fill an empty index in one go (store open): the same state as upserting each, without the per-document
        locking and vector checks. ``vecs`` rows are already unit vectors (or zero where ``has_vec`` is false).
        ``postings`` (from `export_postings` with the same ids, same analyser) spares tokenising every text;
        ``projection`` (from `projection`, over these vectors) spares the two-stage scan's basis."""
        with self._lock:
            if self._slot_of:
                raise ValueError("load() fills an empty index")
            self._basis = self._coarse = None
            self._basis_at = 0
            if projection is not None and projection[0].shape == (self.dim, self.COARSE_DIMS):
                self._basis = np.ascontiguousarray(projection[0], dtype=np.float32)
                self._basis_at = max(1, int(projection[1]))
            n = len(ids)
            cap = max(self._INITIAL_CAPACITY, 1 << max(0, (n - 1).bit_length()))
            self._id_of = [*ids, *([None] * (cap - n))]
            self._slot_of = {d: i for i, d in enumerate(ids)}
            self._texts = dict(zip(ids, texts, strict=True))
            self._high = n
            self._vecs = np.zeros((cap, self.dim), dtype=np.float32)
            self._vecs[:n] = vecs
            self._has_vec = np.zeros(cap, dtype=bool)
            self._has_vec[:n] = has_vec
            self._doc_len = np.zeros(cap, dtype=np.float32)
            if postings is not None and _fits(postings, n, self.drop_stopwords):
                self._load_postings(postings, n)
                return
            plists = self._postings
            for slot, text in enumerate(texts):
                tokens = tokenize(text or "", drop_stopwords=self.drop_stopwords)
                if not tokens:
                    continue
                counts = Counter(tokens)
                self._doc_terms[slot] = counts
                for term, tf in counts.items():
                    plist = plists.get(term)
                    if plist is None:
                        plists[term] = {slot: tf}
                    else:
                        plist[slot] = tf
                self._doc_len[slot] = len(tokens)
                self._total_len += len(tokens)
                self._n_text_docs += 1
            self._version += 1

    def _load_postings(self, p: Postings, n: int) -> None:
        self._base = {t: (int(p.offsets[i]), int(p.offsets[i + 1])) for i, t in enumerate(p.terms)}
        self._base_slots = np.asarray(p.slots, dtype=np.int64)
        self._base_tfs = np.asarray(p.tfs, dtype=np.float32)
        doc_len = np.asarray(p.doc_len, dtype=np.float32)
        self._doc_len[:n] = doc_len
        self._lazy_docs = set(np.flatnonzero(doc_len > 0).tolist())
        self._n_text_docs = len(self._lazy_docs)
        self._total_len = int(doc_len.sum())
        self._version += 1

    def export_postings(self, ids: list[str]) -> Postings:
        """The BM25 postings with documents numbered by their position in ``ids`` (what `load` takes back)."""
        with self._lock:
            pos = np.full(max(1, self._high), -1, dtype=np.int64)
            doc_len = np.zeros(len(ids), dtype=np.float32)
            for i, d in enumerate(ids):
                slot = self._slot_of.get(d)
                if slot is not None:
                    pos[slot] = i
                    doc_len[i] = self._doc_len[slot]
            terms: list[str] = []
            offsets = [0]
            slots: list[np.ndarray] = []
            tfs: list[np.ndarray] = []
            for term in sorted({*self._base, *self._postings}):
                arr = self._postings_array(term)
                if arr is None:
                    continue
                new = pos[arr[0]]
                keep = new >= 0
                if keep.any():
                    terms.append(term)
                    slots.append(new[keep])
                    tfs.append(arr[1][keep])
                    offsets.append(offsets[-1] + int(keep.sum()))
            return Postings(
                analyser=analyser_id(self.drop_stopwords),
                terms=terms,
                offsets=np.asarray(offsets, dtype=np.int64),
                slots=np.concatenate(slots).astype(np.int32) if slots else np.zeros(0, np.int32),
                tfs=np.concatenate(tfs).astype(np.float32) if tfs else np.zeros(0, np.float32),
                doc_len=doc_len,
            )

    def upsert(self, doc_id: str, text: str, embedding: np.ndarray | Sequence[float] | None) -> None:
        """Insert or replace a document; `embedding=None` leaves it findable by BM25 only."""
        tokens = tokenize(text or "", drop_stopwords=self.drop_stopwords)
        unit = None if embedding is None else _as_unit_vector(embedding, self.dim)
        with self._lock:
            self._version += 1
            slot = self._slot_of.get(doc_id)
            if slot is None:
                slot = self._alloc_slot()
                self._slot_of[doc_id] = slot
                self._id_of[slot] = doc_id
            else:
                self._clear_slot_text(slot, self._texts.get(doc_id, ""))
            self._texts[doc_id] = text or ""
            if tokens:
                counts = Counter(tokens)
                self._doc_terms[slot] = counts
                for term, tf in counts.items():
                    plist = self._plist(term)
                    if plist is None:
                        self._postings[term] = {slot: tf}
                    else:
                        plist[slot] = tf
                    self._posting_arrays.pop(term, None)
                self._doc_len[slot] = len(tokens)
                self._total_len += len(tokens)
                self._n_text_docs += 1
            if unit is None:
                self._has_vec[slot] = False
                self._vecs[slot] = 0.0
            else:
                self._vecs[slot] = unit
                self._has_vec[slot] = True
            if self._coarse is not None and self._basis is not None:
                self._coarse[slot] = 0.0 if unit is None else unit @ self._basis

    def remove(self, doc_id: str) -> None:
        with self._lock:
            slot = self._slot_of.pop(doc_id, None)
            old_text = self._texts.pop(doc_id, "")
            if slot is None:
                return
            self._version += 1
            self._clear_slot_text(slot, old_text)
            self._has_vec[slot] = False
            self._vecs[slot] = 0.0
            if self._coarse is not None:
                self._coarse[slot] = 0.0
            self._id_of[slot] = None
            self._free.append(slot)

    # ------------------------------------------------------------------ inspection

    def __len__(self) -> int:
        with self._lock:
            return len(self._slot_of)

    def __contains__(self, doc_id: object) -> bool:
        with self._lock:
            return doc_id in self._slot_of

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._slot_of)

    def text(self, doc_id: str) -> str:
        """The text a document was indexed with (kept so the mirror can be snapshotted without a store read)."""
        with self._lock:
            return self._texts.get(doc_id, "")

    def unique_terms(self, doc_id: str, text: str) -> set[str]:
        """The terms of ``text`` (analysed like the index) that no indexed document other than ``doc_id`` holds:
        the words only this document had (what erasing it must also scrub from logged queries)."""
        with self._lock:
            own = self._slot_of.get(doc_id)
            return {
                t
                for t in tokenize(text, drop_stopwords=self.drop_stopwords)
                if not any(slot != own for slot in self._slots_of(t))
            }

    def _slots_of(self, term: str) -> list[int]:
        span = self._base.get(term)
        if span is not None:
            return cast(list[int], self._base_slots[span[0] : span[1]].tolist())
        return list(self._postings.get(term, {}))

    def embeddings(self, doc_ids: Sequence[str]) -> tuple[list[str], np.ndarray]:
        """The documents among ``doc_ids`` that have a vector (in that order) and their vectors, one row each: one
        copy of the matrix's rows (a snapshot of 100,000 took 0.65 s through `embedding` one by one)."""
        with self._lock:
            slots = [self._slot_of.get(d, -1) for d in doc_ids]
            keep = [i for i, slot in enumerate(slots) if slot >= 0 and self._has_vec[slot]]
            mat = self._vecs[np.asarray([slots[i] for i in keep], dtype=np.int64)]
            return [doc_ids[i] for i in keep], mat

    def texts(self, doc_ids: Sequence[str]) -> list[str]:
        """`text` of each document, under one hold of the lock."""
        with self._lock:
            return [self._texts.get(d, "") for d in doc_ids]

    def embedding(self, doc_id: str) -> np.ndarray | None:
        with self._lock:
            slot = self._slot_of.get(doc_id)
            if slot is None or not self._has_vec[slot]:
                return None
            vec: np.ndarray = self._vecs[slot].copy()
            return vec

    def cosine(self, a_id: str, b_vec: np.ndarray | Sequence[float]) -> float | None:
        """Cosine between a stored document and any vector; None if the document has no embedding."""
        unit = _as_unit_vector(b_vec, self.dim)
        if unit is None:
            return None
        with self._lock:
            slot = self._slot_of.get(a_id)
            if slot is None or not self._has_vec[slot]:
                return None
            return float(self._vecs[slot] @ unit)

    # ------------------------------------------------------------------ search

    def _postings_array(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        cached = self._posting_arrays.get(term)
        if cached is not None:
            return cached
        span = self._base.get(term)
        if span is not None:
            arrs = self._base_slots[span[0] : span[1]], self._base_tfs[span[0] : span[1]]
            self._posting_arrays[term] = arrs
            return arrs
        plist = self._postings.get(term)
        if not plist:
            return None
        slots = np.fromiter(plist.keys(), dtype=np.int64, count=len(plist))
        tfs = np.fromiter(plist.values(), dtype=np.float32, count=len(plist))
        self._posting_arrays[term] = (slots, tfs)
        return slots, tfs

    def _bm25_array(self, query: str) -> np.ndarray | None:
        """Scores over slots [0, _high); None when no query term is in the index. Caller holds the lock."""
        # Sorted: float32 sums depend on the order of the terms, and a set's order on PYTHONHASHSEED.
        terms = sorted(set(tokenize(query, drop_stopwords=self.drop_stopwords)))
        n = self._n_text_docs
        if not terms or n == 0:
            return None
        avgdl = self._total_len / n
        scores = np.zeros(self._high, dtype=np.float32)
        len_norm = self.k1 * (1.0 - self.b)
        len_coef = self.k1 * self.b / avgdl if avgdl > 0 else 0.0
        any_hit = False
        for term in terms:
            arr = self._postings_array(term)
            if arr is None:
                continue
            slots, tfs = arr
            df = len(slots)
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            scores[slots] += idf * tfs * (self.k1 + 1.0) / (tfs + len_norm + len_coef * self._doc_len[slots])
            any_hit = True
        return scores if any_hit else None

    def bm25_scores(self, query: str) -> dict[str, float]:
        """BM25 (Lucene idf) of every document with a positive score."""
        with self._lock:
            scores = self._bm25_array(query)
            if scores is None:
                return {}
            hit = np.flatnonzero(scores > 0.0)
            return {doc_id: float(scores[s]) for s in hit if (doc_id := self._id_of[s]) is not None}

    def bm25(self, query: str, k: int) -> list[tuple[str, float]]:
        """Top-k documents by BM25, best first; only documents with a positive score."""
        if k <= 0:
            return []
        with self._lock:
            scores = self._bm25_array(query)
            if scores is None:
                return []
            return _top(self._id_of, scores, k, positive_only=True)

    def vector(self, query_vec: np.ndarray | Sequence[float], k: int) -> list[tuple[str, float]]:
        """Top-k documents by cosine similarity to query_vec, best first."""
        if k <= 0:
            return []
        unit = _as_unit_vector(query_vec, self.dim)
        if unit is None:
            return []
        with self._lock:
            if self._high == 0:
                return []
            memo_key = unit.tobytes()
            memo = self._vec_memo
            if memo is not None and memo[0] == memo_key and memo[1] == self._version and k <= memo[2]:
                return memo[3][:k]
            # The longest list a recall asks for at once: spreading asks for 5 first, fusion for 200 after.
            want = max(k, self.MEMO_TOP)
            if self._high >= self.COARSE_MIN_DOCS:
                top = self._coarse_top(unit, want)
            else:
                scores = _scan_rows(self._vecs[: self._high], None, unit, split=self._high >= SPLIT_MIN_ROWS)
                scores[~self._has_vec[: self._high]] = -np.inf
                top = _top(self._id_of, scores, want, positive_only=False)
            self._vec_memo = (memo_key, self._version, want, top)
            return top[:k]

    def nearest_many(
        self,
        query_vecs: Sequence[np.ndarray | Sequence[float] | None],
        k: int,
        skip: Sequence[Collection[str]] = (),
    ) -> list[list[tuple[str, float]]]:
        """For each query vector, its top-k documents by cosine similarity, best first (equal scores by slot, as
        `vector` orders them), leaving out the ids in ``skip[i]``; [] for a query vector that is None or zero.
        One pass over the matrix for all of them: an import chunk's contradiction checks scanned the whole
        store once per memory, which was most of an import's own time from ~25,000 memories. Exact at every size
        (`vector` goes in two stages from COARSE_MIN_DOCS)."""
        out: list[list[tuple[str, float]]] = [[] for _ in query_vecs]
        units = [
            (i, u)
            for i, v in enumerate(query_vecs)
            if v is not None and (u := _as_unit_vector(v, self.dim)) is not None
        ]
        if k <= 0 or not units:
            return out
        with self._lock:
            high = self._high
            if high == 0:
                return out
            scores = np.stack([u for _, u in units]) @ self._vecs[:high].T  # (queries, slots), a row each
            scores[:, ~self._has_vec[:high]] = -np.inf
            for row, (i, _u) in enumerate(units):
                if i < len(skip) and skip[i]:
                    slots = [s for d in skip[i] if (s := self._slot_of.get(d)) is not None]
                    scores[row, slots] = -np.inf
                out[i] = _top(self._id_of, scores[row], k, positive_only=False)
        return out

    def _coarse_top(self, unit: np.ndarray, want: int) -> list[tuple[str, float]]:
        """The best ``want`` by cosine, in two stages: the projected matrix gives candidates, which are scored
        exactly. Caller holds the lock."""
        high = self._high
        if self._basis is None or high > 2 * self._basis_at:
            self._build_projection()
        elif (
            self._coarse is None
        ):  # a basis from the snapshot: the slots projected on it (at 100k 0.08 s, not 0.4)
            self._project()
        assert self._basis is not None and self._coarse is not None
        has = self._has_vec[:high]
        rough = _scan_rows(self._coarse[:high], None, unit @ self._basis, split=True)
        rough[~has] = -np.inf
        n = min(high, max(self.COARSE_CANDIDATES, self.COARSE_PER_ASKED * want, high // self.COARSE_SHARE))
        # In slot order: the rows are then read front to back (at 100k, 10,000 rows: 4.8 -> 4.2 ms on one core).
        cand = np.sort(np.argpartition(-rough, n - 1)[:n]) if n < high else np.arange(high)
        exact = _scan_rows(self._vecs, cand, unit, split=True)
        exact[~has[cand]] = -np.inf
        k = min(want, len(cand))
        best = np.argpartition(-exact, k - 1)[:k] if k < len(cand) else np.arange(len(cand))
        best = best[np.lexsort((cand[best], -exact[best]))]  # by score, then slot, as `_top` orders
        out: list[tuple[str, float]] = []
        for i in best:
            sc = float(exact[i])
            doc_id = self._id_of[cand[i]]
            if sc != -math.inf and doc_id is not None:
                out.append((doc_id, sc))
        return out

    def _build_projection(self) -> None:
        """The top principal directions of (a spread sample of) the stored vectors, and every slot projected on
        them. Deterministic: the same vectors give the same projection."""
        high = self._high
        slots = np.flatnonzero(self._has_vec[:high])
        sample = (
            slots[np.linspace(0, len(slots) - 1, min(len(slots), 4096)).astype(np.int64)]
            if len(slots)
            else slots
        )
        x = self._vecs[sample].astype(np.float64)
        x -= x.mean(axis=0) if len(x) else 0.0
        dims = min(self.COARSE_DIMS, self.dim)
        basis = np.zeros((self.dim, self.COARSE_DIMS), dtype=np.float32)
        if len(x) > 1:
            _, _, vt = np.linalg.svd(x, full_matrices=False)
            basis[:, : min(dims, len(vt))] = vt[:dims].T
        self._basis = basis
        self._basis_at = max(1, high)
        self._project()

    def _project(self) -> None:
        assert self._basis is not None
        coarse = np.zeros((len(self._id_of), self.COARSE_DIMS), dtype=np.float32)
        coarse[: self._high] = self._vecs[: self._high] @ self._basis
        self._coarse = coarse

    def projection(self) -> tuple[np.ndarray, int] | None:
        """The two-stage scan's basis and how many slots were in use when it was computed (None before the first
        query of a large index): the snapshot keeps it, so a start does not compute it again."""
        with self._lock:
            return None if self._basis is None else (self._basis.copy(), self._basis_at)


def _top(
    id_of: list[str | None], scores: np.ndarray, k: int, *, positive_only: bool
) -> list[tuple[str, float]]:
    """The best ``k`` slots by score as (id, score), by score then slot; free slots left out."""
    n = scores.shape[0]
    idx = np.argpartition(-scores, k - 1)[:k] if k < n else np.arange(n)
    # Sort by score, then slot, so equal scores come out in a stable order.
    idx = idx[np.lexsort((idx, -scores[idx]))]
    top = scores[idx]
    keep = top > 0.0 if positive_only else top != -math.inf
    if not keep.all():
        idx, top = idx[keep], top[keep]
    # As Python lists first: indexing a list by numpy integers and float() per score cost ~0.1 ms a list.
    return [
        (doc_id, sc)
        for s, sc in zip(idx.tolist(), top.tolist(), strict=True)
        if (doc_id := id_of[s]) is not None
    ]


def rrf(rankings: list[list[str]], k: int = 60, weights: list[float] | None = None) -> dict[str, float]:
    """Reciprocal rank fusion: sum over rankings of weight / (k + rank), rank counted from 1."""
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("weights must have one entry per ranking")
    fused: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        w = 1.0 if weights is None else weights[i]
        seen: set[str] = set()
        for rank, doc_id in enumerate(ranking, start=1):
            # A ranking that lists a document twice should not count it twice.
            if doc_id in seen:
                continue
            seen.add(doc_id)
            fused[doc_id] = fused.get(doc_id, 0.0) + w / (k + rank)
    return fused
