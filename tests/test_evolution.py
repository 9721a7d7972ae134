"""Self-tuning: thresholds, bounds, dry run, manual settings, append-only history, schedule."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engram_core.config import Settings
from engram_core.organise import consolidation, evolution
from engram_core.retrieval.embeddings import NoEmbedder
from engram_core.service import EngramService


def make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings: Settings | None = None
) -> tuple[EngramService, str]:
    monkeypatch.setenv("HOME", str(tmp_path))
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True, exist_ok=True)
    # Evolution reads logs and feedback only; no embedding model is needed here.
    svc = EngramService(
        home=tmp_path / "home", embedder=NoEmbedder(), settings=settings or Settings(), recover_sessions=False
    )
    return svc, str(proj)


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[EngramService, str]]:
    svc, p = make(tmp_path, monkeypatch)
    yield svc, p
    svc.close()


def add_logs(
    svc: EngramService, p: str, n: int, *, session_useful: float = 0.9, user_useful: float = 0.1
) -> None:
    """n judged recalls: session-scope results mostly useful, user-scope ones mostly not."""
    store = svc.project_store(p)
    assert store is not None
    rows = []
    for i in range(n):
        scope = "session" if i % 2 == 0 else "user"
        mtype = "procedural" if i % 2 == 0 else "episodic"
        rate = session_useful if scope == "session" else user_useful
        rows.append(
            {
                "query": f"q{i}",
                "strategy": "hybrid",
                "scopes": [scope],
                "types": [mtype],
                "memory_ids": [f"m{i}"],
                "results_count": 1,
                "was_useful": (i // 2) % 10 < rate * 10,
            }
        )
    store.q("INSERT INTO retrieval_log $rows", {"rows": rows})


def test_under_50_logs_no_proposal(env: tuple[EngramService, str]) -> None:
    svc, p = env
    add_logs(svc, p, 49)
    rep = evolution.evolve_memory_system(svc, dry_run=False, project=p)
    assert not rep.enough_data and rep.proposals == [] and rep.applied == []
    assert "50 needed" in rep.message
    assert evolution.evolution_history(svc) == []


def test_bounded_proposals_and_dry_run(env: tuple[EngramService, str]) -> None:
    svc, p = env
    add_logs(svc, p, 120)
    before_w, before_h = svc.scope_weights(), svc.half_lives()
    rep = evolution.evolve_memory_system(svc, dry_run=True, project=p)
    assert rep.enough_data and rep.proposals
    assert svc.scope_weights() == before_w and svc.half_lives() == before_h, "dry run changes nothing"
    assert evolution.evolution_history(svc) == []
    by_key = {x.key: x for x in rep.proposals}
    sw = by_key["scope_weights"]
    for s in sw.current:
        assert abs(sw.proposed[s] - sw.current[s]) <= 0.2 + 1e-9
    assert sw.proposed["session"] > sw.current["session"] and sw.proposed["user"] < sw.current["user"]
    hl = by_key["decay_half_lives"]
    for t in hl.current:
        assert 0.5 - 1e-9 <= hl.proposed[t] / hl.current[t] <= 2.0 + 1e-9
    assert hl.proposed["procedural"] > hl.current["procedural"]
    assert hl.proposed["episodic"] < hl.current["episodic"]
    assert {s.key for s in rep.scope_stats} == {"session", "user"}


def test_apply_is_bounded_per_cycle_and_history_is_append_only(env: tuple[EngramService, str]) -> None:
    svc, p = env
    add_logs(svc, p, 200, session_useful=1.0, user_useful=0.0)
    w0 = svc.scope_weights()
    rep = evolution.evolve_memory_system(svc, dry_run=False, project=p)
    assert "scope_weights" in rep.applied
    w1 = svc.scope_weights()
    assert w1 != w0 and all(abs(w1[s] - w0[s]) <= 0.2 + 1e-9 for s in w0)
    hist = evolution.evolution_history(svc)
    assert {h.key for h in hist} >= {"scope_weights", "decay_half_lives"}
    with pytest.raises(Exception, match="append-only"):
        svc.user.q("UPDATE evolution_history SET reason = 'rewritten'")
    with pytest.raises(Exception, match="append-only"):
        svc.user.q("DELETE evolution_history")
    again = evolution.evolve_memory_system(svc, dry_run=False, project=p)  # the same rows never count twice
    assert (
        again.applied == [] and again.log_entries == 0 and len(evolution.evolution_history(svc)) == len(hist)
    )


def test_manual_settings_win(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    manual = Settings(
        scope_weights={"session": 1.0, "project": 1.0, "user": 1.0}, half_lives_days={"episodic": 3.0}
    )
    svc, p = make(tmp_path, monkeypatch, manual)
    try:
        add_logs(svc, p, 120)
        rep = evolution.evolve_memory_system(svc, dry_run=False, project=p)
        sw = next(x for x in rep.proposals if x.key == "scope_weights")
        assert sw.overridden_by_manual and "scope_weights" not in rep.applied
        assert svc.scope_weights() == {"session": 1.0, "project": 1.0, "user": 1.0}
        assert svc.half_lives()["episodic"] == 3.0
    finally:
        svc.close()


def test_schedule_counts_ended_sessions_not_passes(env: tuple[EngramService, str]) -> None:
    svc, p = env
    levels = []
    for i in range(20):
        s = svc.start_session(project=p, claude_session_id=f"c{i}").session_key
        svc.end_session(s)
        levels.append(consolidation.reflect_and_consolidate(svc, project=p).levels)
        # More passes (Stop hooks, the agent, MCP) without another session ending: light only.
        extra = consolidation.reflect_and_consolidate(svc, project=p)
        assert extra.levels == ["light"] and extra.session_count == i + 1
    assert levels[0] == ["light"] and levels[3] == ["light"]
    assert levels[4] == ["light", "full"] and levels[9] == ["light", "full"]
    assert levels[19] == ["light", "full", "reflection"]
    assert sum("full" in x for x in levels) == 4 and sum("reflection" in x for x in levels) == 1
    dry = consolidation.reflect_and_consolidate(svc, project=p, dry_run=True)
    assert dry.session_count == 20 and dry.levels == ["light"]
    store = svc.project_store(p)
    assert store is not None
    assert len(store.q1("SELECT id FROM reflection_log")) == 40
    assert evolution.budget_for(["light"]) == 30 and evolution.budget_for(["light", "full"]) == 120
    assert evolution.budget_for(["light", "full", "reflection"]) == 300


def test_reflection_writes_meta_memories(env: tuple[EngramService, str]) -> None:
    svc, p = env
    from engram_core.models import MemoryIn

    svc.store_many(
        [
            MemoryIn(
                content=f"debugging session {i} on the importer", memory_type="episodic", tags=["importer"]
            )
            for i in range(12)
        ],
        project=p,
    )
    add_logs(svc, p, 60)
    rep = consolidation.reflect_and_consolidate(svc, project=p, level="reflection")
    assert any(i.startswith("consolidation_signal") for i in rep.insights)
    assert any(i.startswith("retrieval_pattern") for i in rep.insights)
    assert rep.evolution is not None and rep.evolution.enough_data
    store = svc.project_store(p)
    assert store is not None
    kinds = {r["insight_type"] for r in store.q1("SELECT insight_type FROM meta_memory")}
    assert {"consolidation_signal", "retrieval_pattern"} <= kinds
