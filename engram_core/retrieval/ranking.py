"""Engram's retrieval ranking: how a BM25 list and a vector list become one order.

Pure functions, no I/O: the core store calls `contextual_text` when it writes a memory (the text it indexes
and embeds) and `fuse` when it answers a recall. Every default here was chosen on LoCoMo with
`bench/locomo.py`; the figures behind each choice are in `bench/results/locomo.json`.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any, Literal

from engram_core.retrieval.search_index import STOPWORDS_EN, rrf

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


# A memory written within the period a query names ("on 9 November, 2022", "in August 2023", "in July") gets its
# fused score multiplied by this: questions about a time are about what was said then. The window runs a week
# past the period: a memory often tells of something a few days old ("last week"). 1.0 was the first half's pick
# and ties the best on the second (0.3 helps only the second half; docs/benchmarks.md).
DATE_BOOST = 1.0
DATE_SLACK_DAYS = 7
_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
    )
}
_MONTH = r"(january|february|march|april|may|june|july|august|september|october|november|december)"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH},?\s+(\d{{4}})\b", re.I)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.I)
_IN_MONTH = re.compile(rf"\b(?:in|during|of|early|late|mid)\s+{_MONTH}\b(?!\s*,?\s*\d)", re.I)


def _month_end(year: int, month: int) -> date:
    return (date(year + (month == 12), month % 12 + 1, 1)) - timedelta(days=1)


def query_periods(query: str) -> tuple[tuple[date | None, int, date | None], ...]:
    """The periods a query names: (first day, month, last day); a month without a year ("in July") is
    (None, month, None), any year's."""
    out: list[tuple[date | None, int, date | None]] = []
    taken: list[tuple[int, int]] = []
    for rx, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy")):
        for m in rx.finditer(query):
            g = m.groups()
            day, mon, year = (g[0], g[1], g[2]) if order == "dmy" else (g[1], g[0], g[2])
            try:
                d = date(int(year), _MONTHS[mon.lower()], int(day))
            except ValueError:
                continue
            out.append((d, d.month, d))
            taken.append(m.span())
    for m in _MONTH_YEAR.finditer(query):
        if any(a <= m.start() < b for a, b in taken):
            continue
        mon, year = _MONTHS[m.group(1).lower()], int(m.group(2))
        out.append((date(year, mon, 1), mon, _month_end(year, mon)))
    for m in _IN_MONTH.finditer(query):
        out.append((None, _MONTHS[m.group(1).lower()], None))
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True)
class QueryCues:
    """What in a query is checked against a candidate after fusion: the names it uses (lower case) and the
    periods it names (query_periods)."""

    names: frozenset[str]
    speaker_boost: float = SPEAKER_BOOST
    periods: tuple[tuple[date | None, int, date | None], ...] = field(default=())
    date_boost: float = DATE_BOOST
    # The periods as day-number spans (the slack after each included) and the bare months, for cue_factor.
    spans: tuple[tuple[int, int], ...] = field(init=False, default=())
    months: frozenset[int] = field(init=False, default=frozenset())

    def __post_init__(self) -> None:
        spans = tuple(
            (first.toordinal(), last.toordinal() + DATE_SLACK_DAYS)
            for first, _, last in self.periods
            if first is not None and last is not None
        )
        object.__setattr__(self, "spans", spans)
        object.__setattr__(self, "months", frozenset(m for first, m, _ in self.periods if first is None))

    @property
    def active(self) -> bool:
        return bool(self.names or self.periods)

    @property
    def most(self) -> float:
        """The largest factor `cue_factor` can give for this query."""
        return (1.0 + self.speaker_boost if self.names else 1.0) * (
            1.0 + self.date_boost if self.periods else 1.0
        )


def query_cues(
    query: str, *, speaker_boost: float | None = None, date_boost: float | None = None
) -> QueryCues:
    # "Caroline's" names Caroline.
    names = frozenset(
        w
        for m in _NAME.findall(query)
        if (w := m.lower().removesuffix("'s")) not in STOPWORDS_EN and w.isalpha()
    )
    return QueryCues(
        names,
        SPEAKER_BOOST if speaker_boost is None else speaker_boost,
        query_periods(query),
        DATE_BOOST if date_boost is None else date_boost,
    )


def cue_factor(cues: QueryCues, content: str, written: datetime | date | None = None) -> float:
    """The factor a candidate's fused score is multiplied by: ≥ 1, and 1 when the query has no cues. `written`
    is when the memory was written (its created_at). Called for every candidate of a cued query: a few string
    and integer tests, no regex unless the text starts like "Name: "."""
    factor = 1.0
    if cues.names and cues.speaker_boost:
        colon = content.find(": ", 1, 48)
        if colon > 0 and content[0].isupper():
            m = _SPEAKER.match(content, 0, colon + 2)
            if m and any(part.lower() in cues.names for part in m.group(1).split()):
                factor *= 1.0 + cues.speaker_boost
    if cues.periods and cues.date_boost and written is not None:
        day = written.toordinal()
        if any(lo <= day <= hi for lo, hi in cues.spans) or (
            cues.months
            and (
                written.month in cues.months
                or (written.day <= DATE_SLACK_DAYS and (written.month - 2) % 12 + 1 in cues.months)
            )
        ):
            factor *= 1.0 + cues.date_boost
    return factor


_KEY, _SCORE = operator.itemgetter(0), operator.itemgetter(1)


def best_first(items: list[Any]) -> list[Any]:
    """Sort (key, score, …) items in place, highest score first, ties by key; returns them. Two sorts on C-level
    keys, the second stable: the same order as a (-score, key) tuple built in Python per item, at a fraction of
    the cost over the hundreds of candidates a recall ranks."""
    items.sort(key=_KEY)
    items.sort(key=_SCORE, reverse=True)
    return items
