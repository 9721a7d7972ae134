"""Python's cyclic garbage collector, paused while a mirror is built; the freed heap handed back after it.

Loading a mirror makes hundreds of thousands of long-lived objects (rows, sets, dictionaries) in one go. Each
allocation burst triggers a collection, and the older generations' collections walk the whole growing heap again,
none of which can free anything: most of a large store's opening time went there (docs/benchmarks.md has the
figures). Reference counting still frees everything as usual meanwhile.

A build also frees much of what it made (decoded snapshots, query answers), and glibc keeps those pages mapped:
when the last build ends they go back to the system (heap.py).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

from .heap import release_freed_memory

_lock = threading.Lock()
_pausing = 0  # how many threads are inside paused_collector()
_was_enabled = False  # the collector's state when the first of them came in


@contextlib.contextmanager
def paused_collector() -> Iterator[None]:
    """No cyclic collection inside this block (nor in other threads meanwhile); the collector's own state is put
    back when the last such block ends, so that two loads overlapping in threads do not re-enable it early."""
    global _pausing, _was_enabled
    with _lock:
        if _pausing == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _pausing += 1
    try:
        yield
    finally:
        with _lock:
            _pausing -= 1
            last = _pausing == 0
            if last and _was_enabled:
                gc.enable()
        if last:
            release_freed_memory()
