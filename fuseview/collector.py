"""Python's cyclic garbage collector held off while a burst of short-lived work runs (a scan, its imports).

A scan builds hundreds of thousands of small objects (index maps, shape lists, match states) and almost no
reference cycles; each time allocations pass the collector's threshold it walks the young objects, and now
and then all of them: on a 48-layer GPT-2 about an eighth of `fuseview scan`'s time went to passes that
found a few hundred cycles. Refcounting still frees everything at once; the collector resumes, as it was,
when the last holder leaves (the window scans in worker threads, so holders are counted).

`no_blas_threads` is the other start-up cost such a command need not pay: numpy's OpenBLAS starts a thread
per core as numpy is imported, for linear algebra a scan or `info` never does.

`import_onnx_shallow` is the third. CPython keeps Python frames on a data stack of 16 KiB chunks and frees a
chunk as soon as a call returns across its edge. onnx's import (numpy's typing module: thousands of small
calls) run from a dozen frames deep sat on such an edge: 1,300 mmap/munmap pairs, each with its page faults
(`strace -c -e trace=mmap,munmap python -m fuseview info DEMO`: 3,046 calls, 364 when onnx is imported from
the command's top), about 5 % of `info`'s CPU; the instructions callgrind counts do not show it.
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


def import_onnx_shallow() -> None:
    """Import onnx (numpy with it) from a command's top, a few frames deep (see the module's note)."""
    import onnx  # noqa: F401
