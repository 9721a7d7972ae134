"""The row mirror (engram_core/row_mirror.py): recall reads its winners' rows in memory, and those rows never drift
from the store whatever wrote last."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engram_core.clock import FrozenClock
from engram_core.models import MemoryIn, MemoryPatch, Status
from engram_core.service import EngramService
from engram_core.storage import ScopeStore, row_mirror

TEXTS = [
    "Payments use Stripe with idempotency keys on every charge [x] [/] \\ ok 🎉",
    "The billing service retries webhooks three times with backoff",
    "Run the tests with `make test`; CI uses pytest -x on Python 3.11",
    "We chose Postgres over MySQL because of JSONB and partial indexes",
    "Deploys go through the staging cluster first, then prod after a soak of an hour",
    "The webhook handler lives in services/billing/webhooks.py and must stay idempotent",
]
COMPARED = ("memory_strength", "quality")  # computed for the moment of the answer: not stored


def _plain(memory: Any) -> dict[str, Any]:
    return memory.model_dump(exclude=set(COMPARED))


def assert_in_step(service: EngramService, store: ScopeStore, p: str) -> int:
    """Every row the mirror holds equals a fresh read of the store, and so does what recall returns."""
    service.flush()
    held = 0
    for key in list(store.summaries):
        row = store.rows.get(key)
        if row is None:
            continue
        held += 1
        fresh = store.get(key)
        assert fresh is not None, key
        fresh.pop("memory_strength", None)
        assert row == fresh, key
    for q in (
        "stripe payments",
        "webhooks billing retries",
        "tests CI",
        "postgres database choice",
        "deploys",
    ):
        for hit in service.recall(q, project=p, strengthen=False, log=False).hits:
            assert _plain(hit.memory) == _plain(service.get(hit.memory.id, project=p)), hit.memory.id
    return held


@pytest.fixture
def service(engram_home: Path, embedder: Any) -> Iterator[EngramService]:
    """The conftest's service on a clock the test moves (the sweep acts on what a month does)."""
    svc = EngramService(engram_home, embedder=embedder, clock=FrozenClock(datetime.now(UTC)))
    yield svc
    svc.close()


@pytest.fixture
def filled(
    service: EngramService, project_dir: Path
) -> Iterator[tuple[EngramService, ScopeStore, str, list[str]]]:
    p = str(project_dir)
    keys = [service.store(MemoryIn(content=t, tags=["t"]), project=p).memory.id for t in TEXTS]
    store = service.project_store(p)
    assert store is not None
    yield service, store, p, keys


