"""The daemon compacts a due store only when no request is being answered: an import chunk lasts seconds, and idle
counted from a request's start compacted between chunks (13 compactions, 83 s of a 292 s import of 3,000)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from engram_core.daemon.server import COMPACT_IDLE_S, Daemon
from engram_core.wire.protocol import request


def test_no_compaction_while_a_request_runs_and_idle_counts_from_its_end(tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "home", warm_model=False)
    entered, release = threading.Event(), threading.Event()

    def slow_dispatch(method: str, params: dict) -> dict:
        entered.set()
        release.wait(30)
        return {"done": True}

    daemon.dispatch = slow_dispatch  # type: ignore[method-assign]
    answers: list[bytes] = []
    worker = threading.Thread(target=lambda: answers.append(daemon.handle_line(request(1, "import_lines", {}))))
    worker.start()
    assert entered.wait(10)
    later = time.monotonic() + COMPACT_IDLE_S + 5  # long after the request began
    assert not daemon.idle_for_compaction(later), "a request is still being answered"
    release.set()
    worker.join(10)
    assert answers and b'"done"' in answers[0]
    ended = time.monotonic()
    assert not daemon.idle_for_compaction(ended + COMPACT_IDLE_S / 2)
    assert daemon.idle_for_compaction(ended + COMPACT_IDLE_S + 0.1)
