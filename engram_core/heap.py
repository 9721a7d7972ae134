"""The C heap of a long-running Engram process (the daemon): how many malloc arenas it may have, and handing
freed pages back to the system. Both are glibc's; elsewhere they do nothing."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import tempfile

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)

# Two arenas for the whole process. glibc gives each thread that allocates while others do an arena of its own
# (up to 8 per core), and the engine's worker threads, the request threads and the bookkeeper all allocate: each
# arena keeps its own freed pages. Two cut the daemon's RSS by about a fifth at no cost to recall
# (docs/benchmarks.md, "Fifth session: the daemon's heap").
ARENAS = 2


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "mallopt") else None
    except (OSError, AttributeError):
        return None


def limit_arenas(arenas: int = ARENAS) -> bool:
    """Cap the malloc arenas of this process. glibc fixes the cap when a second arena is first needed: call it
    before any other thread starts. True when the C library took it."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, arenas))


def release_freed_memory() -> None:
    """Hand the heap pages freed since the last call back to the system: glibc keeps freed pages mapped, so
    without this RSS steps up at every compaction."""
    libc = _libc()
    if libc is not None:
        with contextlib.suppress(OSError, AttributeError):
            libc.malloc_trim(0)


def arenas() -> int | None:
    """How many malloc arenas this process has (glibc's malloc_info); None without glibc."""
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_info"):
        return None
    libc.fdopen.restype = ctypes.c_void_p
    with tempfile.TemporaryFile() as tmp:
        fh = libc.fdopen(os.dup(tmp.fileno()), b"w")
        if not fh:
            return None
        libc.malloc_info(0, ctypes.c_void_p(fh))
        libc.fclose(ctypes.c_void_p(fh))
        tmp.seek(0)
        return len(re.findall(rb'<heap nr="\d+">', tmp.read()))


def rss_mb() -> float | None:
    """This process's resident set, in MB; None where /proc is not there."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return None
