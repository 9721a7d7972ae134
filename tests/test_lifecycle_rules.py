"""Each lifecycle rule at its edge (just under and just over its threshold), through the service, on a frozen clock.

The service's clock decides every sweep (lifecycle.plan_transitions); the stores are real embedded SurrealDB.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engram_core.clock import FrozenClock
from engram_core.config import Settings
from engram_core.memory import lifecycle
from engram_core.models import MemoryIn, MemoryPatch, Status
from engram_core.organise import evolution
from engram_core.service import EngramError, EngramService
from engram_core.storage import record

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def svc(
    tmp_path: Path, embedder, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[EngramService]:  # noqa: ANN001
    monkeypatch.setenv("HOME", str(tmp_path))
    s = EngramService(tmp_path / "home", embedder=embedder, clock=clock, recover_sessions=False)
    yield s
    s.close()


@pytest.fixture
def proj(tmp_path: Path) -> str:
    root = tmp_path / "proj"
    (root / ".git").mkdir(parents=True)
    return str(root)


def at(clock: FrozenClock, days: float) -> None:
    clock.at = T0 + timedelta(days=days)


def status(svc: EngramService, mid: str, proj: str | None = None) -> str:
    return svc.get(mid, project=proj).status.value


def crossing(importance: float, half_life: float, threshold: float) -> float:
    """Days until an unused memory's strength falls below threshold."""
    return half_life * math.log2(importance / threshold)


# ── user scope: 30-day half-life, archive only, never forgotten by a sweep ──
def test_user_memory_has_a_30_day_half_life_and_is_never_forgotten(
    svc: EngramService, clock: FrozenClock, proj: str
) -> None:
    pref = svc.store(
        MemoryIn(content="Prefers tabs over spaces in Go code", scope="user", importance=0.5), project=proj
    ).memory
    assert (
        pref.half_life_days == 30.0
    )  # semantic is 7 d in a project; the user scope never decays faster than 30 d
    at(clock, 45)  # the case: a 45-day-old user preference went to [forgotten] in one sweep
    svc.maintain(project=proj)
    assert status(svc, pref.id) == "active"
    edge = crossing(0.5, 30.0, 0.02)  # 139.3 d: strength reaches the user archive threshold
    at(clock, edge - 0.5)
    svc.maintain(project=proj)
    assert status(svc, pref.id) == "active"
    at(clock, edge + 0.5)
    svc.maintain(project=proj)
    assert status(svc, pref.id) == "archived"
    for days in (edge + 30, edge + 400, edge + 4000):  # far below 0.01, long past any grace: still archived
        at(clock, days)
        report = svc.maintain(project=proj)
        assert report.transitions.get("forgotten", 0) == 0
    kept = svc.get(pref.id)
    assert kept.status == Status.archived and kept.content == "Prefers tabs over spaces in Go code"


def test_user_archive_needs_90_days_of_age(svc: EngramService, clock: FrozenClock, proj: str) -> None:
    m = svc.store(
        MemoryIn(content="Uses fish as the login shell", scope="user", importance=0.1), project=proj
    ).memory
    assert crossing(0.1, 30.0, 0.02) < 89  # weak enough well before 90 days
    at(clock, 89.9)
    svc.maintain()
    assert status(svc, m.id) == "active"
    at(clock, 90.1)
    svc.maintain()
    assert status(svc, m.id) == "archived"


# ── project scope ──
def test_project_archive_forget_and_grace_edges(svc: EngramService, clock: FrozenClock, proj: str) -> None:
    m = svc.store(
        MemoryIn(content="Ran the importer against the staging dump", memory_type="episodic", importance=0.6),
        project=proj,
    ).memory
    archive_at = crossing(0.6, 1.0, 0.1)  # 2.585 d
    at(clock, archive_at - 0.02)
    svc.maintain(project=proj)
    assert status(svc, m.id, proj) == "active"
    at(clock, archive_at + 0.02)
    svc.maintain(project=proj)
    assert status(svc, m.id, proj) == "archived"
    archived_on = archive_at + 0.02
    assert (
        crossing(0.6, 1.0, 0.01) < archived_on + lifecycle.FORGET_GRACE_DAYS - 1
    )  # below 0.01 within the grace
    at(clock, archived_on + lifecycle.FORGET_GRACE_DAYS - 0.01)
    report = svc.maintain(project=proj)
    assert status(svc, m.id, proj) == "archived" and report.awaiting_forget == 1
    at(clock, archived_on + lifecycle.FORGET_GRACE_DAYS + 0.01)
    svc.maintain(project=proj)
    gone = svc.get(m.id, project=proj)
    assert gone.status == Status.forgotten and gone.content == "[forgotten]"


