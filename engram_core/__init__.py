"""Engram core: the memory model, stores, retrieval and the service every front end uses.

This package never imports a UI toolkit (a test holds it to that)."""

import os

__version__ = "0.1.0"

# numpy's OpenBLAS starts one busy-waiting thread per core for every matrix product. On a shared two-core
# machine that turned a 1.4 ms scan of 10,000 vectors into 20 ms (bench/blas_threads.py); recall's products
# are small, so one thread is faster everywhere. Set before anything imports numpy (it reads this at load).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
