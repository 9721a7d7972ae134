"""The lifecycle rules per scope (docs/memory-model.md, Lifecycle): what the maintenance sweep moves, and why.

The sweep is planned here, in pure Python on the service's clock, and applied by ``queries/sweep.surql``.
Planning apart from writing gives three things: a frozen clock in tests and simulations (the database's own
``time::now()`` is never consulted for a decision), a dry run that is exactly what the real sweep would do
(``engram maintain --dry-run``, the import preview), and one formula for strength (``scoring.memory_strength``).

Each memory moves at most one step per sweep, so nothing goes created → archived → forgotten at once, and an
archived memory is forgotten only after ``FORGET_GRACE_DAYS`` in the archive (time to notice and restore it).

| scope   | swept | forgets | half-life                         | archive rule (besides young-and-unimportant)        |
|---------|-------|---------|-----------------------------------|-----------------------------------------------------|
| session | no    | no      | per type                          | none: the session ends, promotion decides           |
| project | yes   | yes     | per type                          | strength < 0.1 and fewer than 2 accesses            |
| user    | yes   | never   | per type, at least 30 days        | strength < 0.02, older than 90 days, < 2 accesses   |
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .scoring import ARCHIVE_BELOW, CONSOLIDATE_BELOW, FORGET_BELOW, memory_strength

ACTIVATE_AFTER = timedelta(hours=1)  # created → active without a retrieval
YOUNG_IMPORTANCE_BELOW = 0.1  # created and this unimportant: straight to the archive
FORGET_GRACE_DAYS = 7.0  # an archived memory stays restorable at least this long
# Decay auto-queue: old, long unused and unimportant → consolidation queue ('decay').
DECAY_QUEUE_AGE_DAYS = 30.0
DECAY_QUEUE_IDLE_DAYS = 14.0
DECAY_QUEUE_IMPORTANCE_BELOW = 0.3
# An injection at SessionStart is a weaker use than a retrieval: it moves the last use halfway to now and
# counts no access (so it extends no half-life and never activates or revives a memory).
INJECTION_WEIGHT = 0.5
# Caps: the weakest searchable memories past the cap are archived, never a pinned one and never one that is
# new (younger than this) and not yet accessed.
NEW_MEMORY_DAYS = 1.0
LIVE_STATUSES = ("created", "active", "consolidated")


@dataclass(frozen=True)
class ScopeRules:
    swept: bool
    forgets: bool
    half_life_floor_days: float = 0.0
    archive_below: float = ARCHIVE_BELOW
    archive_min_age_days: float = 0.0


SCOPE_RULES: dict[str, ScopeRules] = {
    "session": ScopeRules(swept=False, forgets=False),
    "project": ScopeRules(swept=True, forgets=True),
    # The user's knowledge lasts: a 30-day half-life floor, archived late, never deleted unless the user resets.
    "user": ScopeRules(
        swept=True, forgets=False, half_life_floor_days=30.0, archive_below=0.02, archive_min_age_days=90.0
    ),
}


def half_life_for(scope: str, memory_type: str, half_lives: dict[str, float]) -> float:
    """The half-life a memory of this type has in this scope (the user scope never decays faster than 30 d)."""
    return max(float(half_lives[memory_type]), SCOPE_RULES[scope].half_life_floor_days)


def planned_half_life(scope: str, row: Row, half_lives: dict[str, float]) -> float:
    """The half-life a sweep judges this memory by: its type's current one, else the one it was stored with."""
    return (
        half_life_for(scope, row.memory_type, half_lives)
        if row.memory_type in half_lives
        else row.half_life_days
    )


def injected_last_use(last_accessed_at: datetime, now: datetime) -> datetime:
    """Where an injection moves a memory's last use: halfway from the last use to now (never backwards)."""
    if now <= last_accessed_at:
        return last_accessed_at
    return last_accessed_at + (now - last_accessed_at) * INJECTION_WEIGHT


@dataclass
class Row:
    """What the sweep needs of one memory."""

    key: str
    memory_type: str
    status: str
    pinned: bool
    importance: float
    access_count: int
    half_life_days: float
    created_at: datetime
    last_accessed_at: datetime
    status_changed_at: datetime | None = None

    def strength(self, now: datetime, half_life: float | None = None) -> float:
        return memory_strength(
            self.importance, half_life or self.half_life_days, self.access_count, self.last_accessed_at, now
        )


@dataclass
class Plan:
    """What one sweep of one scope does. ``moves`` maps a memory key to (new status, reason)."""

    scope: str
    moves: dict[str, tuple[str, str]] = field(default_factory=dict)
    half_lives: dict[str, float] = field(default_factory=dict)  # key → new half-life
    decay_queue: list[tuple[str, float]] = field(default_factory=list)  # (key, priority)
    capped: int = 0
    capped_keys: set[str] = field(default_factory=set)
    below_forget: int = 0  # archived (or about to be) and under 0.01: forgotten after the grace period

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _key, (to, _why) in self.moves.items():
            out[to] = out.get(to, 0) + 1
        return out


