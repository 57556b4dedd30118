"""Background jobs: result, failure, progress and cancel arrive in the UI thread."""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QObject, QThread

from fuseview.errors import FuseviewError
from fuseview.ui.workers import JobRunner


class Recorder(QObject):
    """Receives job signals in the UI thread (a bound method of a UI-thread QObject is queued)."""

    def __init__(self):
        super().__init__()
        self.events: list[tuple] = []
        self.threads: set = set()

    def progress(self, job, message, fraction):
        self.threads.add(QThread.currentThread())
        self.events.append(("progress", message, fraction))

    def done(self, job, result):
        self.threads.add(QThread.currentThread())
        self.events.append(("done", result))

    def failed(self, job, exc):
        self.events.append(("failed", str(exc)))

    def cancelled(self, job):
        self.events.append(("cancelled",))

    def slots(self):
        return self.progress, self.done, self.failed, self.cancelled


def test_instant_job_result_is_not_lost(qtbot):
    runner, rec = JobRunner(), Recorder()
    for i in range(20):  # a job that ends before start() returns must still be heard
        runner.start(lambda progress, i=i: i * 2, "fast", *rec.slots())
    qtbot.waitUntil(lambda: len(rec.events) == 20, timeout=10000)
    assert sorted(e[1] for e in rec.events) == [i * 2 for i in range(20)]
    assert rec.threads == {QThread.currentThread()}


def test_progress_then_result(qtbot):
    runner, rec = JobRunner(), Recorder()

    def work(progress):
        progress("half", 0.5)
        return "ok"

    runner.start(work, "p", *rec.slots())
    qtbot.waitUntil(lambda: bool(rec.events) and rec.events[-1][0] == "done", timeout=10000)
    assert rec.events == [("progress", "half", 0.5), ("done", "ok")]


def test_failure_is_reported(qtbot):
    runner, rec = JobRunner(), Recorder()

    def work(progress):
        raise FuseviewError("bad model")

    runner.start(work, "f", *rec.slots())
    qtbot.waitUntil(lambda: bool(rec.events), timeout=10000)
    assert rec.events == [("failed", "bad model")]


def test_cancel_stops_at_next_progress(qtbot):
    runner, rec = JobRunner(), Recorder()
    started, steps = threading.Event(), []

    def work(progress):
        started.set()
        for i in range(1000):
            progress("step", i / 1000)
            steps.append(i)
            time.sleep(0.005)
        return "finished"

    job = runner.start(work, "c", None, rec.done, rec.failed, rec.cancelled)
    assert started.wait(5)
    job.cancel()
    qtbot.waitUntil(lambda: bool(rec.events), timeout=10000)
    assert rec.events == [("cancelled",)]
    assert len(steps) < 1000
    runner.shutdown()
    assert runner.running() == []
