"""Python's cyclic garbage collector held off while a burst of short-lived work runs (a scan, its imports).

A scan builds hundreds of thousands of small objects (index maps, shape lists, match states) and almost no
reference cycles; each time allocations pass the collector's threshold it walks the young objects, and now
and then all of them: on a 48-layer GPT-2 about an eighth of `fuseview scan`'s time went to passes that
found a few hundred cycles. Refcounting still frees everything at once; the collector resumes, as it was,
when the last holder leaves (the window scans in worker threads, so holders are counted).

`no_blas_threads` is the other start-up cost such a command need not pay: numpy's OpenBLAS starts a thread
per core as numpy is imported, for linear algebra a scan or `info` never does.
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_was_enabled = False


@contextmanager
def paused() -> Iterator[None]:
    """Hold the cyclic collector off for the block (nested and concurrent holders allowed)."""
    global _holders, _was_enabled
    with _lock:
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _was_enabled:
                gc.enable()


def no_blas_threads() -> None:
    """Before numpy's first import by a command that does no linear algebra (scan, info): one OpenBLAS
    thread, unless the user chose a count (one per core costs 30-40 ms CPU as numpy is imported)."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
