"""Recall bookkeeping (access counts, retrieval_log, co-activation) is written after the answer, and never lost:
the next query on the store applies it first, a background thread applies it when the caller goes quiet,
and close applies the rest."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engram_core.models import MemoryIn, Status
from engram_core.service import EngramService
from engram_core.storage import ScopeStore, record


def raw_row(store: ScopeStore, key: str) -> dict[str, Any]:
    """The row as the database has it now, without applying the store's queue (what `q` would do)."""
    return store.conn.run(
        store.namespace, store.database, "SELECT access_count, status FROM ONLY $id", {"id": record(key)}
    )[-1]


def raw_log_count(store: ScopeStore) -> int:
    rows = store.conn.run(
        store.namespace, store.database, "SELECT count() AS n FROM retrieval_log GROUP ALL"
    )[-1]
    return rows[0]["n"] if rows else 0


def seed(svc: EngramService, p: str) -> str:
    svc.store(MemoryIn(content="The billing service retries webhooks three times with backoff"), project=p)
    return svc.store(
        MemoryIn(content="Payments use Stripe with idempotency keys on every charge"), project=p
    ).memory.id


def slow_bookkeeper(svc: EngramService) -> None:
    """Hold the background thread off so the queued state can be observed."""
    svc.bookkeeper.idle_s = svc.bookkeeper.max_wait_s = 60.0


def test_recall_answers_before_the_write_and_the_next_query_sees_it(
    service: EngramService, project_dir: Path
) -> None:
    p = str(project_dir)
    key = seed(service, p)
    slow_bookkeeper(service)
    store = service.project_store(p)
    res = service.recall("which payment provider do we use?", project=p)
    hit = next(h for h in res.hits if h.memory.id == key)
    assert hit.memory.access_count == 1  # the answer already counts this access (from the mirror)
    assert raw_row(store, key)["access_count"] == 0 and raw_log_count(store) == 0  # not written yet
    assert store.summaries[key].access_count == 1
    # Any query on the store applies the queue first: read your writes.
    after = service.get(key, project=p)
    assert after.access_count == 1 and after.status == Status.active  # the database event ran too
    assert store.summaries[key].status == "active"  # the event's status change reached the mirror
    # The log row waits for a query that reads the table (or the compaction); such a query sees it.
    assert raw_log_count(store) == 0
    rows = service.run_query("SELECT id FROM retrieval_log", project=p).statements[0].rows
    assert [r["id"] for r in rows] == [f"retrieval_log:{res.log_id}"] or res.log_id in str(rows)


def test_background_thread_applies_it_when_the_caller_goes_quiet(
    service: EngramService, project_dir: Path
) -> None:
    p = str(project_dir)
    key = seed(service, p)
    store = service.project_store(p)
    service.bookkeeper.access_after_s = 0.5  # access counts wait 60 s by default
    service.bookkeeper.log_after_s = 0.5  # log rows wait for the compaction (or 10 min)
    service.recall("which payment provider do we use?", project=p)
    service.recall("stripe idempotency keys", project=p)
    deadline = time.monotonic() + 10
    while (
        raw_row(store, key)["access_count"] < 2 or raw_log_count(store) < 2
    ) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert raw_row(store, key)["access_count"] == 2
    assert raw_log_count(store) == 2
    assert not store.has_pending


def test_access_counts_of_a_burst_of_recalls_are_written_once(
    service: EngramService, project_dir: Path
) -> None:
    """The engine rewrites the whole row (embedding included) for any UPDATE and keeps the old version in its log:
    a memory recalled many times within `access_after_s` is written once, with the summed count."""
    p = str(project_dir)
    key = seed(service, p)
    store = service.project_store(p)
    writes: list[int] = []
    real = store.bookkeeping.write_access
    store.bookkeeping.write_access = lambda access: (writes.append(len(access)), real(access))[1]  # type: ignore[method-assign]
    for _ in range(20):
        service.recall("stripe idempotency keys", project=p)
    assert writes == [] and raw_row(store, key)["access_count"] == 0 and raw_log_count(store) == 0
    service.flush()
    assert len(writes) == 1 and raw_row(store, key)["access_count"] == 20 and raw_log_count(store) == 20


