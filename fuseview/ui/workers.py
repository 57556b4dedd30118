"""Run a plain function off the UI thread, with progress, cancel and a result signal."""

from __future__ import annotations

import threading
import traceback
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, Signal


class Cancelled(Exception):
    """Raised inside a job's progress callback once the job was cancelled."""


# A job function gets progress(message, fraction); once cancelled, progress raises Cancelled.
JobFn = Callable[[Callable[[str, float], None]], Any]


class Job(QThread):
    """One background call of fn(progress); emits progress, then exactly one of done / failed / cancelled."""

    # Every signal carries the job first, so a receiver can drop news from a job it no longer waits for.
    progress = Signal(object, str, float)
    done = Signal(object, object)  # job, result
    failed = Signal(object, object)  # job, exception
    cancelled = Signal(object)

    def __init__(self, fn: JobFn, name: str = "job", parent: QObject | None = None):
        super().__init__(parent)
        self.fn = fn
        self.name = name
        self._cancel = threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.error_trace = ""

    def cancel(self) -> None:
        """Ask the job to stop at its next progress report; its result will be dropped either way."""
        self._cancel.set()

    @property
    def is_cancelled(self) -> bool:
        """Whether cancel() was called."""
        return self._cancel.is_set()

    def _report(self, message: str, fraction: float) -> None:
        if self._cancel.is_set():
            raise Cancelled()
        self.progress.emit(self, message, float(fraction))

    def run(self) -> None:  # runs in the worker thread
        try:
            result = self.fn(self._report)
        except Cancelled:
            self.cancelled.emit(self)
            return
        except BaseException as exc:  # noqa: BLE001 - handed to the UI thread, which shows it
            self.error = exc
            self.error_trace = traceback.format_exc()
            if self._cancel.is_set():
                self.cancelled.emit(self)
            else:
                self.failed.emit(self, exc)
            return
        self.result = result
        if self._cancel.is_set():
            self.cancelled.emit(self)
        else:
            self.done.emit(self, result)


class JobRunner(QObject):
    """Starts jobs and keeps them alive until their thread ends (a QThread must not die while running)."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._jobs: list[Job] = []

    def start(
        self, fn: JobFn, name: str = "job", on_progress=None, on_done=None, on_failed=None, on_cancelled=None
    ) -> Job:
        """Start fn(progress) in a new thread, its signals connected first (a fast job cannot finish unheard).

        Give bound methods of UI-thread QObjects as handlers: Qt then queues each call into the UI thread.
        """
        job = Job(fn, name)
        self._jobs.append(job)
        for signal, slot in (
            (job.progress, on_progress),
            (job.done, on_done),
            (job.failed, on_failed),
            (job.cancelled, on_cancelled),
        ):
            if slot is not None:
                signal.connect(slot)
        job.finished.connect(self._reap)
        job.start()
        return job

    def _reap(self) -> None:
        for job in [j for j in self._jobs if j.isFinished()]:
            self._jobs.remove(job)
            job.deleteLater()

    def running(self) -> list[Job]:
        """Jobs whose thread has not finished yet."""
        return [j for j in self._jobs if j.isRunning()]

    def shutdown(self, wait_ms: int = 10000) -> None:
        """Cancel every job and wait for their threads (called when the window closes)."""
        for job in list(self._jobs):
            job.cancel()
        for job in list(self._jobs):
            job.wait(wait_ms)
