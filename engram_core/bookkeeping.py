"""Applies the bookkeeping a recall owes the database after the recall has answered.

A recall counts an access on each memory it returns, writes a retrieval_log row and strengthens
co-activation edges. Written inline those cost more than the recall itself (~25 ms of ~60 ms across three
scopes), so the stores queue them (`ScopeStore.defer`) and this thread applies them once the caller has
gone quiet for a moment (`idle_s`, 5 ms), or after `max_wait_s` (1 s) at the latest. Nothing is lost to
ordering: any other query on a store applies that store's queue first, and `close` applies everything.

Access counts and co-activations are held longer (`access_after_s`, 60 s from the oldest) and written summed:
the engine rewrites a whole row for any UPDATE and keeps every version in its files until compaction (~8.5 KB
a memory row, measured), so a store recalled continuously writes each memory's counters once a minute instead
of at every recall. Recall log rows (~1.3 KB each wherever they are written) are held until a query reads the
table, the store is compacted (when rows held for `LOG_COMPACT_S`, 5 min, would alone make the store due for
compaction, the daemon compacts it and they are written into the compacted copy, leaving nothing behind), or
`log_after_s` (10 min) at the latest, in place (a few rows are not worth copying a whole store).

What a crash can lose: the recall log rows of the last `LOG_COMPACT_S` (`log_after_s` without a daemon) and
the access counts and co-activations of the last `access_after_s`; never a memory or an edit (those are
written before the call that made them returns).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import time
from collections.abc import Iterator

from .store import ScopeStore

log = logging.getLogger(__name__)
# Access counts and co-activations (bookkeeping that rewrites rows) are written at most this often per store.
ACCESS_AFTER_S = 60.0
# Recall log rows are held this long at most; the daemon compacts a store whose rows held for LOG_COMPACT_S would
# alone make it due (the compaction writes them into the fresh copy); otherwise they are written in place then.
LOG_AFTER_S = 600.0
LOG_COMPACT_S = 300.0


class Bookkeeper:
    def __init__(
        self,
        *,
        idle_s: float = 0.005,
        max_wait_s: float = 1.0,
        access_after_s: float = ACCESS_AFTER_S,
        log_after_s: float = LOG_AFTER_S,
    ) -> None:
        self.idle_s = idle_s
        self.max_wait_s = max_wait_s
        self.access_after_s = access_after_s
        self.log_after_s = log_after_s
        self._later: dict[
            int, tuple[float, ScopeStore]
        ] = {}  # stores holding access counts: when they are due
        self._cond = threading.Condition()
        self._stores: dict[int, ScopeStore] = {}
        self._first = 0.0
        self._last = 0.0
        self._closed = False
        self._thread: threading.Thread | None = None
        self._inflight = 0  # recalls running now: their embedding releases the GIL, which is not idleness
        # A script that never closes its service still gets its queue written when the interpreter exits.
        atexit.register(self._at_exit)

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """Around a recall: the queue waits for it to finish (up to `max_wait_s`), so a write is never applied
        in the middle of the next answer."""
        with self._cond:
            self._inflight += 1
        try:
            yield
        finally:
            with self._cond:
                self._inflight -= 1
                self._last = time.monotonic()
                self._cond.notify_all()  # the bookkeeping thread, and any job in `wait_idle`

    def wait_idle(self, timeout_s: float = 60.0) -> bool:
        """Wait until no recall is running: for background work that would take the GIL from one (a recall's
        embedding releases it, and such work would run right then). False when ``timeout_s`` ran out."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._inflight and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def notify(self, store: ScopeStore) -> None:
        """A store has queued work (called by `ScopeStore.defer` / deferred strengthening)."""
        with self._cond:
            if self._closed:
                store.drain()
                return
            now = time.monotonic()
            if not self._stores:
                self._first = now
            self._stores[id(store)] = store
            self._last = now
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="engram-bookkeeping", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _due(self) -> float | None:
        """Seconds until the queue should be applied (0: now), None when there is nothing queued."""
        now = time.monotonic()
        later = min((at for at, _ in self._later.values()), default=None)
        if later is not None and later <= now:
            return 0.0
        if not self._stores:
            return None if later is None else later - now
        deadline = self._first + self.max_wait_s
        if self._inflight:
            return max(0.0, deadline - now)
        return max(0.0, min(self._last + self.idle_s, deadline) - now)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    wait = self._due()
                    if wait == 0.0:
                        break
                    self._cond.wait(wait)
                if self._closed:
                    return
                now = time.monotonic()
                stores = {**self._stores, **{k: s for k, (at, s) in self._later.items() if at <= now}}
                self._stores.clear()
                for k in stores:
                    self._later.pop(k, None)
            for k, store in stores.items():
                try:
                    wait = store.drain_due(self.access_after_s, self.log_after_s)
                except Exception:  # noqa: BLE001 - a closed store at shutdown; the next query retries
                    log.exception("recall bookkeeping failed")
                    continue
                if wait is not None:
                    with self._cond:
                        self._later[k] = (time.monotonic() + wait, store)

    def flush(self) -> None:
        """Apply everything queued, in the caller's thread."""
        with self._cond:
            stores = [*self._stores.values(), *(s for _, s in self._later.values())]
            self._stores.clear()
            self._later.clear()
        for store in stores:
            store.drain()

    def _at_exit(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed:
                self.flush()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.flush()
        atexit.unregister(self._at_exit)
