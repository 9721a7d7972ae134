"""The multi-week simulation (bench/lifecycle_sim.py), short: two weeks of sessions on a frozen clock."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from engram_core.clock import FrozenClock
from engram_core.service import EngramService

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import lifecycle_sim  # noqa: E402


def test_two_weeks_of_sessions(tmp_path: Path, embedder, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    clock = FrozenClock(datetime.now(UTC) - timedelta(days=20))
    with EngramService(tmp_path / "home", embedder=embedder, clock=clock, recover_sessions=False) as svc:
        out = lifecycle_sim.simulate(
            svc, clock, str(proj), weeks=2, sessions_per_day=1, imported=20, sweep_every_h=12
        )
    checks, stats, final = out["checks"], out["stats"], out["final"]
    assert out["sessions"] == 10
    assert checks["user_forgotten"] == 0 and checks["preference_statuses"] == ["active"]
    assert checks["imported_stored"] == 20 and "archived" not in out["import"]["next_sweep"]
    assert sum(checks["imported_by_status"].values()) == 20
    first_week = out["weekly"][0]["census"]["project"]
    assert sum(t.get("forgotten", 0) for t in first_week.values()) == 0  # history is not forgotten wholesale
    assert stats["level_light"] == 10 and stats["level_full"] == 2 and "level_reflection" not in stats
    assert stats["injected_preferences"] >= 10 * len(lifecycle_sim.PREFERENCES)
    assert "working" not in final["project"]  # scratch space never leaves its session
    assert final["project"]["episodic"].get("archived", 0) > 0  # episodes do fade
    assert stats.get("sessions_abandoned", 0) == 0