def test_one_step_per_sweep(svc: EngramService, clock: FrozenClock, proj: str) -> None:
    m = svc.store(
        MemoryIn(content="A note nobody will read again", memory_type="episodic", importance=0.5),
        project=proj,
    ).memory
    at(clock, 60)  # far below every threshold at once
    svc.maintain(project=proj)
    assert status(svc, m.id, proj) == "archived"  # not straight to forgotten
    assert [h.to_status for h in svc.get(m.id, project=proj).status_history] == ["created", "archived"]


def test_consolidated_memories_are_archived_once_decayed(
    svc: EngramService, clock: FrozenClock, proj: str
) -> None:
    m = svc.store(MemoryIn(content="The cache key includes the locale", importance=0.8), project=proj).memory
    svc.set_status(m.id, Status.consolidated, reason="merged into a summary", project=proj)
    edge = crossing(0.8, 7.0, 0.1)  # 21 d
    at(clock, edge - 0.1)
    svc.maintain(project=proj)
    assert status(svc, m.id, proj) == "consolidated"
    at(clock, edge + 0.1)
    svc.maintain(project=proj)
    after = svc.get(m.id, project=proj)
    assert (
        after.status == Status.archived
        and after.status_history[-1].reason == "consolidated into a summary and decayed"
    )


def test_decay_auto_queue_edges(svc: EngramService, clock: FrozenClock, proj: str) -> None:
    """The decay auto-queue: age > 30 d, last access > 14 d, importance < 0.3 → consolidation queue ('decay')."""
    low = svc.store(
        MemoryIn(
            content="Deploy with make ship from the infra folder", memory_type="procedural", importance=0.29
        ),
        project=proj,
    ).memory
    at_bar = svc.store(
        MemoryIn(
            content="Run the linters with make lint before pushing", memory_type="procedural", importance=0.3
        ),
        project=proj,
    ).memory
    at(clock, 29.9)
    assert svc.maintain(project=proj).queued_for_consolidation == 0  # 29.9 days: too young
    at(clock, 30.1)
    assert svc.maintain(project=proj).queued_for_consolidation == 1
    store = svc.project_store(proj)
    assert store is not None
    queued = store.q1("SELECT VALUE memory_id FROM consolidation_queue WHERE reason = 'decay'")
    assert queued == [record(low.id)]  # importance 0.3 is not below 0.3
    assert status(svc, at_bar.id, proj) == "active"
    assert svc.maintain(project=proj).queued_for_consolidation == 0  # queued once


def test_decay_auto_queue_waits_for_14_idle_days(svc: EngramService, clock: FrozenClock, proj: str) -> None:
    m = svc.store(
        MemoryIn(
            content="Bump the schema version when a migration is added",
            memory_type="procedural",
            importance=0.25,
        ),
        project=proj,
    ).memory
    at(clock, 16.2)
    assert svc.recall("schema version migration", project=proj).hits[0].memory.id == m.id
    svc.flush()
    at(clock, 30.1)  # 30.1 days old, idle 13.9 days
    assert svc.maintain(project=proj).queued_for_consolidation == 0
    at(clock, 30.3)  # idle 14.1 days
    assert svc.maintain(project=proj).queued_for_consolidation == 1


# ── injection: a weaker use ──
def test_injection_is_a_weaker_use_than_a_recall(svc: EngramService, clock: FrozenClock, proj: str) -> None:
    texts = {
        "injected": "Commit messages follow the conventional commits style",
        "recalled": "The API client retries idempotent requests three times",
        "untouched": "The docs site is built with mkdocs material",
    }
    ids = {
        k: svc.store(MemoryIn(content=v, importance=0.6), project=proj).memory.id for k, v in texts.items()
    }
    for day in range(1, 15):
        at(clock, day)
        assert svc.note_injected([f"project:{ids['injected']}"], project=proj) == 1
        svc.recall("API client retries idempotent requests", project=proj, limit=1)
        svc.flush()
    m = {k: svc.get(v, project=proj) for k, v in ids.items()}
    assert m["injected"].access_count == 0 and m["injected"].metadata["injections"] == 14
    assert m["recalled"].access_count == 14
    assert m["recalled"].memory_strength > m["injected"].memory_strength > m["untouched"].memory_strength
    # Daily injection keeps the last use about a day behind (halfway each time), never at "now".
    assert timedelta(hours=20) < clock.at - m["injected"].last_accessed_at < timedelta(days=1, hours=1)
    assert m["untouched"].memory_strength < 0.6 * 0.5**1.9


