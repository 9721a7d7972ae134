"""Decay, strength and importance: pure functions.

``memory_strength`` is also a COMPUTED field in ``schema/001_base.surql`` (so queries can ORDER BY it);
``tests/test_scoring.py`` holds the two equal. Change one, change both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime, timedelta

# Half-lives in days: working ~1 h, episodic 1 d, semantic 7 d, procedural 30 d.
DEFAULT_HALF_LIVES: dict[str, float] = {
    "working": 0.042,
    "episodic": 1.0,
    "semantic": 7.0,
    "procedural": 30.0,
}
ACCESS_EXTENSION = 0.2  # each access extends the effective half-life by 20 %

CONSOLIDATE_BELOW = 0.3
ARCHIVE_BELOW = 0.1
FORGET_BELOW = 0.01
THRESHOLDS = {"consolidate": CONSOLIDATE_BELOW, "archive": ARCHIVE_BELOW, "forget": FORGET_BELOW}

TYPE_BONUS = {"procedural": 0.1, "semantic": 0.05, "episodic": 0.0, "working": 0.0}
IMPORTANCE_WEIGHTS = {
    "recency": 0.25,
    "frequency": 0.20,
    "relevance": 0.20,
    "confidence": 0.15,
    "outcome_impact": 0.10,
    "user_feedback": 0.10,
}


# Importance moves with the composite's signals and is recomputed on access: an
# access adds what it adds to the composite (frequency ×0.20 up to 10 accesses, relevance +0.05 ×0.20), and
# each verdict moves it by FEEDBACK_STEP (helpful +, not helpful -), within [IMPORTANCE_FLOOR, 1]. Strength is
# importance × decay, so a lower importance ranks lower and reaches the archive threshold sooner.
IMPORTANCE_FLOOR = 0.05
FEEDBACK_STEP = 0.1
ACCESS_RELEVANCE_STEP = 0.05


def access_gain(access_count: int, relevance: float, n: int = 1) -> float:
    """What ``n`` more accesses add to the composite (and so to importance): frequency and relevance."""
    frequency = min(1.0, (access_count + n) / 10.0) - min(1.0, access_count / 10.0)
    relevance_up = min(1.0, relevance + ACCESS_RELEVANCE_STEP * n) - relevance
    return IMPORTANCE_WEIGHTS["frequency"] * frequency + IMPORTANCE_WEIGHTS["relevance"] * max(
        0.0, relevance_up
    )


def importance_after_verdict(importance: float, verdict: float) -> float:
    """One verdict (1.0 helpful, 0.5 partly, 0.0 not helpful) moves importance by up to ±FEEDBACK_STEP, kept within
    [IMPORTANCE_FLOOR, 1] (a memory already below the floor is not raised by a bad verdict)."""
    moved = importance + 2.0 * FEEDBACK_STEP * (verdict - 0.5)
    return min(1.0, max(min(importance, IMPORTANCE_FLOOR), moved))


def effective_half_life(half_life_days: float, access_count: int) -> float:
    return half_life_days * (1.0 + access_count * ACCESS_EXTENSION)


def days_between(earlier: datetime, later: datetime) -> float:
    return (later - earlier).total_seconds() / 86400.0


def memory_strength(
    importance: float,
    half_life_days: float,
    access_count: int,
    last_accessed_at: datetime,
    now: datetime,
) -> float:
    """importance × 0.5^(days since last access / effective half-life). Never negative time."""
    elapsed = max(0.0, days_between(last_accessed_at, now))
    return importance * math.pow(0.5, elapsed / effective_half_life(half_life_days, access_count))


def strength_curve(
    importance: float,
    half_life_days: float,
    access_count: int,
    last_accessed_at: datetime,
    start: datetime,
    end: datetime,
    points: int,
) -> list[tuple[datetime, float]]:
    """Strength sampled evenly from ``start`` to ``end`` (for plots; ``points`` ≈ the plot's width)."""
    points = max(2, points)
    step = (end - start) / (points - 1)
    return [
        (
            start + step * i,
            memory_strength(importance, half_life_days, access_count, last_accessed_at, start + step * i),
        )
        for i in range(points)
    ]


def crossing_time(
    importance: float,
    half_life_days: float,
    access_count: int,
    last_accessed_at: datetime,
    threshold: float,
) -> datetime | None:
    """When strength falls below ``threshold`` if nothing touches the memory; None if it never was above."""
    if importance <= threshold or threshold <= 0:
        return None
    days = effective_half_life(half_life_days, access_count) * math.log2(importance / threshold)
    return last_accessed_at + timedelta(days=days)


def composite_importance(
    *,
    days_since_update: float,
    access_count: int,
    relevance: float,
    confidence: float,
    outcome_impact: float,
    user_feedback: float,
    memory_type: str,
) -> float:
    """Importance: six weighted signals plus a type bonus, capped at 1."""
    signals = {
        "recency": math.exp(-0.1 * max(0.0, days_since_update)),
        "frequency": min(1.0, access_count / 10.0),
        "relevance": relevance,
        "confidence": confidence,
        "outcome_impact": outcome_impact,
        "user_feedback": user_feedback,
    }
    score = sum(IMPORTANCE_WEIGHTS[k] * v for k, v in signals.items())
    return min(1.0, score + TYPE_BONUS.get(memory_type, 0.0))


def estimate_tokens(text: str) -> int:
    """A cheap token estimate (≈4 characters a token) for injection budgets; no tokenizer on the hot path."""
    return max(1, math.ceil(len(text) / 4))


def cosine(a: Iterable[float], b: Iterable[float]) -> float:
    la, lb = list(a), list(b)
    dot = sum(x * y for x, y in zip(la, lb, strict=False))
    na = math.sqrt(sum(x * x for x in la))
    nb = math.sqrt(sum(y * y for y in lb))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)
