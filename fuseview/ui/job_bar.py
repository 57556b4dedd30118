"""The window's progress bar and Cancel button: a view of the session's job service events (layout, apply)."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QStatusBar

from fuseview.session.jobs import JobHandle, JobService

# the kinds of work the bar follows; a newer job of a kind supersedes only that kind's running job, so
# collapsing a group (a layout) never cancels an Apply (the scan and onnxruntime check run unseen)
JOB_KINDS = ("layout", "apply")


class JobBar(QObject):
    """Shows the newest running job of JOB_KINDS in the status bar; it only follows the service's events.

    Jobs are submitted to the service (by the Session or the window); the bar hears started, progress and
    finished, whoever submitted them, and its Cancel cancels the newest one.
    """

    busy_changed = Signal(bool)

    def __init__(self, jobs: JobService, bar: QStatusBar, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.jobs = jobs
        # what runs and its stage in words, beside a bar that only has to hold "100%"
        self.stage = QLabel("")
        self.stage.setObjectName("job_stage")
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setFixedWidth(140)
        self.progress.setTextVisible(True)
        self.progress.setFormat("%p%")
        self.cancel_button = QPushButton("Cancel")
        bar.addPermanentWidget(self.stage)
        bar.addPermanentWidget(self.progress)
        bar.addPermanentWidget(self.cancel_button)
        self.stage.hide()
        self.progress.hide()
        self.cancel_button.hide()
        self._busy = False
        jobs.events.started.connect(self._on_started)
        jobs.events.progress.connect(self._on_event)
        jobs.events.finished.connect(self._on_event)

    def _on_started(self, event) -> None:
        if event.job.kind in JOB_KINDS:
            self._busy = True
            self.show()
            self.busy_changed.emit(True)

    def _on_event(self, event) -> None:
        if event.job.kind in JOB_KINDS:
            self._changed()

    def active(self, kind: str | None = None) -> list[JobHandle]:
        """The window's running jobs (of one kind), oldest first."""
        return [j for j in self.jobs.active(kind) if j.kind in JOB_KINDS]

    @property
    def busy(self) -> bool:
        """Whether a load, layout or apply is running."""
        return bool(self.active())

    def cancel(self, kind: str | None = None) -> JobHandle | None:
        """Cancel the newest running job (or the one of this kind); returns it, None when none runs."""
        jobs = self.active(kind)
        if not jobs:
            return None
        jobs[-1].cancel()  # the thread stops at its next progress report; its result is dropped
        self._changed()
        return jobs[-1]

    def describe(self, stage: bool = True) -> str:
        """The newest running job in words, e.g. 'Opening gpt2.onnx: inferring shapes' ('' when none)."""
        jobs = self.active()
        if not jobs:
            return ""
        job = jobs[-1]
        if stage and job.message and job.message != job.title:
            return f"{job.title}: {job.message}"
        return f"{job.title}…"

    def show(self) -> None:
        """The bar follows the newest running job; it hides when none is left."""
        jobs = self.active()
        if not jobs:
            self.stage.hide()
            self.progress.hide()
            self.cancel_button.hide()
            return
        self.stage.setText(self.describe())
        # the stage is what the user reads: the status bar squeezes its other widgets before this one
        self.stage.setMinimumWidth(self.stage.sizeHint().width())
        self.progress.setValue(int(jobs[-1].fraction * 1000))
        self.stage.show()
        self.progress.show()
        self.cancel_button.show()

    def _changed(self) -> None:
        self.show()
        if self._busy and not self.busy:
            self._busy = False
            self.busy_changed.emit(False)
