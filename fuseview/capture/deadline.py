"""A time limit for a capture: checked between calls, and enforced by an alarm inside a long one."""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

from fuseview.errors import FuseviewError


class Deadline:
    """time_limit_s from now; check() and the alarm raise FuseviewError once it has passed."""

    def __init__(self, time_limit_s: float) -> None:
        self.limit = float(time_limit_s)
        self.end = time.monotonic() + self.limit

    def _error(self, during: str) -> FuseviewError:
        return FuseviewError(f"compare_compile: the time limit of {self.limit:g} s passed during {during};"
                             " nothing was written (an earlier capture in that folder is kept)")

    def check(self, during: str) -> None:
        """FuseviewError when the limit has passed."""
        if time.monotonic() > self.end:
            raise self._error(during)

    @contextlib.contextmanager
    def alarm(self) -> Iterator[None]:
        """Interrupt the block when the limit passes (POSIX main thread; elsewhere only check() bounds it)."""
        usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
        if not usable:
            yield
            return

        def ring(_sig, _frame):
            raise self._error("a call that ran past it")

        old = signal.signal(signal.SIGALRM, ring)
        signal.setitimer(signal.ITIMER_REAL, max(self.end - time.monotonic(), 1e-3))
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
