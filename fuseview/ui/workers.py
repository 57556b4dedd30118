"""The job service (fuseview.session.jobs) seen from Qt: callbacks queued into the UI thread."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from fuseview.session.jobs import JobService


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
