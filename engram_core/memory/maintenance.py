"""Maintenance: the sweep (lifecycle.py has the rules per scope), compaction of the store files, and
redaction of what an older version stored."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..api import api
from ..core import MemoryCore
from ..heap import release_freed_memory
from ..models import CompactedStore, CompactReport, MaintenanceReport, Scope
from ..storage import CompactionOvertaken, CompactionStopped, Connection, ScopeStore, key_of
from ..storage.bookkeeping import LOG_COMPACT_S
from . import lifecycle, scoring
from .promotion import promote_project_to_user
from .sessions import recover_stale_sessions
from .stored_redaction import redact_store

RETRIEVAL_LOG_KEEP = 5000  # newest retrieval_log rows kept per store (pruned when the store is compacted)


# The sweep runs in slices (the daemon runs it every 10 minutes): each slice holds the request lock
# about this long, and is taken only when no request waits for it (request_lock.py), so a recall issued during a
# sweep waits for one slice at most (the sweep in one piece held every client for seconds: docs/benchmarks.md).
SWEEP_SLICE_S = 0.05
SWEEP_FIRST_SLICE = 32  # memories in a store's first slice; the next ones are sized from how long it took
SWEEP_SLICE_MAX = 2000
FORGET_MARGIN = 1.5  # see sweep_rows


@api
def maintain(
    core: MemoryCore, project: str | None = None, all_projects: bool = False, dry_run: bool = False
) -> MaintenanceReport:
    """The maintenance sweep (lifecycle.py has the rules per scope): decay transitions, the consolidation
    queue, caps, half-lives following their current value, stale and abandoned sessions, promotion to user.
    ``dry_run`` reports what the sweep would do and changes nothing.

    Planned off the request lock from a snapshot of the mirror, then applied in short slices under it (see
    SWEEP_SLICE_S); a memory that changed between the plan and its slice is left for the next sweep."""
    t0 = time.perf_counter()
    with core.api_lock.background():
        open_projects(core, project, all_projects)
        stores = [*(s for _, s in core.scopes.open_projects()), core.user]
    report = MaintenanceReport(
        transitions={},
        queued_for_consolidation=0,
        sessions_recovered=0,
        promoted_to_user=0,
        took_ms=0.0,
        dry_run=dry_run,
    )
    for store in stores:
        if core.closed or core.stopping.is_set():
            break
        rows = sweep_rows(core, store)
        plan = plan_sweep(core, store, rows)
        label = "user" if store.scope == Scope.user else f"project:{store.database}"
        if dry_run:
            report.queued_for_consolidation += len(plan.decay_queue)
        else:
            applied = _apply_in_slices(core, store, plan, {r.key: r for r in rows}, report)
            if applied is None:
                break  # the service is stopping: what was applied stays, the rest waits for the next sweep
            plan = applied
        report.by_scope[label] = plan.counts()
        for status, n in plan.counts().items():
            report.transitions[status] = report.transitions.get(status, 0) + n
        report.capped += plan.capped
        report.awaiting_forget += plan.below_forget
        report.half_lives_updated += len(plan.half_lives)
    if not dry_run and not core.closed and not core.stopping.is_set():
        with core.api_lock.background():
            if not core.closed:
                report.sessions_recovered = recover_stale_sessions(core)
                report.sessions_abandoned = _mark_abandoned_sessions(core)
        for _root, store in core.scopes.open_projects():
            with core.api_lock.background():
                if core.closed:
                    break
                report.promoted_to_user += promote_project_to_user(core, store)
    # The sweep read every row of every open store (sweep_rows) and dropped them: give those pages back (heap.py).
    release_freed_memory()
    report.took_ms = (time.perf_counter() - t0) * 1000
    return report


def _apply_in_slices(
    core: MemoryCore,
    store: ScopeStore,
    plan: lifecycle.Plan,
    planned: dict[str, lifecycle.Row],
    report: MaintenanceReport,
) -> lifecycle.Plan | None:
    """Apply ``plan`` a slice of memories at a time, each under the request lock; returns what was applied (None
    when the service closed meanwhile). A memory whose lifecycle fields changed since ``planned`` was read (a recall
    strengthened it, an edit, a forget) is skipped: its move was decided on what it no longer is."""
    keys = list(dict.fromkeys([*plan.moves, *plan.half_lives, *(k for k, _p in plan.decay_queue)]))
    decay = dict(plan.decay_queue)
    done = lifecycle.Plan(scope=plan.scope, capped=0, below_forget=plan.below_forget)
    size, i, queued = SWEEP_FIRST_SLICE, 0, 0
    while i < len(keys):
        with core.api_lock.background():
            if core.closed or core.stopping.is_set():
                return None
            t = time.perf_counter()
            part = keys[i : i + size]
            with store.mirror_lock:
                fresh = [k for k in part if _unchanged(store, planned[k])]
            moves = {k: plan.moves[k] for k in fresh if k in plan.moves}
            half_lives = {k: plan.half_lives[k] for k in fresh if k in plan.half_lives}
            queue = [(k, decay[k]) for k in fresh if k in decay]
            queued += store.memories.apply_sweep(core.now(), moves, half_lives, queue)
            took = time.perf_counter() - t
        report.slices += 1
        report.left_for_next_sweep += len(part) - len(fresh)
        done.moves.update(moves)
        done.half_lives.update(half_lives)
        done.decay_queue.extend(queue)
        done.capped += sum(1 for k in moves if k in plan.capped_keys)
        i += len(part)
        size = max(1, min(SWEEP_SLICE_MAX, int(len(part) * SWEEP_SLICE_S / max(took, 1e-4))))
    report.queued_for_consolidation += queued
    return done


def _unchanged(store: ScopeStore, row: lifecycle.Row) -> bool:
    """The memory is still what the sweep planned from (the mirror holds every field the rules read but the
    archive time, which only an archive or a restore changes, and those change the status too)."""
    lt = store.summaries.get(row.key)
    return lt is not None and (
        lt.memory_type,
        lt.status,
        lt.pinned,
        lt.importance,
        lt.access_count,
        lt.half_life_days,
        lt.created_at,
        lt.last_accessed_at,
    ) == (
        row.memory_type,
        row.status,
        row.pinned,
        row.importance,
        row.access_count,
        row.half_life_days,
        row.created_at,
        row.last_accessed_at,
    )


def sweep_rows(core: MemoryCore, store: ScopeStore) -> list[lifecycle.Row]:
    """What the sweep plans from, for every memory of this store not yet forgotten. When a memory was archived
    matters only to one the sweep may forget (archived, not pinned, under the forget line): read for those alone."""
    rows = [
        lifecycle.Row(
            key=key_of(r["id"]),
            memory_type=r["memory_type"],
            status=r["status"],
            pinned=bool(r.get("pinned")),
            importance=float(r["importance"]),
            access_count=int(r.get("access_count") or 0),
            half_life_days=float(r["half_life_days"]),
            created_at=r["created_at"],
            last_accessed_at=r["last_accessed_at"],
        )
        for r in store.mirror.lifecycle_rows()
    ]
    now, hl, scope = core.now(), core.half_lives(core.project_root_of(store)), store.scope.value
    # Under the line with either half-life the plan may use (the row's, or the one its type has now), with a
    # margin: the plan is made a moment later, and strength only falls.
    line = scoring.FORGET_BELOW * FORGET_MARGIN
    maybe = [
        r.key
        for r in rows
        if r.status == "archived"
        and not r.pinned
        and min(r.strength(now), r.strength(now, lifecycle.planned_half_life(scope, r, hl))) < line
    ]
    since = store.memories.archived_since(maybe)
    for r in rows:
        r.status_changed_at = since.get(r.key)
    return rows


def plan_sweep(
    core: MemoryCore, store: ScopeStore, rows: list[lifecycle.Row] | None = None
) -> lifecycle.Plan:
    """What the sweep would do to this store now (``rows``: from sweep_rows, read now when not given)."""
    root = core.project_root_of(store)
    cap = (
        core.settings.max_memories_user
        if store.scope == Scope.user
        else core.settings_for(root).max_memories_project
        if store.scope == Scope.project
        else None
    )
    return lifecycle.plan_transitions(
        sweep_rows(core, store) if rows is None else rows,
        store.scope.value,
        core.now(),
        core.half_lives(root),
        cap=cap,
        queued=store.memories.pending_queue_keys(),
    )


def _mark_abandoned_sessions(core: MemoryCore) -> int:
    """A session registered as active whose session store is gone (the process died before
    its promotion pass and the store was lost) is marked abandoned; nothing of it can be promoted."""
    live = {s.key for s in core.scopes.live_sessions()} | set(core.scopes.session_dbs_on_disk())
    n = 0
    for _root, pstore in core.scopes.open_projects():
        keys = pstore.q1("SELECT VALUE session_key FROM session_registry WHERE status = 'active'") or []
        lost = [k for k in keys if k not in live]
        if lost:
            pstore.q(
                "UPDATE session_registry SET status = 'abandoned', ended_at = $t, "
                "end_reason = 'session store lost' WHERE session_key IN $k",
                {"t": core.now(), "k": lost},
            )
            n += len(lost)
    return n


def open_projects(core: MemoryCore, project: str | None, all_projects: bool) -> None:
    """Open the given project's store, or every known project's that still exists, for a pass over all."""
    if project:
        core.project_store(project)
    if all_projects:
        core.scopes.open_all_projects()


# ── compaction (storage/compaction.py says why it is ours) ──
@api
def compact(core: MemoryCore, project: str | None = None, only_due: bool = False) -> CompactReport:
    """Rewrite store files with their live data only: text that forget erased, dropped sessions and the old
    row versions every update leaves behind go from the disk. ``only_due``: just the stores that have erased
    something or grew by half since their last compaction (the daemon runs this when idle).

    The copy runs in pieces under the request lock, taken after waiting requests, so recall goes on meanwhile
    (at 50,000 memories the copy takes minutes); a write to the store in between makes the copy stale, and the
    store is compacted again holding the lock throughout (`Connection.compact`)."""
    report = CompactReport()

    def stop() -> bool:
        return bool(core.stopping.is_set() or core.closed)

    with core.api_lock.background():
        wanted = core.project_store(project) if project else None
        connections = list(core.scopes.connections())
    for conn, stores in connections:
        if wanted is not None and wanted not in stores:
            continue
        if stop():
            report.stopped.append(str(conn.path))
            continue
        if (
            only_due and conn.compaction_running
        ):  # another caller is compacting it now (`engram import`'s, or ours)
            continue
        # One compaction of a store at a time, taken before the request lock: the retry below holds that lock
        # while it compacts, and a second compaction waiting for it between two pieces would otherwise deadlock.
        with conn.compaction_turn():
            _compact_one(core, conn, stores, only_due, stop, report)
    return report


def _compact_one(
    core: MemoryCore,
    conn: Connection,
    stores: list[ScopeStore],
    only_due: bool,
    stop: Callable[[], bool],
    report: CompactReport,
) -> None:
    with core.api_lock.background(), core.lock:
        # Held recall log rows count as written: if they alone make the store due, the compaction writes
        # them into the fresh copy (and nothing of them is left behind).
        if only_due and not conn.compaction_due(
            sum(s.bookkeeping.held_log_bytes(LOG_COMPACT_S) for s in stores)
        ):
            return
        t0 = time.perf_counter()
        erased = conn.erased
        for store in stores:
            store.drain()
            store.retrieval_log.prune(RETRIEVAL_LOG_KEEP)
    between_requests = True
    try:
        try:
            before, after = conn.compact(stop=stop, piece=core.api_lock.background)
        except CompactionOvertaken:
            between_requests = False
            with core.api_lock.background(), core.lock:
                for store in stores:
                    store.drain()
                before, after = conn.compact(stop=stop)
    except CompactionStopped:
        report.stopped.append(str(conn.path))
        return
    # The cold-start snapshot holds text too: after an erasure it is rewritten from the mirror (else it is
    # still valid, the copy keeps the change count it is checked against, and taking it costs time under the
    # lock).
    snapshots = [s for s in stores if erased and s.snapshot_path is not None and s.snapshot_path.exists()]
    for store in snapshots:  # the bookkeeping held during the copy, written a piece at a time off the lock:
        store.bookkeeping.drain_due(
            0.0
        )  # else taking the snapshot would apply it, all at once, under the lock
    with core.api_lock.background():
        writes = [store.snapshots.capture() for store in snapshots]
    for write in writes:  # encoding and writing it needs no lock
        if write is not None:
            write()
    report.stores.append(
        CompactedStore(
            path=str(conn.path),
            before_bytes=before,
            after_bytes=after,
            took_ms=(time.perf_counter() - t0) * 1000,
            copied_between_requests=between_requests,
        )
    )


@api
def redact_stored(
    core: MemoryCore, project: str | None = None, all_projects: bool = False, dry_run: bool = False
) -> dict[str, dict[str, int]]:
    """Redact what is already stored: every string field of every row of the user store, the project's (or
    every known project's) and the live sessions', rewritten only where redaction changes it (rows written
    by an older version, or before a newer rule); then the changed store files are compacted, so the old
    row versions leave the disk too. Rows changed per store and table."""
    report: dict[str, dict[str, int]] = {}
    # The request lock for the rewrite only: the compaction after takes its turn first, then the lock in slices.
    with core.api_lock, core.lock:
        open_projects(core, project, all_projects)
        for store in core.scopes.open_stores():
            label = "user" if store.scope == Scope.user else f"{store.scope.value}:{store.database}"
            report[label] = redact_store(store, core.embedder, dry_run=dry_run)
            if report[label] and not dry_run:
                store.conn.erased = True  # the old row versions still hold the secrets: compact them away
    if not dry_run:
        compact(core, only_due=True)
    return report
