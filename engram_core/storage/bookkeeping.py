"""Applies the bookkeeping a recall owes the database after the recall has answered.

A recall counts an access on each memory it returns, writes a retrieval_log row and strengthens
co-activation edges. Written inline those cost more than the recall itself (~25 ms of ~60 ms across three
scopes), so the stores queue them (`BookkeepingQueue`, one per store) and this thread applies them once the caller has
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
import functools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any

from ..memory.scoring import ACCESS_RELEVANCE_STEP, IMPORTANCE_WEIGHTS
from .engine import Connection
from .locks import OrderedLock
from .mirror import MemoryMirror
from .values import MEMORY_FIELDS, key_of, plain, query_file, record

log = logging.getLogger(__name__)
# Access counts and co-activations (bookkeeping that rewrites rows) are written at most this often per store.
ACCESS_AFTER_S = 60.0
# Recall log rows are held this long at most; the daemon compacts a store whose rows held for LOG_COMPACT_S would
# alone make it due (the compaction writes them into the fresh copy); otherwise they are written in place then.
LOG_AFTER_S = 600.0
LOG_COMPACT_S = 300.0
# Recall log rows held in memory per store at most (as many as compaction keeps: service.RETRIEVAL_LOG_KEEP).
HELD_LOG_MAX = 5000
LOG_ROW_BYTES = (
    1300  # what one retrieval_log row adds to the engine's files (measured: ~1.3 KB, batched or not)
)
COPYING_RETRY_S = 1.0  # held bookkeeping is tried again this often while a compaction copies between requests
ACCESS_CHUNK = 100  # memories whose access counts one bookkeeping write applies (BookkeepingQueue.drain_due)


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
            int, tuple[float, BookkeepingQueue]
        ] = {}  # stores holding access counts: when they are due
        self._cond = threading.Condition()
        self._stores: dict[int, BookkeepingQueue] = {}
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

    def notify(self, store: BookkeepingQueue) -> None:
        """A store has queued work (its `BookkeepingQueue` calls this)."""
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


class BookkeepingQueue:
    """Bookkeeping one store owes its database (access counts, co-activation edges, recall log rows, queued
    statements), written after the answer that made it; every other query on the store applies it first (read
    your writes: `ScopeStore.q`). The mirror takes each change at once; the queue only writes the database."""

    def __init__(
        self, conn: Connection, namespace: str, database: str, mirror: MemoryMirror, drain_lock: OrderedLock
    ) -> None:
        self.conn = conn
        self.namespace = namespace
        self.database = database
        self.mirror = mirror
        # Held while pending bookkeeping is applied (and by `ScopeStore.q`, which reads what it writes).
        self.drain_lock = drain_lock
        self.access: dict[str, tuple[int, datetime]] = {}
        # Queued statements, and the memories each changes (their full rows are dropped from the mirror).
        self.statements: list[tuple[str, dict[str, Any], tuple[str, ...]]] = []
        # Co-activation edges a recall strengthened, summed per edge: {edge id: (strength, times, pair, last)}.
        self.coact: dict[str, tuple[float, int, Mapping[str, Any], datetime, str]] = {}
        # Recall log rows, held newest-last (see `hold_log`), and when the oldest of them was logged.
        self.held_log: deque[dict[str, Any]] = deque(maxlen=HELD_LOG_MAX)
        self.log_since: float | None = None
        self.access_since: float | None = None  # monotonic time of the oldest access not yet written
        self.on_defer: Callable[[BookkeepingQueue], None] | None = None

    def strengthen(self, keys: list[str], when: datetime) -> None:
        """Count an access on each memory (see `ScopeStore.strengthen`)."""
        m = self.mirror
        with m.lock:
            for key in keys:
                light = m.summaries.get(key)
                if light is not None:
                    light.access_count += 1
                    light.last_accessed_at = when
                n, _ = self.access.get(key, (0, when))
                self.access[key] = (n + 1, when)
            if self.access_since is None:
                self.access_since = time.monotonic()
        self.notify()

    def coactivate(self, pairs: list[Mapping[str, Any]], delta: float, when: datetime, kind: str) -> None:
        """Strengthen co-activation edges, summed per edge until written with the access counts."""
        with self.mirror.lock:
            for p in pairs:
                d, n, _, _, _ = self.coact.get(str(p["id"]), (0.0, 0, p, when, kind))
                self.coact[str(p["id"])] = (d + delta, n + 1, p, when, kind)
            if self.access_since is None:
                self.access_since = time.monotonic()
        self.notify()

    def defer(
        self, sql: str, params: Mapping[str, Any] | None = None, memory_rows: tuple[str, ...] = ()
    ) -> None:
        """Queue a write to apply after the current answer (before any other query on this store).
        ``memory_rows``: the memories it changes, whose full rows the mirror drops when it is applied."""
        with self.mirror.lock:
            self.statements.append((sql, dict(params or {}), memory_rows))
        self.notify()

    def hold_log(self, row: dict[str, Any]) -> None:
        with self.mirror.lock:
            self.held_log.append(row)
            if self.log_since is None:
                self.log_since = time.monotonic()
        self.notify()

    def notify(self) -> None:
        if self.on_defer is not None:
            self.on_defer(self)
        else:  # nobody to apply it later: apply it now
            self.drain()

    @property
    def has_pending(self) -> bool:
        return bool(self.access or self.statements or self.coact or self.held_log)

    def held_log_bytes(self, after_s: float) -> int:
        """About what writing the held recall log rows would add to the files, once the oldest has been held for
        ``after_s`` (0 before). When that alone makes the store due, the compaction writes them into the fresh
        copy instead; a few rows are written in place by the bookkeeping thread (`LOG_AFTER_S`)."""
        since = self.log_since
        if since is None or time.monotonic() - since < after_s:
            return 0
        return len(self.held_log) * LOG_ROW_BYTES

    def drain(self) -> None:
        """Apply the pending bookkeeping now."""
        with self.drain_lock, self.conn.lock:
            self.drain_locked()

    def drain_due(self, access_after_s: float, log_after_s: float = 0.0) -> float | None:
        """What the bookkeeping thread applies: the queued statements now, the access counts and co-activations
        only once the oldest is ``access_after_s`` old, the recall log rows once the oldest is ``log_after_s``
        old. The engine rewrites a whole row for any UPDATE (measured: ~8.5 KB a memory, kept in its log until
        compaction), so a memory recalled a hundred times a minute is written once a minute, not a hundred
        times; a log row costs ~1.3 KB whenever it is written, so held rows are best written by the compaction
        (`Connection.compact` after `drain`), which the daemon runs before ``log_after_s``.
        Returns the seconds until the next held piece is due, or None.

        The pieces take the connection's lock one at a time (access counts ACCESS_CHUNK memories a piece), so a
        recall reading rows the row mirror lacks waits for one piece, not for all; a query through
        `ScopeStore.q`, which reads what the bookkeeping wrote, waits for the whole drain (`drain_lock`)."""
        with self.drain_lock:
            with self.conn.lock:
                if self.conn.copying:  # a compaction copies between requests: a write now would make it stale
                    return COPYING_RETRY_S
                with self.mirror.lock:
                    now = time.monotonic()
                    since, log_since = self.access_since, self.log_since
                    hold = (
                        bool(self.access or self.coact) and since is not None and now - since < access_after_s
                    )
                    hold_log = bool(self.held_log) and log_since is not None and now - log_since < log_after_s
                work = self.take(keep_access=hold, keep_log=hold_log)
            self.run(work)
            waits = ([since + access_after_s - now] if hold and since is not None else []) + (
                [log_since + log_after_s - now] if hold_log and log_since is not None else []
            )
            return max(0.0, min(waits)) if waits else None

    def drain_locked(self, keep_access: bool = False, keep_log: bool = False) -> None:
        """Apply it, the caller holding `drain_lock` and the connection's lock."""
        self.run(self.take(keep_access, keep_log))

    def take(self, keep_access: bool = False, keep_log: bool = False) -> list[Callable[[], Any]]:
        """The pending bookkeeping, taken off the queues as the writes that apply it (in order)."""
        with self.mirror.lock:
            access, stmts = ({} if keep_access else self.access), self.statements
            coact = {} if keep_access else self.coact
            if not keep_access:
                self.access, self.coact, self.access_since = {}, {}, None
            self.statements = []
            held_log = [] if keep_log else list(self.held_log)
            if not keep_log:
                self.held_log.clear()
                self.log_since = None
        # Each piece on its own: a failed one must neither fail the query that happened to come next nor take
        # the others with it.
        keys = list(access)
        run = functools.partial(self.conn.run, self.namespace, self.database)
        work: list[Callable[[], Any]] = [
            functools.partial(self.write_access, {k: access[k] for k in keys[i : i + ACCESS_CHUNK]})
            for i in range(0, len(keys), ACCESS_CHUNK)
        ]
        if held_log:
            work.append(
                functools.partial(run, "INSERT INTO retrieval_log $rows RETURN NONE", {"rows": held_log})
            )
        if coact:
            pairs = [{**p, "d": d, "n": n, "at": at, "kind": kind} for d, n, p, at, kind in coact.values()]
            work.append(functools.partial(run, query_file("coactivate.surql"), {"pairs": pairs}))
        for sql, params, memory_rows in stmts:
            self.mirror.drop_rows(memory_rows)
            work.append(functools.partial(run, sql, params))
        return work

    def run(self, work: list[Callable[[], Any]]) -> None:
        for step in work:
            try:
                step()
            except Exception as exc:  # noqa: BLE001
                log.warning(
                    "recall bookkeeping for %s/%s not applied: %s", self.namespace, self.database, exc
                )

    def write_access(self, access: dict[str, tuple[int, datetime]]) -> None:
        groups: dict[int, list[str]] = {}
        for key, (n, _) in access.items():
            groups.setdefault(n, []).append(key)
        sql: list[str] = []
        params: dict[str, Any] = {}
        for i, (n, keys) in enumerate(groups.items()):
            # One timestamp per group: the latest access among them (they are at most a moment apart).
            # Importance first (SET sees the values before this access): it gains what the access adds to the
            # composite (scoring.access_gain), frequency up to 10 accesses and relevance.
            sql.append(
                f"UPDATE $ids{i} SET importance = math::min([1.0, importance + {IMPORTANCE_WEIGHTS['frequency']}"
                f" * (math::min([1.0, (access_count + {n}) / 10.0]) - math::min([1.0, access_count / 10.0]))"
                f" + {IMPORTANCE_WEIGHTS['relevance']} * math::max([0.0, math::min([1.0, relevance_score + "
                f"{ACCESS_RELEVANCE_STEP * n}]) - relevance_score])]), access_count += {n}, "
                f"last_accessed_at = $at{i}, "
                f"relevance_score = math::min([1.0, relevance_score + {ACCESS_RELEVANCE_STEP * n}]) RETURN NONE"
            )
            params[f"ids{i}"] = [record(k) for k in keys]
            params[f"at{i}"] = max(access[k][1] for k in keys)
        # Read back whole rows: the events may have changed status and history, and the row cache is refreshed
        # with what recall will show next time.
        sql.append(f"SELECT {MEMORY_FIELDS} FROM $all")
        params["all"] = [record(k) for k in access]
        rows = self.conn.run(self.namespace, self.database, ";\n".join(sql), params)[-1]
        m = self.mirror
        with m.lock:
            for row in rows or []:
                key = key_of(row["id"])
                light = m.summaries.get(key)
                if light is None:
                    continue
                m.rows.put(key, plain(row))
                light.importance = float(row["importance"])
                light.status = row["status"]
                if key not in self.access:
                    light.access_count = int(row["access_count"])
                    light.last_accessed_at = plain(row["last_accessed_at"])
