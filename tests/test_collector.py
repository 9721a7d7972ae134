"""The cyclic collector is paused while a mirror is built (engram_core/collector.py): at 100,000 memories its
collections over the growing heap were half of the project store's opening."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest
from test_mirror_snapshot import _fill

from engram_core.collector import paused_collector
from engram_core.models import Scope
from engram_core.storage import Connection, ScopeStore


def test_the_collector_is_paused_inside_and_put_back_by_the_last_block_out() -> None:
    assert gc.isenabled()
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with paused_collector():
            entered.set()
            release.wait(10)

    t = threading.Thread(target=other)
    with paused_collector():
        assert not gc.isenabled()
        t.start()
        assert entered.wait(10)
    assert not gc.isenabled()  # the other thread's load still runs: not re-enabled under it
    release.set()
    t.join(10)
    assert gc.isenabled()
    gc.disable()
    try:  # a collector someone turned off stays off
        with paused_collector():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    with pytest.raises(RuntimeError), paused_collector():
        raise RuntimeError("a failed load")
    assert gc.isenabled()


def test_opening_a_store_from_its_snapshot_runs_no_collection(tmp_path: Path) -> None:
    conn = Connection.file(tmp_path / "project.db")
    store = ScopeStore(conn, Scope.project, "p")
    _fill(store, 300)
    store.save_snapshot()
    runs: list[str] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            runs.append(threading.current_thread().name)

    gc.collect()
    gc.callbacks.append(seen)
    try:
        store.reload_mirror()
    finally:
        gc.callbacks.remove(seen)
    assert len(store.summaries) == 300
    assert threading.current_thread().name not in runs  # without the pause: several generation-0 runs


def test_the_freed_heap_is_handed_back_once_when_the_last_block_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    import engram_core.collector as collector

    calls: list[int] = []
    monkeypatch.setattr(collector, "release_freed_memory", lambda: calls.append(collector._pausing))
    with paused_collector():
        with paused_collector():
            pass
        assert calls == []  # an outer build still runs
    assert calls == [0]
