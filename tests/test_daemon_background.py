"""Background work against requests and stop. Recall never waits behind the maintenance sweep: the sweep is applied
in slices under the request lock, each taken only when no request waits (request_lock.py, maintenance.maintain; at
50,000 memories the sweep in one piece held a recall for 9.75 s). `engram stop` during a compaction stops it and
returns once the daemon has let go of the data root (it returned while the compaction ran on, and a start right
after said "already running")."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram_core.daemon.server import Daemon
from engram_core.request_lock import RequestLock
from engram_core.storage import compaction as store_module
from engram_core.wire.client import RemoteService, daemon_alive

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
import realpath_text  # noqa: E402


def _wait_until(cond: Any, what: str, timeout: float = 30.0) -> None:
    done = threading.Event()
    while not cond():
        if done.wait(0.005) or timeout <= 0:
            raise AssertionError(f"never happened: {what}")
        timeout -= 0.005


def test_a_waiting_request_goes_before_the_next_background_slice() -> None:
    """What the sweep does between two slices (release, then take the lock back) lets a waiting request in first;
    a plain RLock gives it straight back to the releasing thread."""
    lock = RequestLock()
    order: list[str] = []
    lock.acquire()  # the sweep's first slice

    def request() -> None:
        with lock:
            order.append("request")

    t = threading.Thread(target=request)
    t.start()
    _wait_until(lambda: lock.waiting() == 1, "the request waits for the lock")
    lock.release()
    with lock.background():  # the sweep's next slice
        order.append("slice")
    t.join(10)
    assert order == ["request", "slice"]


def test_a_background_slice_inside_a_request_of_the_same_thread_does_not_wait() -> None:
    lock = RequestLock()
    with lock:
        waiter = threading.Thread(target=lambda: lock.acquire() and lock.release())
        waiter.start()
        _wait_until(lambda: lock.waiting() == 1, "another request waits")
        with lock.background():  # reentrant: a request that runs the sweep in-process (the after-turn pass)
            pass
    waiter.join(10)
    assert not waiter.is_alive()


class _PausingLock(RequestLock):
    """The daemon's request lock, which holds background work once between two of its pieces (not holding the lock)
    when ``pause_when`` first says so."""

    def __init__(self) -> None:
        super().__init__()
        self.pause_when: Any = None
        self.paused, self.go = threading.Event(), threading.Event()

    @contextlib.contextmanager
    def background(self) -> Iterator[None]:
        if self.pause_when is not None and self.pause_when():
            self.pause_when = None
            self.paused.set()
            assert self.go.wait(120)
        with super().background():
            yield


@pytest.fixture
def paused_daemon(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Daemon, Path]]:
    """A real daemon in this process (real stores, model and socket) whose request lock can pause a sweep."""
    from engram_core.service import EngramService

    monkeypatch.setenv("ENGRAM_COMPACT_CHECK_S", "0")  # no compaction slice among the sweep's
    monkeypatch.setenv("HOME", str(tmp_path))
    home = tmp_path / "home"
    daemon = Daemon(
        home,
        idle_timeout_s=0,
        warm_model=False,
        service_factory=lambda h: EngramService(h, embedder=embedder, recover_sessions=False),
    )
    daemon.lock = _PausingLock()
    daemon.start()
    server = threading.Thread(target=daemon.serve_forever, daemon=True)
    server.start()
    proj = tmp_path / "proj"
    (proj / ".git").mkdir(parents=True)
    yield daemon, proj
    daemon.lock.go.set()
    daemon.request_stop()
    server.join(60)


def test_a_recall_during_a_sweep_is_answered_between_its_slices(paused_daemon: tuple[Daemon, Path]) -> None:
    daemon, proj = paused_daemon
    lock = daemon.lock
    assert isinstance(lock, _PausingLock)
    client = RemoteService(daemon.home, start=False).connect()
    texts = [m["content"] for m in realpath_text.memories(100, 0, seed=3)]
    # Unimportant when young: the sweep archives every one of them (lifecycle.YOUNG_IMPORTANCE_BELOW).
    ids = [
        client.call("store", memory={"content": t, "importance": 0.05}, project=str(proj))["memory"]["id"]
        for t in texts
    ]
    assert len(set(ids)) == 100

    pieces = iter(range(2))  # 1: the stores are listed; 2: the first slice of memories; then paused
    lock.pause_when = lambda: next(pieces, None) is None
    answers: list[dict[str, Any]] = []
    sweeper = RemoteService(daemon.home, start=False).connect()
    sweep = threading.Thread(target=lambda: answers.append(sweeper.call("maintain", project=str(proj))))
    sweep.start()
    assert lock.paused.wait(60), "the sweep never released the request lock between two slices"

    # Mid-sweep: the first slice is applied, the last memory not yet, and requests are answered.
    assert client.call("get", memory_id=ids[0], project=str(proj))["status"] == "archived"
    assert client.call("get", memory_id=ids[-1], project=str(proj))["status"] == "created"
    hits = client.call("recall", query=texts[-1], project=str(proj), limit=5)["hits"]
    assert texts[-1] in [h["memory"]["content"] for h in hits]
    # A recall strengthens what it returns, so those memories changed since the plan too.
    changed = {h["memory"]["id"] for h in hits} | {ids[-1]}
    # An edit between the plan and its slice: that memory's planned move no longer holds, so it is not made.
    client.call("update", memory_id=ids[-1], patch={"importance": 0.9}, project=str(proj))
    assert sweep.is_alive() and not answers

    lock.go.set()
    sweep.join(120)
    report = answers[0]
    assert report["slices"] >= 2
    assert report["left_for_next_sweep"] == len(changed)
    assert report["transitions"] == {"archived": 100 - len(changed)}
    assert client.call("get", memory_id=ids[-1], project=str(proj))["status"] == "active"  # recalled
    unchanged_late = next(i for i in reversed(ids) if i not in changed)
    assert client.call("get", memory_id=unchanged_late, project=str(proj))["status"] == "archived"
    # The next sweep decides on what they are now: the important one stays.
    again = client.call("maintain", project=str(proj))
    assert again["left_for_next_sweep"] == 0
    assert client.call("get", memory_id=ids[-1], project=str(proj))["status"] == "active"
    client.close()
    sweeper.close()


def test_stop_during_a_compaction_stops_it_and_returns_once_the_daemon_is_gone(
    paused_daemon: tuple[Daemon, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    daemon, proj = paused_daemon
    client = RemoteService(daemon.home, start=False).connect()
    for t in [m["content"] for m in realpath_text.memories(5, 0, seed=5)]:
        client.call("store", memory={"content": t}, project=str(proj))
    copying, go = threading.Event(), threading.Event()
    real_copy = store_module.copy_store

    def held_copy(*args: Any, **kwargs: Any) -> Iterator[None]:  # the copy starts once the test lets it
        copying.set()
        assert go.wait(120)
        yield from real_copy(*args, **kwargs)

    monkeypatch.setattr(store_module, "copy_store", held_copy)
    answers: list[Any] = []
    compact = threading.Thread(target=lambda: answers.append(client.call("compact", project=str(proj))))
    compact.start()
    assert copying.wait(60)
    env = {
        **os.environ,
        "ENGRAM_HOME": str(daemon.home),
        "ENGRAM_EMBEDDING_PROVIDER": "none",
        "ENGRAM_DAEMON_IDLE_TIMEOUT_S": "120",
    }
    stop = subprocess.Popen(
        [sys.executable, "-m", "engram_core.cli", "stop"],
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _wait_until(lambda: daemon.stop_event.is_set(), "the daemon was asked to stop")
    go.set()  # the compaction is asked at its first batch whether to go on
    out, err = stop.communicate(timeout=120)
    assert stop.returncode == 0, err
    assert "waiting for a compaction" in err and "stopped the Engram daemon" in out
    assert not daemon_alive(daemon.home), "stop returned before the daemon let go of its data root"
    compact.join(60)
    report = answers[0]
    assert report["stopped"] and not report["stores"]
    client.close()
    db = Path(report["stopped"][0])
    assert db.exists() and not db.with_name(db.name + ".compact").exists()
    # A start right after finds no daemon running, and the store is whole.
    started = subprocess.run(
        [sys.executable, "-m", "engram_core.cli", "stats", "--json"],
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
        cwd=proj,
    )
    assert started.returncode == 0, started.stderr
    assert {s["scope"]: s["total"] for s in json.loads(started.stdout)["scopes"]}["project"] == 5
    subprocess.run(
        [sys.executable, "-m", "engram_core.cli", "stop"], env=env, timeout=120, capture_output=True
    )


def test_recall_goes_on_during_a_compaction_and_a_write_meanwhile_is_kept(
    paused_daemon: tuple[Daemon, Path],
) -> None:
    """The copy runs in pieces with requests between them; a write between two pieces makes the copy stale, and the
    store is compacted again holding the lock: the write is in the compacted store."""
    daemon, proj = paused_daemon
    lock = daemon.lock
    assert isinstance(lock, _PausingLock)
    client = RemoteService(daemon.home, start=False).connect()
    texts = [m["content"] for m in realpath_text.memories(30, 0, seed=9)]
    for t in texts[:29]:
        client.call("store", memory={"content": t}, project=str(proj))
    conn = daemon.service.project_store(str(proj)).conn
    embedder = daemon.service.embedder

    def compact_paused_midway() -> tuple[threading.Thread, list[Any]]:
        lock.paused.clear()
        lock.go.clear()
        lock.pause_when = lambda: conn.copying
        answers: list[Any] = []
        other = RemoteService(daemon.home, start=False).connect()
        t = threading.Thread(target=lambda: answers.append(other.call("compact", project=str(proj))))
        t.start()
        assert lock.paused.wait(60), "the compaction never let requests in between two pieces of its copy"
        return t, answers

    # Reads between the pieces leave the copy good.
    t, answers = compact_paused_midway()
    hits = client.call("recall", query=texts[3], project=str(proj), limit=5)["hits"]
    assert texts[3] in [h["memory"]["content"] for h in hits]
    assert t.is_alive() and not answers
    lock.go.set()
    t.join(120)
    (done,) = [st for st in answers[0]["stores"] if st["path"] == str(conn.path)]
    assert done["copied_between_requests"] is True

    # A write between the pieces: the copy starts over holding the lock, and the write is kept.
    t, answers = compact_paused_midway()
    late = client.call("store", memory={"content": texts[29]}, project=str(proj))["memory"]["id"]
    assert t.is_alive() and not answers
    lock.go.set()
    t.join(120)
    (done,) = [st for st in answers[0]["stores"] if st["path"] == str(conn.path)]
    assert done["copied_between_requests"] is False
    assert client.call("get", memory_id=late, project=str(proj))["content"] == texts[29]
    client.close()
    daemon.request_stop()
    daemon.lock.go.set()
    # Reopened from the files, the store has all 30.
    from engram_core.service import EngramService

    _wait_until(lambda: not daemon_alive(daemon.home), "the daemon let go of its data root")
    svc = EngramService(daemon.home, embedder=embedder)
    try:
        assert {s.scope.value: s.total for s in svc.stats(project=str(proj)).scopes}["project"] == 30
    finally:
        svc.close()
