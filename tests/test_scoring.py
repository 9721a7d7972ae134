"""The decay formula lives twice: scoring.py (plots, UI) and the COMPUTED field (ORDER BY). They must agree."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

import pytest

from engram_core.memory.scoring import (
    DEFAULT_HALF_LIVES,
    composite_importance,
    crossing_time,
    effective_half_life,
    memory_strength,
    strength_curve,
)
from engram_core.models import Scope
from engram_core.storage import Connection, ScopeStore, record


@pytest.fixture
def store() -> ScopeStore:
    return ScopeStore(Connection.memory(), Scope.project, "p_test")


def test_python_and_surrealql_strength_agree_at_many_points(store: ScopeStore) -> None:
    rng = random.Random(7)
    now = datetime.now(UTC)
    cases = []
    for i in range(120):
        mtype = rng.choice(list(DEFAULT_HALF_LIVES))
        case = {
            "importance": round(rng.uniform(0.0, 1.0), 3),
            "half_life_days": DEFAULT_HALF_LIVES[mtype],
            "access_count": rng.randint(0, 30),
            "last_accessed_at": now - timedelta(hours=rng.uniform(0, 24 * 90)),
        }
        store.q(
            "CREATE $id CONTENT $f",
            {
                "id": record(f"m{i}"),
                "f": {
                    **case,
                    "content": f"memory {i}",
                    "content_hash": str(i),
                    "memory_type": mtype,
                    "scope": "project",
                },
            },
        )
        cases.append(case)
    rows = store.q1("SELECT id, memory_strength, time::now() AS now FROM memory")
    by_id = {str(r["id"].id): r for r in rows}
    for i, case in enumerate(cases):
        row = by_id[f"m{i}"]
        expected = memory_strength(
            case["importance"],
            case["half_life_days"],
            case["access_count"],
            case["last_accessed_at"],
            row["now"],
        )
        # duration::secs counts whole seconds: on a scale of hours to months that is < 1e-4 relative.
        assert row["memory_strength"] == pytest.approx(expected, rel=1e-4, abs=1e-9), case


def test_strength_is_importance_at_access_and_halves_per_effective_half_life() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    assert memory_strength(0.8, 7.0, 0, t0, t0) == pytest.approx(0.8)
    assert memory_strength(0.8, 7.0, 0, t0, t0 + timedelta(days=7)) == pytest.approx(0.4)
    # Ten accesses: effective half-life 7 × (1 + 10 × 0.2) = 21 days.
    assert effective_half_life(7.0, 10) == pytest.approx(21.0)
    assert memory_strength(0.8, 7.0, 10, t0, t0 + timedelta(days=21)) == pytest.approx(0.4)
    # The seed's table rounds loosely (its README says so); the formula is normative.
    assert memory_strength(0.8, 7.0, 5, t0, t0 + timedelta(days=7)) == pytest.approx(0.8 * 0.5 ** (7 / 14))
    assert memory_strength(0.8, 7.0, 10, t0, t0 + timedelta(days=14)) == pytest.approx(0.8 * 0.5 ** (14 / 21))


def test_crossing_time_is_where_the_curve_meets_the_threshold() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    when = crossing_time(0.9, 1.0, 3, t0, 0.1)
    assert when is not None
    assert memory_strength(0.9, 1.0, 3, t0, when) == pytest.approx(0.1, rel=1e-9)
    assert crossing_time(0.05, 1.0, 0, t0, 0.1) is None  # never above it
    curve = strength_curve(0.9, 1.0, 0, t0, t0, t0 + timedelta(days=10), 50)
    assert len(curve) == 50 and curve[0][1] == pytest.approx(0.9)
    assert all(a[1] > b[1] for a, b in zip(curve, curve[1:], strict=False))


def test_composite_importance_weights_and_type_bonus() -> None:
    base = dict(
        days_since_update=0.0,
        access_count=10,
        relevance=1.0,
        confidence=1.0,
        outcome_impact=1.0,
        user_feedback=1.0,
    )
    assert composite_importance(**base, memory_type="episodic") == pytest.approx(1.0)
    zero = dict(
        days_since_update=1e6,
        access_count=0,
        relevance=0.0,
        confidence=0.0,
        outcome_impact=0.0,
        user_feedback=0.0,
    )
    assert composite_importance(**zero, memory_type="episodic") == pytest.approx(0.0, abs=1e-9)
    assert composite_importance(**zero, memory_type="procedural") == pytest.approx(0.1)
    assert composite_importance(**zero, memory_type="semantic") == pytest.approx(0.05)
    mid = composite_importance(
        days_since_update=10,
        access_count=5,
        relevance=0.5,
        confidence=0.7,
        outcome_impact=0.0,
        user_feedback=0.0,
        memory_type="episodic",
    )
    assert mid == pytest.approx(0.25 * math.exp(-1) + 0.2 * 0.5 + 0.2 * 0.5 + 0.15 * 0.7)
