"""The lock order, written once, and the lock that checks it.

A thread that holds several of these locks took them in this order (a lower rank first); taking one of a lower
rank while holding one of a higher rank can deadlock against a thread that takes them the right way round:

    COMPACTION_TURN  Connection.compaction_turn: one compaction of a store's files at a time; taken before the
                     request lock, since a compaction holds that lock while it retries
    REQUEST          the daemon's request lock (request_lock.RequestLock, also `MemoryCore.api_lock`)
    SESSION          Session.lock: one live session's end (its promotion pass) at a time
    SCOPES           Scopes.lock (`MemoryCore.lock`): which stores are open
    DRAIN            ScopeStore.drain_lock: pending bookkeeping applied (held by every `q`, which reads what it wrote)
    CONNECTION       Connection.lock: the engine's one session and its `USE` state
    MIRROR           ScopeStore.mirror_lock: the memory mirror (memory summaries, search index, hash index)
    ROW_MIRROR       RowMirror.lock: the full rows recall returns
    SNAPSHOT_WRITE   a store's vector snapshot file being written

`search_index.SearchIndex` keeps a lock of its own below all of these (nothing is taken while it is held).
Two locks of one rank (two stores' connections) are never nested.

`OrderedLock` is a lock (reentrant or not) with a rank. When checking is on (`check_order(True)`, or the
environment variable ENGRAM_LOCK_ORDER=1: the test suite sets it), each thread records the ranks it holds and
an acquisition out of order raises `LockOrderError`. Off, it costs one flag test per acquisition.
"""

from __future__ import annotations

import os
import threading
from typing import Any

COMPACTION_TURN = 5
REQUEST = 10
SESSION = 15
SCOPES = 20
DRAIN = 30
CONNECTION = 40
MIRROR = 50
ROW_MIRROR = 60
SNAPSHOT_WRITE = 70

_checking = os.environ.get("ENGRAM_LOCK_ORDER") == "1"
_held = threading.local()


class LockOrderError(RuntimeError):
    """A lock was taken while the thread held one that comes after it in the written order."""


def check_order(on: bool) -> None:
    """Record held ranks per thread and raise on an out-of-order acquisition (tests)."""
    global _checking
    _checking = on


def checking() -> bool:
    return _checking


def _stack() -> list[tuple[int, int, str]]:
    stack: list[tuple[int, int, str]] | None = getattr(_held, "stack", None)
    if stack is None:
        stack = _held.stack = []
    return stack


def before_acquire(rank: int, ident: int, name: str) -> None:
    """Raise if this thread holds a lock ranked after ``rank`` (a lock it holds already may be taken again)."""
    if not _checking:
        return
    stack = _stack()
    if any(i == ident for _, i, _ in stack):
        return
    worse = [(r, n) for r, _, n in stack if r > rank]
    if worse:
        raise LockOrderError(
            f"{name} (rank {rank}) taken while holding {', '.join(f'{n} (rank {r})' for r, n in worse)}: "
            "see engram_core/storage/locks.py for the order"
        )


def acquired(rank: int, ident: int, name: str) -> None:
    if _checking:
        _stack().append((rank, ident, name))


def released(ident: int) -> None:
    if not _checking:
        return
    stack = _stack()
    for i in range(len(stack) - 1, -1, -1):
        if stack[i][1] == ident:
            del stack[i]
            return


class OrderedLock:
    """A lock with a place in the order above (``reentrant``: an RLock, else a Lock)."""

    def __init__(self, rank: int, name: str, *, reentrant: bool = True) -> None:
        self.rank = rank
        self.name = name
        self._lock: Any = threading.RLock() if reentrant else threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        before_acquire(self.rank, id(self), self.name)
        got = bool(self._lock.acquire(blocking, timeout))
        if got:
            acquired(self.rank, id(self), self.name)
        return got

    def release(self) -> None:
        self._lock.release()
        released(id(self))

    def __enter__(self) -> OrderedLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