def test_session_start_through_the_daemon_counts_an_injection(light_daemon, tmp_path: Path) -> None:  # noqa: ANN001
    from support import new_project

    p = new_project(tmp_path, "injectproj")
    c = light_daemon.start().client()
    try:
        mid = c.call(
            "store",
            memory={"content": "Always run the type checker before a release", "scope": "user"},
            project=str(p),
        )["memory"]["id"]
        out = c.call("hook_session_start", session_id="claude-inject-1", cwd=str(p))
        assert mid in out["text"]
        got = c.call("get", memory_id=mid)  # any query on the store applies its queued bookkeeping first
    finally:
        c.close()
    assert got["metadata"].get("injections") == 1 and got["access_count"] == 0


# ── import ──
def _lines(n: int, days_old: float, now: datetime) -> list[str]:
    when = (now - timedelta(days=days_old)).isoformat()
    return [
        json.dumps(
            {
                "content": f"imported note {i} ({days_old} days old) about subsystem {i % 7}",
                "memory_type": "episodic",
                "importance": 0.5,
                "created_at": when,
            }
        )
        for i in range(n)
    ]


def test_import_keeps_dates_and_decays_from_the_import(
    svc: EngramService, clock: FrozenClock, proj: str
) -> None:
    lines = _lines(20, 200, clock.now())
    dry = svc.import_lines(lines, project=proj, dry_run=True)
    assert dry.dry_run and dry.stored == 0 and dry.next_sweep.get("archived", 0) == 0
    assert svc.stats(project=proj).scopes[0].total == 0  # a dry run stores nothing
    report = svc.import_lines(lines, project=proj)
    assert report.stored == 20 and report.next_sweep.get("archived", 0) == 0
    m = svc.list_memories(project=proj, limit=1).items[0]
    assert m.created_at == clock.now() - timedelta(days=200) and m.last_accessed_at == clock.now()
    at(clock, 1 / 24 + 0.001)
    swept = svc.maintain(project=proj)
    assert swept.transitions == {"active": 20}


def test_import_age_option_previews_what_the_sweep_does(
    svc: EngramService, clock: FrozenClock, proj: str
) -> None:
    lines = _lines(12, 200, clock.now()) + _lines(3, 0.5, clock.now())
    preview = svc.import_lines(lines, project=proj, dates="age", dry_run=True)
    assert preview.next_sweep == {"archived": 12, "below_forget_threshold": 12, "active": 3}
    report = svc.import_lines(lines, project=proj, dates="age")
    assert report.stored == 15 and report.next_sweep == preview.next_sweep
    swept = svc.maintain(project=proj)
    assert swept.transitions == {"archived": 12, "active": 3} and swept.awaiting_forget == 12  # not forgotten


