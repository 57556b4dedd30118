"""The one job service: every background task (load, layout, scan, apply, profile, trace, tune) runs here.

A job is a plain callable fn(progress). progress(message, fraction) reports how far it is and raises
Cancelled once the job was cancelled, so a job stops at its next report; a job that can end early with
what it has (tune: the best set so far) also reads progress.stopped, set by stop(). Exactly one of on_done
/ on_failed / on_cancelled is called per job, through the service's dispatch (the window passes one that
queues the call into the UI thread; without one, callbacks run in the worker thread). A job submitted with
a kind supersedes the running job of that kind: the older one is cancelled and its result dropped, which
is how a newer layout request replaces an older one. No Qt here.
"""

from __future__ import annotations

import itertools
import threading
import traceback
from collections.abc import Callable
from typing import Any

from fuseview.errors import Cancelled
from fuseview.session.events import EmitterGroup

Dispatch = Callable[[Callable[[], None]], None]

DONE, FAILED, CANCELLED = "done", "failed", "cancelled"
_ids = itertools.count(1)


class Progress:
    """The progress callable a job function gets: call it with (message, fraction) between steps."""

    def __init__(self, job: JobHandle) -> None:
        self._job = job

    def __call__(self, message: str, fraction: float) -> None:
        job = self._job
        if job.cancelled:
            raise Cancelled("cancelled")
        job.message, job.fraction = message, float(fraction)
        job._service._deliver(job._progressed)

    @property
    def cancelled(self) -> bool:
        """Whether the job was cancelled (a job that waits on something else can poll this)."""
        return self._job.cancelled

    @property
    def stopped(self) -> bool:
        """Whether stop() was asked: the job should end soon and deliver what it has (its result is kept)."""
        return self._job._stop.is_set()

    @property
    def cancel_event(self) -> threading.Event:
        """Set once the job is cancelled (for code that takes a threading.Event, like runtime.profiling)."""
        return self._job._cancel

    def on_cancel(self, callback: Callable[[], None]) -> None:
        """Run callback (in the cancelling thread) when the job is cancelled, e.g. to kill a child process."""
        self._job._add_cancel_hook(callback)


class JobHandle:
    """One submitted job: cancel it, wait for it, read its last progress and its outcome."""

    def __init__(self, service: JobService, fn: Callable[[Progress], Any], kind: str | None, title: str,
                 callbacks: dict[str, Callable[..., Any] | None]) -> None:
        self.id = next(_ids)
        self.kind = kind
        self.title = title
        self.message = ""
        self.fraction = 0.0
        self.result: Any = None
        self.error: BaseException | None = None
        self.error_trace = ""
        self.outcome: str | None = None  # done, failed or cancelled, once delivered
        self._service = service
        self._fn = fn
        self._callbacks = callbacks
        self._cancel = threading.Event()
        self._stop = threading.Event()
        self._hooks: list[Callable[[], None]] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"fuseview-{kind or 'job'}-{self.id}",
                                        daemon=True)

    def __repr__(self) -> str:
        return f"JobHandle({self.id}, kind={self.kind!r}, title={self.title!r}, outcome={self.outcome!r})"

    @property
    def cancelled(self) -> bool:
        """Whether cancel() was called (the result, if any, is dropped)."""
        return self._cancel.is_set()

    @property
    def running(self) -> bool:
        """Whether the job's thread has not finished yet."""
        return self._thread.is_alive()

    @property
    def finished(self) -> bool:
        """Whether the outcome was delivered (on_done / on_failed / on_cancelled called)."""
        return self.outcome is not None

    def cancel(self) -> None:
        """Ask the job to stop at its next progress report; its result will be dropped either way."""
        with self._lock:
            if self._cancel.is_set():
                return
            self._cancel.set()
            hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()

    def stop(self) -> None:
        """Ask the job to end early and deliver what it has so far (only jobs that read progress.stopped)."""
        self._stop.set()

    @property
    def stop_requested(self) -> bool:
        """Whether stop() was called."""
        return self._stop.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the job's thread to end; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _add_cancel_hook(self, hook: Callable[[], None]) -> None:
        with self._lock:
            if not self._cancel.is_set():
                self._hooks.append(hook)
                return
        hook()

    def _run(self) -> None:  # the worker thread
        try:
            self.result = self._fn(Progress(self))
        except Cancelled:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the home thread, which shows it
            self.error = exc
            self.error_trace = traceback.format_exc()
        self._service._deliver(self._finish)

    def _progressed(self) -> None:  # the home thread
        if self.outcome is not None or self.cancelled:
            return
        cb = self._callbacks.get("progress")
        if cb is not None:
            cb(self.message, self.fraction)
        self._service.events.progress.emit(job=self)

    def _finish(self) -> None:  # the home thread: one outcome, decided now (a late cancel still counts)
        args: tuple[Any, ...]
        if self.cancelled:
            self.outcome, args = CANCELLED, ()
        elif self.error is not None:
            self.outcome, args = FAILED, (self.error,)
        else:
            self.outcome, args = DONE, (self.result,)
        self._service._finished(self)
        # views of the service (the job bar) hear of the end first: the outcome's callback sees them idle
        self._service.events.finished.emit(job=self, outcome=self.outcome)
        cb = self._callbacks.get(self.outcome)
        if cb is not None:
            cb(*args)


