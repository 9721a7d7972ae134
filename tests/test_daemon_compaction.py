"""The daemon compacts a due store only when no request is being answered: an import chunk lasts seconds, and idle
counted from a request's start compacted between chunks (13 compactions, 83 s of a 292 s import of 3,000)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from engram_core.daemon.background import BULK_QUIET_S, COMPACT_FORCE_S, COMPACT_IDLE_S
from engram_core.daemon.server import Daemon
from engram_core.wire.protocol import request


def _daemon_answering_slowly(tmp_path: Path) -> tuple[Daemon, threading.Event, threading.Event]:
    """A daemon whose every request sets ``entered`` and is answered once ``release`` is set."""
    daemon = Daemon(tmp_path / "home", warm_model=False)
    entered, release = threading.Event(), threading.Event()

    def slow_dispatch(method: str, params: dict) -> dict:
        entered.set()
        release.wait(30)
        return {"done": True}

    daemon.dispatch = slow_dispatch  # type: ignore[method-assign]
    return daemon, entered, release


def test_no_compaction_while_a_request_runs_and_idle_counts_from_its_end(tmp_path: Path) -> None:
    daemon, entered, release = _daemon_answering_slowly(tmp_path)
    answers: list[bytes] = []
    worker = threading.Thread(
        target=lambda: answers.append(daemon.handle_line(request(1, "import_lines", {})))
    )
    worker.start()
    assert entered.wait(10)
    later = time.monotonic() + COMPACT_IDLE_S + 5  # long after the request began
    assert not daemon.background.idle_for_compaction(later), "a request is still being answered"
    release.set()
    worker.join(10)
    assert answers and b'"done"' in answers[0]
    ended = time.monotonic()
    assert not daemon.background.idle_for_compaction(ended + COMPACT_IDLE_S / 2)
    assert daemon.background.idle_for_compaction(ended + COMPACT_IDLE_S + 0.1)


def test_no_forced_compaction_during_an_import_and_a_while_after(tmp_path: Path) -> None:
    daemon, entered, release = _daemon_answering_slowly(tmp_path)
    last_compact = time.monotonic() - COMPACT_FORCE_S - 1  # a due store has waited past the forced limit
    worker = threading.Thread(target=lambda: daemon.handle_line(request(1, "import_lines", {})))
    worker.start()
    assert entered.wait(10)
    assert not daemon.background.compaction_wanted(time.monotonic(), last_compact), (
        "an import chunk is running"
    )
    release.set()
    worker.join(10)
    ended = time.monotonic()
    assert not daemon.background.compaction_wanted(ended + 1, last_compact), "the next chunk is on its way"
    # Any other request leaves the forced rule alone: while one runs, the overdue store is compacted.
    entered.clear()
    release.clear()
    worker = threading.Thread(target=lambda: daemon.handle_line(request(2, "recall", {})))
    worker.start()
    assert entered.wait(10)
    assert not daemon.background.idle_for_compaction(ended + BULK_QUIET_S + 1)
    assert not daemon.background.compaction_wanted(ended + BULK_QUIET_S - 1, last_compact)
    assert daemon.background.compaction_wanted(ended + BULK_QUIET_S + 1, last_compact)
    release.set()
    worker.join(10)