def test_recalls_write_nothing_until_the_compaction_writes_their_log_into_the_fresh_copy(
    service: EngramService, project_dir: Path, monkeypatch: Any
) -> None:
    """Issue #13 (store size within 10 % over a long run): a log row costs ~1.3 KB of the engine's files wherever
    it is written and the engine never reclaims it, so recalls hold their rows and the daemon's compaction
    writes them into the compacted copy; the store's files do not grow with recalls in between."""
    from engram_core.memory import maintenance

    p = str(project_dir)
    seed(service, p)
    store = service.project_store(p)
    service.flush()
    before = store.conn.disk_bytes()
    n = 1000  # ~1.3 MB of log rows: enough to make the store due once they are old enough
    for i in range(n):
        service.recall(f"stripe idempotency keys {i}", project=p)
    assert store.conn.disk_bytes() == before  # nothing written: counts, edges and log rows are all held
    assert (
        service.compact(only_due=True).stores == []
    )  # not due yet: nothing erased, no growth, log rows young
    monkeypatch.setattr(maintenance, "LOG_COMPACT_S", 0.0)
    report = service.compact(only_due=True)
    assert [s.path for s in report.stores] == [str(store.conn.path)]
    assert raw_log_count(store) == n
    assert store.conn.disk_bytes() < before + n * 1300  # the rows, not the rows plus their first copy


def test_a_few_held_log_rows_do_not_make_a_store_due(
    service: EngramService, project_dir: Path, monkeypatch: Any
) -> None:
    """Compacting copies the whole store: a few minutes of ordinary use (a few log rows) is written in place by
    the bookkeeping thread instead, never worth a compaction of its own."""
    from engram_core.memory import maintenance

    p = str(project_dir)
    seed(service, p)
    monkeypatch.setattr(maintenance, "LOG_COMPACT_S", 0.0)
    for i in range(20):
        service.recall(f"stripe idempotency keys {i}", project=p)
    assert service.compact(only_due=True).stores == []


def test_close_applies_whatever_is_queued(tmp_path: Path, embedder: Any) -> None:
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    p = str(proj)
    svc = EngramService(tmp_path / "home", embedder=embedder, recover_sessions=False)
    key = seed(svc, p)
    slow_bookkeeper(svc)
    res = svc.recall("which payment provider do we use?", project=p)
    assert svc.project_store(p).has_pending
    svc.close()
    again = EngramService(tmp_path / "home", embedder=embedder, recover_sessions=False)
    try:
        assert again.get(key, project=p).access_count == 1
        rows = again.run_query("SELECT * FROM retrieval_log", project=p).statements[0].rows
        assert len(rows) == 1 and res.log_id in str(rows[0]["id"])
    finally:
        again.close()


def test_feedback_right_after_recall_finds_its_log_row(service: EngramService, project_dir: Path) -> None:
    """The log row is written after the answer; feedback given at once must still find it and apply."""
    p = str(project_dir)
    key = seed(service, p)
    slow_bookkeeper(service)
    query = "which payment provider do we use?"
    res = service.recall(query, project=p)
    before = service.get(key, project=p).model_dump()
    out = service.mark_retrieval_useful(query, True, reason="it answered", project=p)
    assert out.updated and out.log_id == res.log_id
    rows = (
        service.run_query("SELECT was_useful, feedback_reason FROM retrieval_log", project=p)
        .statements[0]
        .rows
    )
    assert rows == [{"was_useful": True, "feedback_reason": "it answered"}]
    after = service.get(key, project=p)
    assert after.relevance_score > before["relevance_score"]