def plan_transitions(
    rows: Iterable[Row],
    scope: str,
    now: datetime,
    half_lives: dict[str, float],
    cap: int | None = None,
    queued: set[str] | frozenset[str] = frozenset(),
) -> Plan:
    """Decide every move of one sweep. ``queued``: keys already pending in the consolidation queue."""
    rules = SCOPE_RULES[scope]
    plan = Plan(scope=scope)
    if not rules.swept:
        return plan
    grace = timedelta(days=FORGET_GRACE_DAYS)
    live: list[tuple[float, Row]] = []
    for r in rows:
        want = planned_half_life(scope, r, half_lives)
        if abs(want - r.half_life_days) > 1e-9:
            plan.half_lives[r.key] = want
        s = r.strength(now, want)
        age_days = (now - r.created_at).total_seconds() / 86400.0
        idle_days = (now - r.last_accessed_at).total_seconds() / 86400.0
        move: tuple[str, str] | None = None
        if r.status == "archived":
            if s < FORGET_BELOW and not r.pinned:
                plan.below_forget += 1
                since = r.status_changed_at or r.created_at
                if rules.forgets and now - since >= grace:
                    move = (
                        "forgotten",
                        f"strength below {FORGET_BELOW} after {FORGET_GRACE_DAYS:g} days archived",
                    )
        elif r.pinned:
            if r.status == "created" and now - r.created_at >= ACTIVATE_AFTER:
                move = ("active", "one hour old")
        elif r.status == "created" and r.importance < YOUNG_IMPORTANCE_BELOW:
            move = ("archived", f"importance below {YOUNG_IMPORTANCE_BELOW} when young")
        elif (
            r.status in ("created", "active")
            and s < rules.archive_below
            and r.access_count < 2
            and age_days >= rules.archive_min_age_days
        ):
            move = ("archived", f"strength below {rules.archive_below}, rarely used")
        elif r.status == "consolidated" and s < ARCHIVE_BELOW:
            move = ("archived", "consolidated into a summary and decayed")
        elif r.status == "created" and now - r.created_at >= ACTIVATE_AFTER:
            move = ("active", "one hour old")
        if move is not None:
            plan.moves[r.key] = move
            if move[0] == "archived" and s < FORGET_BELOW:
                plan.below_forget += 1
            if move[0] in LIVE_STATUSES:  # activated: still counts against the cap
                live.append((s, r))
            continue
        # Worn but used enough to be worth keeping in summary form, or stale (the decay auto-queue): consolidate.
        worn = s < CONSOLIDATE_BELOW and r.access_count >= 2
        stale = (
            age_days > DECAY_QUEUE_AGE_DAYS
            and idle_days > DECAY_QUEUE_IDLE_DAYS
            and r.importance < DECAY_QUEUE_IMPORTANCE_BELOW
        )
        if r.status == "active" and not r.pinned and r.key not in queued and (worn or stale):
            plan.decay_queue.append((r.key, round(1.0 - r.importance, 6)))
        if r.status in LIVE_STATUSES:
            live.append((s, r))
    if cap is not None and len(live) > cap:
        excess = len(live) - cap
        protected_after = now - timedelta(days=NEW_MEMORY_DAYS)
        weakest = sorted(
            (
                x
                for x in live
                if not x[1].pinned and not (x[1].access_count == 0 and x[1].created_at > protected_after)
            ),
            key=lambda x: (x[0], x[1].key),
        )
        for _s, r in weakest[:excess]:
            plan.moves[r.key] = ("archived", f"over the {scope} cap of {cap} memories (weakest first)")
            plan.capped += 1
            plan.capped_keys.add(r.key)
    return plan


# ── the self-tuning schedule's counter: sessions that ended, per project (or the user store) ──
SESSION_COUNTER = "session_counter"


def state_value(store: Any, key: str, default: Any = None) -> Any:
    """A value kept in a store's evolution_state (``{v: …}`` under ``key``)."""
    rows = store.q1("SELECT VALUE value FROM evolution_state WHERE key = $k", {"k": key})
    return rows[0].get("v", default) if rows and isinstance(rows[0], dict) else default


def set_state_value(store: Any, key: str, value: Any) -> None:
    store.q(
        "UPSERT evolution_state SET key = $k, value = {v: $v}, updated_at = time::now() WHERE key = $k",
        {"k": key, "v": value},
    )
    if state_value(store, key) is None:
        store.q("CREATE evolution_state SET key = $k, value = {v: $v}", {"k": key, "v": value})


def sessions_ended(store: Any) -> int:
    return int(state_value(store, SESSION_COUNTER, 0) or 0)


def count_session_end(store: Any) -> int:
    """One more session ended in this store's project (end_session calls it, once per session)."""
    n = sessions_ended(store) + 1
    set_state_value(store, SESSION_COUNTER, n)
    return n
