"""The job service (fuseview.session.jobs) seen from Qt: callbacks queued into the UI thread."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from fuseview.session.jobs import JobHandle, JobService

# A job function gets progress(message, fraction); once cancelled, progress raises Cancelled.
JobFn = Callable[[Callable[[str, float], None]], Any]
Job = JobHandle


class QtDispatch(QObject):
    """Runs callables in the thread this object lives in (the UI thread): the job service's dispatch."""

    _call = Signal(object)

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._call.connect(self._run)  # emitted from a worker thread: Qt queues it into ours

    def __call__(self, fn: Callable[[], None]) -> None:
        self._call.emit(fn)

    def _run(self, fn: Callable[[], None]) -> None:
        fn()


def qt_job_service(parent: QObject | None = None) -> JobService:
    """A JobService whose callbacks run in the UI thread (parent keeps the dispatcher alive)."""
    return JobService(dispatch=QtDispatch(parent))


class JobRunner(QObject):
    """Deprecated adapter: jobs on a JobService with callbacks that get the job first.

    Every view submits to the session's JobService (`win.session.jobs.submit`); this adapter remains only
    for ui/tune_dialog.py (through `win.runner`) until the tune branch moves it onto the service.
    """

    def __init__(self, parent: QObject | None = None, service: JobService | None = None):
        super().__init__(parent)
        self.service = service if service is not None else qt_job_service(self)

    def start(
        self, fn: JobFn, name: str = "job", on_progress=None, on_done=None, on_failed=None, on_cancelled=None,
        kind: str | None = None,
    ) -> JobHandle:
        """Start fn(progress) in a new thread; handlers get (job, ...) in the UI thread.

        With a kind, the running job of that kind is superseded (cancelled, its result dropped).
        """
        box: list[JobHandle] = []

        def bind(cb, *_):
            return None if cb is None else (lambda *args: cb(box[0], *args))

        job = self.service.submit(
            fn, kind, name, on_done=bind(on_done), on_failed=bind(on_failed),
            on_cancelled=bind(on_cancelled), on_progress=bind(on_progress),
        )
        box.append(job)
        return job

    def running(self) -> list[JobHandle]:
        """Jobs whose thread has not finished yet."""
        return self.service.running()

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Cancel every job and wait for their threads (called when the window closes)."""
        self.service.shutdown(wait_ms / 1000)