def test_recalled_rows_are_cached_but_never_stale(service: EngramService, project_dir: Path) -> None:
    """A memory recalled again comes from the row cache; an edit by any path shows in the next recall."""
    from engram_core.models import MemoryPatch

    p = str(project_dir)
    key = seed(service, p)
    store = service.project_store(p)
    query = "which payment provider do we use?"

    def hit() -> Any:
        return next(h.memory for h in service.recall(query, project=p).hits if h.memory.id == key)

    assert hit().content.startswith("Payments use Stripe")
    assert store.rows.get(key) is not None  # the row mirror holds it
    service.flush()
    assert hit().status == Status.active  # the access write's events refreshed the cached row
    service.update(key, MemoryPatch(tags=["billing"]), project=p)
    assert hit().tags == ["billing"]
    res = service.run_query(
        f"UPDATE memory:{key} SET metadata = {{source: 'console'}}", project=p, allow_writes=True
    )
    assert res.ok, res.message
    assert hit().metadata == {"source": "console"}


def test_queue_waits_while_a_recall_is_running(service: EngramService, project_dir: Path) -> None:
    """A recall's embedding releases the GIL; that pause must not be taken for idleness (a write would then
    land in the middle of the answer). The queue is applied once the recall is over."""
    p = str(project_dir)
    key = seed(service, p)
    store = service.project_store(p)
    bk = service.bookkeeper
    bk.idle_s, bk.max_wait_s, bk.access_after_s = 0.0, 60.0, 0.0
    with bk.busy():  # as if another recall were running all along
        service.recall("which payment provider do we use?", project=p)
        service.recall("stripe idempotency keys", project=p)
        time.sleep(0.3)
        assert store.has_pending and raw_row(store, key)["access_count"] == 0
    deadline = time.monotonic() + 10
    while store.has_pending and time.monotonic() < deadline:
        time.sleep(0.02)
    assert raw_row(store, key)["access_count"] == 2


def test_a_script_that_never_closes_still_writes_its_queue(tmp_path: Path, embedder: Any) -> None:
    """In-process use without close(): the queue is written when the interpreter exits."""
    import subprocess
    import sys

    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    svc = EngramService(tmp_path / "home", embedder=embedder, recover_sessions=False)
    key = seed(svc, str(proj))
    svc.close()
    script = (
        "import sys\n"
        "from engram_core.retrieval.embeddings import NoEmbedder\n"
        "from engram_core.service import EngramService\n"
        "svc = EngramService(sys.argv[1], embedder=NoEmbedder(), recover_sessions=False)\n"
        "svc.bookkeeper.idle_s = svc.bookkeeper.max_wait_s = 60.0\n"
        "res = svc.recall('payment provider stripe', project=sys.argv[2])\n"
        "assert res.hits, res\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "home"), str(proj)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    again = EngramService(tmp_path / "home", embedder=embedder, recover_sessions=False)
    try:
        assert again.get(key, project=str(proj)).access_count == 1
    finally:
        again.close()


def test_wait_idle_waits_for_the_running_recalls() -> None:
    """Background work (the graph's hubs) waits until no recall runs: it would take the GIL from one."""
    import threading

    from engram_core.storage.bookkeeping import Bookkeeper

    keeper = Bookkeeper()
    assert keeper.wait_idle(0.0)  # nothing running
    entered, release = threading.Event(), threading.Event()

    def recall() -> None:
        with keeper.busy():
            entered.set()
            release.wait(10)

    t = threading.Thread(target=recall)
    t.start()
    assert entered.wait(10)
    assert not keeper.wait_idle(0.05)  # a recall runs: not idle within the time given
    done: list[bool] = []
    waiter = threading.Thread(target=lambda: done.append(keeper.wait_idle(10)))
    waiter.start()
    release.set()  # the recall ends: the waiter is woken
    waiter.join(10)
    t.join(10)
    assert done == [True]
    keeper.close()
