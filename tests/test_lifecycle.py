"""Lifecycle moves with time (the sweep) and with writes (database events); promotion moves memories up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engram_core.models import MemoryIn, Status
from engram_core.service import EngramService
from engram_core.storage import record


def _age(service: EngramService, project: str, memory_id: str, days: float, **extra: object) -> None:
    """Pretend a memory was last touched `days` ago (the store is real; only its clock fields move)."""
    store = service.project_store(project)
    assert store is not None
    when = datetime.now(UTC) - timedelta(days=days)
    store.q(
        "UPDATE $id MERGE $f",
        {"id": record(memory_id), "f": {"last_accessed_at": when, "created_at": when, **extra}},
    )
    store.refresh([memory_id])


def test_sweep_moves_memories_through_the_lifecycle(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    ids = {
        name: service.store(
            MemoryIn(content=f"{name} memory about topic {name}", memory_type="episodic", importance=0.6),
            project=p,
        ).memory.id
        for name in ("fresh", "young", "weak", "used", "gone", "pinned")
    }
    _age(service, p, ids["young"], 0.1)  # 2.4 h old: created → active
    _age(service, p, ids["weak"], 4)  # 0.6 × 0.5^4 ≈ 0.04 < 0.1, never used → archived
    _age(service, p, ids["used"], 2, access_count=3, status="active")  # < 0.3, used → consolidation queue
    _age(
        service,
        p,
        ids["gone"],
        40,
        status="archived",  # < 0.01 and archived for over 7 days → forgotten
        status_changed_at=datetime.now(UTC) - timedelta(days=8),
    )
    _age(service, p, ids["pinned"], 10, pinned=True)
    report = service.maintain(project=p)
    status = {n: service.get(i, project=p).status for n, i in ids.items()}
    assert status == {
        "fresh": Status.created,
        "young": Status.active,
        "weak": Status.archived,
        "used": Status.active,
        "gone": Status.forgotten,
        "pinned": Status.active,
    }
    assert report.queued_for_consolidation == 1
    gone = service.get(ids["gone"], project=p)
    assert gone.content == "[forgotten]" and gone.status_history[-1].to_status == "forgotten"
    queue = (
        service.run_query("SELECT reason, memory_id FROM consolidation_queue", project=p).statements[0].rows
    )
    assert queue == [{"reason": "decay", "memory_id": f"memory:{ids['used']}"}]
    # A second sweep queues nothing twice.
    assert service.maintain(project=p).queued_for_consolidation == 0


def test_the_sweep_reads_when_a_memory_was_archived_only_for_those_it_may_forget(
    service: EngramService, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reading the archive date of every archived memory fetched each whole row (2.3 s and 330 MB of engine memory
    for 43,000 at 100k): it is read for the archived memories under the forget line alone, and still decides."""
    p = str(project_dir)
    ids = {
        name: service.store(
            MemoryIn(content=f"{name} memory about topic {name}", memory_type="episodic", importance=0.6),
            project=p,
        ).memory.id
        for name in ("long_ago", "lately", "strong")
    }
    now = datetime.now(UTC)
    _age(service, p, ids["long_ago"], 40, status="archived", status_changed_at=now - timedelta(days=8))
    # as weak, but archived two days ago: within the grace period, whatever its creation date says
    _age(service, p, ids["lately"], 40, status="archived", status_changed_at=now - timedelta(days=2))
    _age(service, p, ids["strong"], 0.5, status="archived", status_changed_at=now - timedelta(days=30))
    store = service.project_store(p)
    assert store is not None
    asked: list[list[str]] = []
    real = store.memories.archived_since
    monkeypatch.setattr(
        store.memories, "archived_since", lambda keys: asked.append(sorted(keys)) or real(keys)
    )
    service.maintain(project=p)
    assert asked == [sorted([ids["long_ago"], ids["lately"]])], "the strong one cannot be forgotten: not read"
    status = {n: service.get(i, project=p).status for n, i in ids.items()}
    assert status == {"long_ago": Status.forgotten, "lately": Status.archived, "strong": Status.archived}


