"""Engram's retrieval ranking: how a BM25 list and a vector list become one order.

Pure functions, no I/O: the core store calls `contextual_text` when it writes a memory (the text it indexes
and embeds) and `fuse` when it answers a recall. Every default here was chosen on LoCoMo with
`bench/locomo.py`; the figures behind each choice are in `bench/results/locomo.json`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engram_core.search_index import STOPWORDS_EN, rrf

__all__ = [
    "FusionConfig",
    "QueryCues",
    "cue_factor",
    "query_cues",
    "DEFAULT_FUSION",
    "best_first",
    "contextual_text",
    "fuse",
    "fused_scores",
    "minmax",
]

FusionMethod = Literal["rrf", "score"]


@dataclass(frozen=True)
class FusionConfig:
    """How to fuse; the defaults are the configuration the LoCoMo bench chose."""

    method: FusionMethod = "rrf"
    # Small k: with k=60 a document ranked ~40th in both lists beats the top hit of one list (2/100 > 1/61),
    # which made fusion worse than either list once the pool grew; k=5..20 is flat on LoCoMo.
    k_rrf: int = 10
    # BM25 a little ahead: on LoCoMo exact names and rare nouns beat paraphrase more often than not.
    w_bm25: float = 1.3
    w_vec: float = 1.0
    # Score fusion: final = (1 - alpha) * minmax(bm25) + alpha * minmax(cosine).
    alpha: float = 0.5
    # How many candidates to take from each retriever before fusing.
    pool: int = 100
    # Contextual ingest: how many previous memories of the same episode go into a memory's indexed text.
    context_prev: int = 2
    context_max_chars: int = 400


DEFAULT_FUSION = FusionConfig()


def contextual_text(
    memory: str,
    previous_memories_in_same_episode: Sequence[str],
    *,
    max_prev: int = DEFAULT_FUSION.context_prev,
    max_chars: int = DEFAULT_FUSION.context_max_chars,
    when: str | None = None,
) -> str:
    """The text to index and embed for a memory, given the memories before it in its episode (oldest first).

    A memory on its own is often an answer whose question sits in the memory before it ("Yes, twice last
    month"); indexing it with its predecessor lets a query about the topic find the answer. The memory's own
    text comes first so it dominates the embedding; context is clipped so a long predecessor cannot drown it.
    """
    parts = [memory]
    if max_prev > 0 and previous_memories_in_same_episode:
        context = [p for p in previous_memories_in_same_episode[-max_prev:] if p]
        if context:
            ctx = " ".join(context)
            if len(ctx) > max_chars:
                ctx = ctx[-max_chars:]
            parts.append(f"(context: {ctx})")
    if when:
        parts.append(f"[{when}]")
    return " ".join(parts)


def minmax(scores: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; a constant list maps to all ones (every candidate equally good)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi - lo <= 1e-12:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def fused_scores(
    bm25: Sequence[tuple[str, float]],
    vec: Sequence[tuple[str, float]],
    *,
    method: FusionMethod = DEFAULT_FUSION.method,
    k_rrf: int = DEFAULT_FUSION.k_rrf,
    w_bm25: float = DEFAULT_FUSION.w_bm25,
    w_vec: float = DEFAULT_FUSION.w_vec,
    alpha: float = DEFAULT_FUSION.alpha,
) -> dict[str, float]:
    """A BM25 list and a cosine list (each best first) fused: each document's score, in no order (`fuse` orders
    them; recall adds its other lists first)."""
    if method == "rrf":
        return rrf([[d for d, _ in bm25], [d for d, _ in vec]], k=k_rrf, weights=[w_bm25, w_vec])
    if method == "score":
        fused: dict[str, float] = {}
        # A document missing from one list gets that list's floor (0 after min-max), not a penalty below it.
        for (doc_id, _), s in zip(bm25, minmax([s for _, s in bm25]), strict=True):
            fused[doc_id] = fused.get(doc_id, 0.0) + (1.0 - alpha) * s
        for (doc_id, _), s in zip(vec, minmax([s for _, s in vec]), strict=True):
            fused[doc_id] = fused.get(doc_id, 0.0) + alpha * s
        return fused
    raise ValueError(f"unknown fusion method {method!r}")


def fuse(
    bm25: Sequence[tuple[str, float]],
    vec: Sequence[tuple[str, float]],
    *,
    method: FusionMethod = DEFAULT_FUSION.method,
    k_rrf: int = DEFAULT_FUSION.k_rrf,
    w_bm25: float = DEFAULT_FUSION.w_bm25,
    w_vec: float = DEFAULT_FUSION.w_vec,
    alpha: float = DEFAULT_FUSION.alpha,
    boosts: Mapping[str, float] | None = None,
    limit: int | None = None,
) -> list[tuple[str, float]]:
    """Fuse a BM25 list and a cosine list (each best first) into one list, best first.

    `boosts` multiplies a document's fused score (e.g. memory_strength-derived, scope weight); documents not
    in it keep a factor of 1. Ties break on the id so the order is deterministic.
    """
    fused = fused_scores(bm25, vec, method=method, k_rrf=k_rrf, w_bm25=w_bm25, w_vec=w_vec, alpha=alpha)
    if boosts:
        fused = {d: s * boosts.get(d, 1.0) for d, s in fused.items()}
    ranked = best_first(list(fused.items()))
    return ranked if limit is None else ranked[:limit]


# A memory attributed to someone ("Name: text", as imported chat turns are) whom the query names: their own
# statement is the likeliest evidence for a question about them. Chosen by the two-fold LoCoMo cross-validation
# (bench/locomo.py --cv; it helps each half, docs/benchmarks.md). A quoted-phrase boost moved neither half: left out.
SPEAKER_BOOST = 0.25
_SPEAKER = re.compile(r"([A-Z][\w'.-]*(?: [A-Z][\w'.-]*)?):\s")
_NAME = re.compile(r"\b[A-Z][a-z][\w'-]*")


@dataclass(frozen=True)
class QueryCues:
    """What in a query is checked against a candidate's own text after fusion: the names it uses (lower case)."""

    names: frozenset[str]
    speaker_boost: float = SPEAKER_BOOST

    @property
    def most(self) -> float:
        """The largest factor `cue_factor` can give for this query."""
        return 1.0 + self.speaker_boost if self.names else 1.0


def query_cues(query: str, *, speaker_boost: float | None = None) -> QueryCues:
    names = frozenset(w for m in _NAME.findall(query) if (w := m.lower()) not in STOPWORDS_EN and w.isalpha())
    return QueryCues(names, SPEAKER_BOOST if speaker_boost is None else speaker_boost)


def cue_factor(cues: QueryCues, content: str) -> float:
    """The factor a candidate's fused score is multiplied by: ≥ 1, and 1 when the query names nobody."""
    if cues.names and cues.speaker_boost:
        m = _SPEAKER.match(content)
        if m and any(part.lower() in cues.names for part in m.group(1).split()):
            return 1.0 + cues.speaker_boost
    return 1.0


_KEY, _SCORE = operator.itemgetter(0), operator.itemgetter(1)


def best_first(items: list[Any]) -> list[Any]:
    """Sort (key, score, …) items in place, highest score first, ties by key; returns them. Two sorts on C-level
    keys, the second stable: the same order as a (-score, key) tuple built in Python per item, at a fraction of
    the cost over the hundreds of candidates a recall ranks."""
    items.sort(key=_KEY)
    items.sort(key=_SCORE, reverse=True)
    return items
