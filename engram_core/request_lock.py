"""The request lock: one holder at a time, reentrant, and requests go before background work.

The daemon answers one API request at a time (each is atomic). Background work (the maintenance sweep, a
compaction) takes the same lock, but in short slices through :meth:`RequestLock.background`, which waits while a
request is waiting: a plain ``RLock`` gives no such order, and a sweep that released it between slices took it
straight back, so a recall could wait for the whole sweep. Here a request waits for at most the slice that is
running.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from .storage import locks


class RequestLock:
    """A reentrant lock whose :meth:`background` acquisition yields to every waiting foreground one."""

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._waiting = 0  # foreground acquisitions waiting for the lock

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        me = threading.get_ident()
        with self._cv:
            if self._owner == me:
                self._depth += 1
                return True
            locks.before_acquire(locks.REQUEST, id(self), "the request lock")
            if self._owner is not None and not blocking:
                return False
            self._waiting += 1
            try:
                ok = self._cv.wait_for(lambda: self._owner is None, None if timeout < 0 else timeout)
            finally:
                self._waiting -= 1
            if not ok:
                self._cv.notify_all()  # a background acquisition may have waited for this one to go first
                return False
            self._owner, self._depth = me, 1
            locks.acquired(locks.REQUEST, id(self), "the request lock")
            return True

    def release(self) -> None:
        with self._cv:
            if self._owner != threading.get_ident():
                raise RuntimeError("cannot release a RequestLock this thread does not hold")
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                locks.released(id(self))
                self._cv.notify_all()

    def __enter__(self) -> RequestLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextlib.contextmanager
    def background(self) -> Iterator[None]:
        """Hold the lock for one slice of background work, taken only when no request waits for it (a thread
        that already holds it takes it again at once)."""
        me = threading.get_ident()
        with self._cv:
            if self._owner != me:
                locks.before_acquire(locks.REQUEST, id(self), "the request lock")
                self._cv.wait_for(lambda: self._owner is None and not self._waiting)
                self._owner = me
                locks.acquired(locks.REQUEST, id(self), "the request lock")
            self._depth += 1
        try:
            yield
        finally:
            self.release()

    def waiting(self) -> int:
        """Foreground acquisitions waiting now (a background slice may end early for them)."""
        return self._waiting