def test_sweep_updates_the_mirror_in_place(
    service: EngramService, project_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep hands the mirror its status changes instead of rebuilding it (a rebuild held every client for
    tens of seconds at 50k); the mirror kept in step equals one rebuilt from the database."""
    p = str(project_dir)
    ids = [
        service.store(
            MemoryIn(content=f"memory {i} about topic {i}", memory_type="episodic", importance=0.6), project=p
        ).memory.id
        for i in range(4)
    ]
    _age(service, p, ids[0], 0.1)
    _age(service, p, ids[1], 4)
    _age(service, p, ids[2], 40, status="archived", status_changed_at=datetime.now(UTC) - timedelta(days=8))
    store = service.project_store(p)
    assert store is not None
    monkeypatch.setattr(store, "reload_mirror", lambda: pytest.fail("the sweep rebuilt the mirror"))
    service.maintain(project=p)
    kept = {k: lt.status for k, lt in store.summaries.items()}
    assert kept[ids[0]] == "active" and kept[ids[1]] == "archived" and ids[2] not in kept
    assert ids[2] not in store.index
    monkeypatch.undo()
    store.reload_mirror()
    assert kept == {k: lt.status for k, lt in store.summaries.items()}


def test_retrieval_revives_an_archived_memory(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    m = service.store(
        MemoryIn(content="The staging database password rotates monthly", importance=0.9), project=p
    ).memory
    _age(service, p, m.id, 0.5, status="archived")
    res = service.recall("staging database password rotation", project=p, statuses=["archived", "active"])
    assert res.hits[0].memory.id == m.id
    after = service.get(m.id, project=p)
    assert after.status == Status.active and after.status_history[-1].reason == "revived by retrieval"


def test_session_end_promotes_by_the_criteria(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    sess = service.start_session(project=p, claude_session_id="claude-1")
    s = sess.claude_session_id
    keep = service.store(
        MemoryIn(
            content="The flaky test is test_upload; it needs the S3 mock", scope="session", importance=0.7
        ),
        session=s,
    ).memory
    weak = service.store(
        MemoryIn(content="Looked at README once", scope="session", importance=0.2), session=s
    ).memory
    work = service.store(
        MemoryIn(content="scratch: trying option B", scope="session", memory_type="working", importance=0.9),
        session=s,
    ).memory
    urgent = service.store(
        MemoryIn(
            content="Never run migrations on prod without a backup",
            scope="session",
            importance=0.9,
            memory_type="procedural",
        ),
        session=s,
    ).memory
    for _ in range(2):  # accessed twice
        service.recall("flaky upload test S3 mock", session=s, project=p)
    report = service.end_session(s)
    assert len(report.promoted) == 2 and report.skipped == 2
    promoted = [service.get(pid.split(":", 1)[1], project=p) for pid in report.promoted]
    contents = {m.content for m in promoted}
    assert keep.content in contents and urgent.content in contents
    assert weak.content not in contents and work.content not in contents
    chained = next(m for m in promoted if m.content == keep.content)
    assert chained.promoted_from == f"session:{keep.id}" and chained.promotion_chain == [f"session:{keep.id}"]
    log = service.run_query("SELECT action, source_scope, target_scope FROM promotion_log", project=p)
    assert {r["action"] for r in log.statements[0].rows} == {"promoted"}
    # The session is gone (ephemeral), its database dropped.
    assert service.list_sessions() == []


def test_promotion_merges_a_near_duplicate_instead_of_inserting(
    service: EngramService, project_dir: Path
) -> None:
    p = str(project_dir)
    existing = service.store(
        MemoryIn(content="Run the linters with `make lint` before pushing", memory_type="procedural"),
        project=p,
    ).memory
    s = service.start_session(project=p).session_key
    service.store(
        MemoryIn(
            content="Run the linters with `make lint` before you push",
            scope="session",
            memory_type="procedural",
            importance=0.9,
        ),
        session=s,
    )
    report = service.end_session(s)
    assert report.merged == [f"project:{existing.id}"] and report.promoted == []
    merged = service.get(existing.id, project=p)
    assert merged.metadata["merged_from"] and merged.metadata["merged_variants"][0]["content"].endswith(
        "you push"
    )


def test_explicit_promotion_ignores_scores(service: EngramService, project_dir: Path) -> None:
    p = str(project_dir)
    m = service.store(MemoryIn(content="I like terse commit messages", importance=0.1), project=p).memory
    report = service.promote(m.id, project=p)
    assert report.promoted and report.promoted[0].startswith("user:")
    user_mem = service.get(report.promoted[0].split(":", 1)[1])
    assert user_mem.scope.value == "user" and user_mem.promoted_from == f"project:{m.id}"


def test_project_to_user_needs_two_projects(service: EngramService, tmp_path: Path) -> None:
    pa, pb = tmp_path / "a", tmp_path / "b"
    for d in (pa, pb):
        (d / ".git").mkdir(parents=True)
    fact = "Prefer pathlib over os.path in Python code"
    a = service.store(
        MemoryIn(content=fact, memory_type="procedural", importance=0.8), project=str(pa)
    ).memory
    store_a = service.project_store(str(pa))
    store_a.q("UPDATE $id SET access_count = 6", {"id": record(a.id)})
    store_a.refresh([a.id])
    # Seen in one project only; and known from the mirrors alone: the sweep holds the request lock meanwhile (a row
    # read for each candidate held a recall for 0.8 s at 15k)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(store_a, "get", lambda key: pytest.fail(f"read the row of {key}"))
        assert service.maintain(project=str(pa)).promoted_to_user == 0
    service.store(MemoryIn(content=fact + ".", memory_type="procedural"), project=str(pb))
    assert service.maintain(all_projects=True).promoted_to_user == 1
    assert fact in service.recall("pathlib", scope="user").hits[0].memory.content
    assert service.maintain(all_projects=True).promoted_to_user == 0  # once


def test_unfinished_session_survives_a_restart_and_is_recovered(
    engram_home: Path, project_dir: Path, embedder
) -> None:  # noqa: ANN001
    p = str(project_dir)
    svc = EngramService(engram_home, embedder=embedder)
    s = svc.start_session(project=p, claude_session_id="crashy").session_key
    svc.store(
        MemoryIn(content="Found the root cause: a race in the cache warmer", scope="session", importance=0.9),
        session=s,
    )
    svc.close()  # the process dies without end_session
    svc = EngramService(engram_home, embedder=embedder)  # fresh session: not stale yet, still live
    assert [x.session_key for x in svc.list_sessions()] == [s]
    assert svc.recall("cache warmer race", session="crashy", project=p).hits
    assert svc.recover_stale_sessions(older_than_hours=-1) == 1  # as if 24 h had passed
    assert svc.list_sessions() == []
    assert "cache warmer" in svc.recall("cache warmer race", project=p).hits[0].memory.content
    reg = svc.run_query("SELECT status, end_reason FROM session_registry", project=p).statements[0].rows
    assert reg == [{"status": "recovered", "end_reason": "recovered"}]
    svc.close()