class CountingRun:
    """Counts the queries a store's connection runs (each one's answer is decoded by the SDK)."""

    def __init__(self, store: ScopeStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sql: list[str] = []
        real = store.conn.run

        def run(ns: str, db: str, sql: str, params: Any = None) -> Any:
            self.sql.append(sql)
            return real(ns, db, sql, params)

        monkeypatch.setattr(store.conn, "run", run)


def test_recall_runs_no_query_once_warm(filled: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    service, store, p, keys = filled
    service.recall("warm up the graph mirror", project=p)
    service.flush()
    counting = CountingRun(store, monkeypatch)
    res = service.recall("how are payments charged?", project=p)
    assert res.hits and res.hits[0].memory.id == keys[0]
    assert res.hits[0].memory.content == TEXTS[0]
    assert counting.sql == []  # rows from the mirror; the access counts and the log row are written later


def test_rows_survive_a_restart_through_the_snapshot(
    filled: Any, engram_home: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, store, p, keys = filled
    assert len(store.rows) == len(TEXTS)
    before = {k: store.rows.get(k) for k in keys}
    service.close()
    again = EngramService(home=engram_home, embedder=embedder)
    try:
        st = again.project_store(p)
        assert st is not None
        assert {k: st.rows.get(k) for k in keys} == before
        again.recall("warm up the graph mirror", project=p)
        again.flush()
        counting = CountingRun(st, monkeypatch)
        assert again.recall("stripe idempotency", project=p).hits
        assert counting.sql == []
        assert_in_step(again, st, p)
    finally:
        again.close()


def test_rows_missing_after_an_open_without_snapshot_are_read_and_filled(
    filled: Any, engram_home: Path, embedder: Any
) -> None:
    service, store, p, keys = filled
    snap = store.snapshot_path
    service.close()
    assert snap is not None and snap.is_file()
    snap.unlink()  # the mirror is read from the store: no rows
    again = EngramService(home=engram_home, embedder=embedder)
    try:
        st = again.project_store(p)
        assert st is not None and len(st.rows) == 0
        st.update_memory(keys[1], {"metadata": {"when": again.now(), "note": "[x] \\ 🎉"}})
        st.rows.drop([keys[1]])
        assert st.snapshots.fill_rows() == len(TEXTS)
        assert len(st.rows) == len(TEXTS)
        assert assert_in_step(again, st, p) == len(TEXTS)
        assert st.rows.get(keys[1])["metadata"]["note"] == "[x] \\ 🎉"  # type: ignore[index]
    finally:
        again.close()


def test_the_daemon_fills_missing_rows_in_the_background(
    filled: Any, engram_home: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon (store.use_engine_thread) reads the rows a store opened without them lacks, without a recall."""
    import engram_core.storage.engine as store_mod

    service, store, p, keys = filled
    snap = store.snapshot_path
    service.close()
    assert snap is not None
    snap.unlink()
    monkeypatch.setattr(store_mod, "_fill_in_background", True)
    again = EngramService(home=engram_home, embedder=embedder)
    try:
        st = again.project_store(p)
        assert st is not None and st.rows.filler is not None
        st.rows.filler.join(60)
        assert len(st.rows) == len(TEXTS) and not st.rows.filling
        assert assert_in_step(again, st, p) == len(TEXTS)
    finally:
        again.close()


def test_the_mirror_stays_in_step_after_every_kind_of_write(filled: Any) -> None:
    service, store, p, keys = filled
    assert assert_in_step(service, store, p) == len(TEXTS)
    # recall's own access write (the events may change the status)
    service.recall("stripe payments", project=p)
    assert_in_step(service, store, p)
    # an exact duplicate is merged into the existing memory
    service.store(MemoryIn(content=TEXTS[1], tags=["merged"]), project=p)
    assert "merged" in store.rows.get(keys[1])["tags"]  # type: ignore[index]
    assert_in_step(service, store, p)
    # update, status change, forget (and forget --erase)
    service.update(keys[2], MemoryPatch(tags=["ci"], importance=0.9), project=p)
    service.set_status(keys[3], Status.archived, project=p)
    service.forget(keys[4], project=p)  # archived: still mirrored
    assert store.rows.get(keys[4])["status"] == "archived"  # type: ignore[index]
    assert_in_step(service, store, p)
    service.forget(keys[5], project=p, erase=True, confirm=True)
    assert keys[5] not in store.rows
    assert_in_step(service, store, p)
    # feedback on a recall (a raw UPDATE of the memories it returned)
    res = service.recall("stripe payments", project=p)
    service.mark_retrieval_useful(res.query, True, project=p, log_id=res.log_id)
    assert_in_step(service, store, p)
    # injected at SessionStart (a deferred write)
    service.note_injected([f"project:{keys[0]}"], project=p)
    assert_in_step(service, store, p)
    # a console write (the mirror reloads), then the maintenance sweep a month later
    out = service.run_query(
        f"UPDATE memory:{keys[0]} SET metadata = {{source: 'console'}}", project=p, allow_writes=True
    )
    assert out.ok, out.message
    assert service.get(keys[0], project=p).metadata == {"source": "console"}
    assert_in_step(service, store, p)
    # promotion to the user scope writes a copy there and marks this one
    fresh = service.store(MemoryIn(content="Always use ruff before committing", importance=0.9), project=p)
    service.promote(fresh.memory.id, "user", project=p)
    assert_in_step(service, store, p)
    assert_in_step(service, service.user, p)
    service.clock.advance(days=40)  # type: ignore[attr-defined]
    assert service.maintain(project=p)
    assert_in_step(service, store, p)


def test_rows_held_from_the_snapshot_follow_every_kind_of_write(
    filled: Any, engram_home: Path, embedder: Any
) -> None:
    """After a restart the rows wait undecoded in the snapshot's blob: each kind of write must still drop, patch
    or replace them exactly as it does a row held in memory."""
    service, store, p, keys = filled
    service.close()
    again = EngramService(home=engram_home, embedder=embedder)
    try:
        st = again.project_store(p)
        assert st is not None
        assert len(st.rows) == len(TEXTS) and st.rows.missing(keys) == []
        again.store(MemoryIn(content=TEXTS[1], tags=["merged"]), project=p)  # a merge patches the held row
        assert "merged" in st.rows.get(keys[1])["tags"]  # type: ignore[index]
        again.update(keys[2], MemoryPatch(tags=["ci [/] \\ 🙂"], importance=0.9), project=p)
        again.set_status(keys[3], Status.archived, project=p)
        again.forget(keys[5], project=p, erase=True, confirm=True)
        assert keys[5] not in st.rows
        assert_in_step(again, st, p)
        assert again.run_query(
            f"UPDATE memory:{keys[0]} SET metadata = {{source: 'console'}}", project=p, allow_writes=True
        ).ok
        assert again.get(keys[0], project=p).metadata == {"source": "console"}
        assert_in_step(again, st, p)
    finally:
        again.close()


def test_a_snapshot_blob_is_decoded_only_for_the_rows_asked_for() -> None:
    from engram_core.storage.row_mirror import RowMirror, encode

    rows = RowMirror()
    packed = {
        k: tuple(f"{k}-{f}" if f == "content" else None for f in row_mirror.FIELDS) for k in ("a", "b", "c")
    }
    texts = [encode(packed["a"]).encode(), b"", encode(packed["c"]).encode()]  # "b" was not held
    offsets = [0, len(texts[0]), len(texts[0]), len(texts[0]) + len(texts[2])]
    rows.load_snapshot(["a", "b", "c"], b"".join(texts), offsets)
    assert len(rows) == 2 and "a" in rows and "b" not in rows and rows.missing(["a", "b", "c"]) == ["b"]
    assert (
        rows.snapshot_text("c") == texts[2].decode() and rows._rows == {}
    )  # read, not taken out of the blob
    assert rows.get("a")["content"] == "a-content"  # type: ignore[index]
    assert set(rows._rows) == {"a"} and set(rows._at) == {"c"}
    rows.patch("c", {"content": "changed"})
    assert rows.get("c")["content"] == "changed"  # type: ignore[index]
    rows.drop(["a"])
    assert "a" not in rows and len(rows) == 1
    rows.clear()
    assert len(rows) == 0 and rows.get("c") is None