# ── caps ──
def test_cap_archives_the_weakest_never_pinned_or_new(
    tmp_path: Path,
    embedder,
    clock: FrozenClock,
    proj: str,  # noqa: ANN001
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    s = EngramService(
        tmp_path / "home2",
        embedder=embedder,
        clock=clock,
        recover_sessions=False,
        settings=Settings(max_memories_project=4),
    )
    try:
        ids = [
            s.store(
                MemoryIn(content=f"fact number {i} about the build", importance=0.3 + 0.1 * i), project=proj
            ).memory.id
            for i in range(5)
        ]
        s.update(ids[0], MemoryPatch(pinned=True), project=proj)  # the weakest, but pinned
        at(clock, 2)
        new = s.store(MemoryIn(content="a brand new, unread fact", importance=0.2), project=proj).memory.id
        report = s.maintain(project=proj)
        assert report.capped == 2  # 6 live, cap 4
        states = {i: s.get(i, project=proj).status.value for i in [*ids, new]}
        assert states[ids[0]] != "archived" and states[new] != "archived"  # pinned; new and never accessed
        assert states[ids[1]] == "archived" and states[ids[2]] == "archived"  # the two weakest others
        assert states[ids[3]] != "archived" and states[ids[4]] != "archived"
        assert s.maintain(project=proj).capped == 0  # at the cap now (4 live)
    finally:
        s.close()


# ── feedback ──
def test_feedback_finds_a_user_scope_recall(svc: EngramService, tmp_path: Path) -> None:
    svc.store(MemoryIn(content="Prefers pytest over unittest", scope="user"))
    elsewhere = tmp_path / "not-a-project"
    elsewhere.mkdir()
    res = svc.recall("pytest or unittest", scope="user")
    assert res.log_id
    out = svc.mark_retrieval_useful("pytest or unittest", True)
    assert out.updated and "user scope" in out.message
    by_id = svc.mark_retrieval_useful("", False, log_id=res.log_id)
    assert by_id.updated and by_id.log_id == res.log_id
    assert not svc.mark_retrieval_useful("never asked", True).updated


def test_user_feedback_can_be_set(svc: EngramService, proj: str) -> None:
    m = svc.store(MemoryIn(content="The release checklist lives in RELEASE.md"), project=proj).memory
    after = svc.update(m.id, MemoryPatch(user_feedback=1.0), project=proj)
    assert after.user_feedback == 1.0 and after.quality > m.quality
    with pytest.raises(ValueError):
        MemoryPatch(user_feedback=1.5)


# ── cross-scope dedup ──
def test_dedup_keeps_the_higher_scope_unless_twice_as_strong(svc: EngramService, proj: str) -> None:
    sess = svc.start_session(project=proj, claude_session_id="c-dedup").session_key
    # 0.8: below 0.85, where a session memory would go to the project at once
    text = "The payments service owns the refunds table"
    svc.store(MemoryIn(content=text, scope="session", importance=0.8, tags=["payments"]), session=sess)
    svc.store(MemoryIn(content=text, scope="project", importance=0.5, tags=["db"]), project=proj)
    hit = [
        h
        for h in svc.recall("payments refunds table", project=proj, session=sess).hits
        if h.memory.content == text
    ]
    assert len(hit) == 1 and hit[0].memory.scope.value == "project"  # 0.8 < 2 × 0.5: the higher scope stays
    assert set(hit[0].memory.tags) == {"payments", "db"} and hit[0].also_in[0].startswith("session:")
    text2 = "The billing cron runs at 02:00 UTC"
    svc.store(MemoryIn(content=text2, scope="session", importance=0.8), session=sess)
    svc.store(MemoryIn(content=text2, scope="project", importance=0.4), project=proj)
    hit2 = [
        h
        for h in svc.recall("billing cron time", project=proj, session=sess).hits
        if h.memory.content == text2
    ]
    assert len(hit2) == 1 and hit2[0].memory.scope.value == "session"  # 0.8 ≥ 2 × 0.4: the lower one wins


# ── sessions ──
def test_a_session_whose_store_is_lost_is_abandoned(svc: EngramService, proj: str) -> None:
    sess = svc.start_session(project=proj, claude_session_id="c-lost")
    lost = next(s for s in svc.scopes.live_sessions() if s.key == sess.session_key)
    svc.scopes.drop_session(lost)  # the process died and its session store went with it
    kept = svc.start_session(project=proj, claude_session_id="c-alive")
    report = svc.maintain(project=proj)
    assert report.sessions_abandoned == 1
    store = svc.project_store(proj)
    assert store is not None
    rows = {
        r["session_key"]: r for r in store.q1("SELECT session_key, status, end_reason FROM session_registry")
    }
    assert rows[sess.session_key]["status"] == "abandoned" and rows[kept.session_key]["status"] == "active"
    assert svc.maintain(project=proj).sessions_abandoned == 0


# ── evolution rails ──
def _judged_logs(svc: EngramService, proj: str, n: int) -> None:
    store = svc.project_store(proj)
    assert store is not None
    rows = [
        {
            "query": f"q{i}",
            "strategy": "hybrid",
            "scopes": ["session" if i % 2 == 0 else "user"],
            "types": ["procedural" if i % 2 == 0 else "episodic"],
            "memory_ids": [],
            "results_count": 1,
            "was_useful": i % 2 == 0,
            "created_at": svc.now() - timedelta(minutes=n - i),
        }
        for i in range(n)
    ]
    store.q("INSERT INTO retrieval_log $rows", {"rows": rows})


def test_evolution_cooldown_bounds_rollback_and_existing_half_lives(
    svc: EngramService, clock: FrozenClock, proj: str
) -> None:
    ep = svc.store(
        MemoryIn(content="Saw the flaky upload test fail twice", memory_type="episodic"), project=proj
    ).memory
    _judged_logs(svc, proj, 100)
    first = evolution.evolve_memory_system(svc, dry_run=False, project=proj)
    assert set(first.applied) == {"scope_weights", "decay_half_lives"}
    hl1 = svc.half_lives()["episodic"]
    assert hl1 < 1.0 and svc.get(ep.id, project=proj).half_life_days == hl1  # existing memories follow
    at(clock, 0.95)  # under a day later, with fresh evidence: the cooldown holds
    _judged_logs(svc, proj, 100)
    held = evolution.evolve_memory_system(svc, dry_run=False, project=proj)
    assert held.proposals and held.applied == [] and "cooldown" in held.message
    at(clock, 1.05)  # the same (unused) rows apply once the cooldown is over
    assert evolution.evolve_memory_system(svc, dry_run=False, project=proj).applied
    for day in range(2, 12):  # ten more cycles of the same one-sided evidence
        at(clock, day + 0.1)
        _judged_logs(svc, proj, 100)
        evolution.evolve_memory_system(svc, dry_run=False, project=proj)
    w, h = svc.scope_weights(), svc.half_lives()
    assert w["user"] >= 0.7 * 0.5 - 1e-9 and w["session"] <= 1.5 * 1.5 + 1e-9  # cumulative bounds
    assert h["episodic"] >= 0.5 - 1e-9 and h["procedural"] <= 60.0 + 1e-9
    assert h["episodic"] == pytest.approx(0.5)  # held at its floor
    before = evolution.evolution_history(svc)
    undone = evolution.rollback_evolution(svc, steps=2)
    assert len(undone) == 2 and len(evolution.evolution_history(svc)) == len(before) + 2
    again = evolution.rollback_evolution(svc, steps=1)  # undoes the next older change, not the rollback
    assert again[0].undid not in {u.undid for u in undone}
    assert svc.get(ep.id, project=proj).half_life_days == svc.half_lives()["episodic"]


def test_a_created_at_in_the_future_is_refused(svc: EngramService, clock: FrozenClock, proj: str) -> None:
    later = (clock.now() + timedelta(days=2)).isoformat()
    lines = [
        json.dumps({"content": "from the future", "created_at": later}),
        json.dumps({"content": "from today"}),
    ]
    report = svc.import_lines(lines, project=proj)
    assert (
        report.stored == 0 and [f.line for f in report.failed] == [1] and "future" in report.failed[0].error
    )
    assert svc.import_lines(lines, project=proj, skip_bad=True).stored == 1
    with pytest.raises(EngramError, match="future"):
        svc.store(
            MemoryIn(content="also from the future", created_at=clock.now() + timedelta(hours=1)),
            project=proj,
        )


def test_cli_feedback_maintain_preview_and_evolve(light_daemon, tmp_path: Path) -> None:  # noqa: ANN001
    from support import new_project
    from test_cli import engram, ok_json, one_line_error

    light_daemon.start()
    proj = new_project(tmp_path, "cliproj")
    mid = ok_json(
        engram(light_daemon, "store", "the CI cache key includes the lockfile hash", "--json", cwd=proj)
    )["memory"]["id"]
    fb = ok_json(engram(light_daemon, "feedback", mid, "helpful", "--json", cwd=proj))
    assert fb["user_feedback"] == 1.0
    one_line_error(engram(light_daemon, "feedback", mid, "great", cwd=proj), "verdict must be one of")
    dry = ok_json(engram(light_daemon, "maintain", "--dry-run", "--json", cwd=proj))
    assert dry["dry_run"] is True and "took_ms" in dry
    assert "no evolution change" in engram(light_daemon, "evolve", "--history", cwd=proj).stdout
    one_line_error(engram(light_daemon, "evolve", "--rollback", cwd=proj), "nothing to roll back")
    shown = engram(light_daemon, "evolve", cwd=proj)
    assert shown.returncode == 0 and "50 needed" in shown.stdout
    history = tmp_path / "history.jsonl"
    history.write_text("\n".join(_lines(6, 300, datetime.now(UTC))) + "\n")
    aged = engram(light_daemon, "import", str(history), "--dry-run", "--dates", "age", cwd=proj)
    assert aged.returncode == 0 and "nothing stored" in aged.stdout
    assert "6 of these would be archived, 6 of them below the forget threshold" in aged.stdout
    kept = engram(light_daemon, "import", str(history), cwd=proj)
    assert (
        kept.returncode == 0 and "6 stored" in kept.stdout and "0 of these would be archived" in kept.stdout
    )
