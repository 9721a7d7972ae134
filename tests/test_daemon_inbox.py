"""The daemon's hook-event inbox on its own, without a socket: the real service, journal and worker thread."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engram_core import api
from engram_core.daemon.inbox import HookInbox


def _event(eid: str, proj: str, content: str) -> dict[str, Any]:
    return {
        "event_id": eid,
        "kind": "memory",
        "cwd": proj,
        "memory": {"content": content, "memory_type": "semantic", "scope": "project", "importance": 0.5},
    }


def _stored(svc: Any, proj: str, eid: str) -> list[str]:
    store = svc.scopes.project_store(proj)
    return store.q1("SELECT VALUE content FROM memory WHERE metadata.hook_event_id = $e", {"e": eid}) or []


class _Running:
    """An inbox started on the service; ``service`` is what the daemon would hand it (None while closing)."""

    def __init__(self, home: Path, service: Any) -> None:
        self.service = service
        self.stop_event = threading.Event()
        not_compacting = threading.Event()
        not_compacting.set()
        self.inbox = HookInbox(home, lambda: self.service, self.stop_event, not_compacting)
        self.inbox.open()
        self.inbox.start()

    def close(self) -> None:
        self.stop_event.set()
        self.inbox.stop()
        self.inbox.close()


@pytest.fixture
def running(env: tuple[Any, str]) -> Iterator[tuple[_Running, Any, str]]:
    svc, proj = env
    run = _Running(svc.home, svc)
    yield run, svc, proj
    run.close()


def test_an_event_is_applied_once_and_a_second_with_its_id_is_a_duplicate(
    running: tuple[_Running, Any, str],
) -> None:
    run, svc, proj = running
    before = api.revision()
    first = run.inbox.hook_event(_event("ev-1", proj, "the build uses uv, not pip"))
    again = run.inbox.hook_event(_event("ev-1", proj, "the build uses uv, not pip"))
    assert first == {"accepted": True, "event_id": "ev-1", "duplicate": False}
    assert again == {"accepted": False, "event_id": "ev-1", "duplicate": True}
    report = run.inbox.flush(30)
    assert report.drained and report.applied == 1
    assert _stored(svc, proj, "ev-1") == ["the build uses uv, not pip"]
    assert api.revision() > before, "front ends polling the change counter see the hook's write"
    assert run.inbox.journal is not None and run.inbox.journal.pending == {}


def test_a_failing_apply_is_retried_then_parked_in_the_journal_and_applied_by_a_flush(
    running: tuple[_Running, Any, str],
) -> None:
    run, svc, proj = running
    run.inbox.retry_delays = (0.01, 0.01)
    run.service = None  # what the inbox sees while the daemon closes its service: "service closed"
    run.inbox.hook_event(_event("ev-2", proj, "release notes go in CHANGES.md"))
    assert run.inbox.wait_drained(30)  # a parked event is no longer waited for
    parked = run.inbox.parked["ev-2"]
    assert parked["attempts"] == 3 and "service closed" in parked["error"]
    assert run.inbox.events_failed == 3 and run.inbox.events_applied == 0
    assert run.inbox.journal is not None and "ev-2" in run.inbox.journal.pending
    on_disk = [json.loads(line) for line in (svc.home / "journal.jsonl").read_text().splitlines()]
    assert [r["op"] for r in on_disk if r["id"] == "ev-2"] == ["begin"], "kept on disk for the next start"
    run.service = svc
    report = run.inbox.flush(30)
    assert report.drained and report.parked == 0 and report.applied == 1
    assert _stored(svc, proj, "ev-2") == ["release notes go in CHANGES.md"]
    assert run.inbox.journal.pending == {}


def test_a_journaled_event_not_applied_is_replayed_by_the_next_inbox(env: tuple[Any, str]) -> None:
    svc, proj = env
    first = _Running(svc.home, None)  # acknowledged, never applied (the daemon died)
    first.inbox.retry_delays = ()
    first.inbox.hook_event(_event("ev-3", proj, "the API is versioned under /v2"))
    assert first.inbox.wait_drained(30) and "ev-3" in first.inbox.parked
    first.close()
    second = _Running(svc.home, svc)
    try:
        assert second.inbox.flush(30).drained
        assert _stored(svc, proj, "ev-3") == ["the API is versioned under /v2"]
        assert second.inbox.hook_event(_event("ev-3", proj, "the API is versioned under /v2"))["duplicate"]
    finally:
        second.close()