class JobService:
    """Runs job functions in worker threads; one place knows every running job, of every kind."""

    def __init__(self, dispatch: Dispatch | None = None) -> None:
        self.dispatch = dispatch
        self.events = EmitterGroup(self, ("started", "progress", "finished"))
        self._jobs: list[JobHandle] = []
        self._lock = threading.Lock()

    def submit(
        self,
        fn: Callable[[Progress], Any],
        kind: str | None = None,
        title: str = "",
        on_done: Callable[[Any], Any] | None = None,
        on_failed: Callable[[BaseException], Any] | None = None,
        on_cancelled: Callable[[], Any] | None = None,
        on_progress: Callable[[str, float], Any] | None = None,
        supersede: bool = True,
    ) -> JobHandle:
        """Start fn(progress) in a new thread; with a kind (and supersede), cancel that kind's running job."""
        if kind is not None and supersede:
            for old in self.active(kind):
                old.cancel()
        callbacks = {DONE: on_done, FAILED: on_failed, CANCELLED: on_cancelled, "progress": on_progress}
        job = JobHandle(self, fn, kind, title or kind or "job", callbacks)
        with self._lock:
            self._jobs.append(job)
        self.events.started.emit(job=job)
        job._thread.start()
        return job

    def active(self, kind: str | None = None) -> list[JobHandle]:
        """Jobs not yet cancelled whose outcome is not delivered (of one kind, or all), oldest first."""
        with self._lock:
            return [j for j in self._jobs if not j.cancelled and (kind is None or j.kind == kind)]

    def running(self, kind: str | None = None) -> list[JobHandle]:
        """Jobs whose thread has not ended yet (cancelled ones included, until they stop)."""
        with self._lock:
            jobs = list(self._jobs)
        return [j for j in jobs if j.running and (kind is None or j.kind == kind)]

    def cancel(self, kind: str | None = None) -> list[JobHandle]:
        """Cancel every active job (of one kind); returns them."""
        jobs = self.active(kind)
        for j in jobs:
            j.cancel()
        return jobs

    def shutdown(self, wait_s: float = 10.0) -> None:
        """Cancel every job and wait for their threads (called when the window closes)."""
        with self._lock:
            jobs = list(self._jobs)
        for j in jobs:
            j.cancel()
        for j in jobs:
            j.wait(wait_s)

    def _deliver(self, fn: Callable[[], None]) -> None:
        if self.dispatch is None:
            fn()
        else:
            self.dispatch(fn)

    def _finished(self, job: JobHandle) -> None:
        with self._lock:
            if job in self._jobs:
                self._jobs.remove(job)
