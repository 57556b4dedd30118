"""The window's job service: result, failure, progress and cancel arrive in the UI thread."""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QObject, QThread
from PySide6.QtWidgets import QStatusBar

from fuseview.errors import FuseviewError
from fuseview.ui.job_bar import JobBar
from fuseview.ui.workers import qt_job_service


class Recorder(QObject):
    """Receives job signals in the UI thread (a bound method of a UI-thread QObject is queued)."""

    def __init__(self):
        super().__init__()
        self.events: list[tuple] = []
        self.threads: set = set()

    def progress(self, message, fraction):
        self.threads.add(QThread.currentThread())
        self.events.append(("progress", message, fraction))

    def done(self, result):
        self.threads.add(QThread.currentThread())
        self.events.append(("done", result))

    def failed(self, exc):
        self.events.append(("failed", str(exc)))

    def cancelled(self):
        self.events.append(("cancelled",))

    def slots(self):
        return {"on_progress": self.progress, "on_done": self.done, "on_failed": self.failed,
                "on_cancelled": self.cancelled}


def test_instant_job_result_is_not_lost(qtbot):
    jobs, rec = qt_job_service(), Recorder()
    for i in range(20):  # a job that ends before start() returns must still be heard
        jobs.submit(lambda progress, i=i: i * 2, None, "fast", **rec.slots())
    qtbot.waitUntil(lambda: len(rec.events) == 20, timeout=10000)
    assert sorted(e[1] for e in rec.events) == [i * 2 for i in range(20)]
    assert rec.threads == {QThread.currentThread()}


def test_progress_then_result(qtbot):
    jobs, rec = qt_job_service(), Recorder()

    def work(progress):
        progress("half", 0.5)
        return "ok"

    jobs.submit(work, None, "p", **rec.slots())
    qtbot.waitUntil(lambda: bool(rec.events) and rec.events[-1][0] == "done", timeout=10000)
    assert rec.events == [("progress", "half", 0.5), ("done", "ok")]


def test_failure_is_reported(qtbot):
    jobs, rec = qt_job_service(), Recorder()

    def work(progress):
        raise FuseviewError("bad model")

    jobs.submit(work, None, "f", **rec.slots())
    qtbot.waitUntil(lambda: bool(rec.events), timeout=10000)
    assert rec.events == [("failed", "bad model")]


def test_cancel_stops_at_next_progress(qtbot):
    jobs, rec = qt_job_service(), Recorder()
    started, steps = threading.Event(), []

    def work(progress):
        started.set()
        for i in range(1000):
            progress("step", i / 1000)
            steps.append(i)
            time.sleep(0.005)
        return "finished"

    job = jobs.submit(work, None, "c", on_done=rec.done, on_failed=rec.failed, on_cancelled=rec.cancelled)
    assert started.wait(5)
    job.cancel()
    qtbot.waitUntil(lambda: bool(rec.events), timeout=10000)
    assert rec.events == [("cancelled",)]
    assert len(steps) < 1000
    jobs.shutdown()
    assert jobs.running() == []


def test_the_job_bar_follows_the_service_whoever_submits(qtbot):
    """The bar is a view: a job submitted straight to the service shows, progresses, and hides when done."""
    jobs, bar = qt_job_service(), QStatusBar()
    view = JobBar(jobs, bar)
    busy: list[bool] = []
    view.busy_changed.connect(busy.append)
    go, halfway = threading.Event(), threading.Event()

    def work(progress):
        progress("reading", 0.25)
        halfway.set()
        assert go.wait(10)
        return 1

    job = jobs.submit(work, "layout", "Opening demo.onnx")
    assert busy == [True] and view.busy
    assert halfway.wait(10)
    qtbot.waitUntil(lambda: view.progress.value() == 250, timeout=10000)
    assert view.describe() == "Opening demo.onnx: reading"
    jobs.submit(lambda progress: 2, "scan", "Scanning")  # a kind the bar does not follow
    go.set()
    qtbot.waitUntil(lambda: job.finished, timeout=10000)
    qtbot.waitUntil(lambda: busy == [True, False], timeout=10000)
    assert not view.busy and view.describe() == ""
    jobs.shutdown()
