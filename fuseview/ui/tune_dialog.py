"""Fusion → Tune…: the settings dialog, the tune as a background job with progress and stop, and its results
set as the candidates' decisions and measured effects (the user can still override every one)."""

from __future__ import annotations

import os
from dataclasses import replace

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QProgressDialog,
    QSpinBox,
    QWidget,
)

from fuseview.session.exports import TuneSettings
from fuseview.session.fusion_target import precision_label
from fuseview.stats import level_text
from fuseview.ui.candidates_panel import EFFECT_COLUMN
from fuseview.ui.target_selector import TargetSelector, environment_text
from fuseview.ui.tune_summary import TuneSummaryBar, summary_lines

PROVIDERS = ("auto", "cpu", "cuda")
ORT_LEVELS = ("all", "extended", "basic", "disabled")


class TuneDialog(QDialog):
    """Where the model is deployed (provider, threads, onnxruntime level) and how long tune may search."""

    def __init__(self, parent: QWidget | None = None, settings: TuneSettings | None = None,
                 precision: str = ""):
        """precision: what the tune measures (the session's precision_label); set by Fuse for's float16."""
        super().__init__(parent)
        self.setWindowTitle("Tune fusions by measurement")
        s = settings or TuneSettings()
        form = QFormLayout(self)
        self.precision = QLabel(precision or "the model as opened")
        self.precision.setWordWrap(True)
        self.precision.setToolTip("the deployment precision the A/Bs and the output check run at; the"
                                  " candidates dock's float16 box switches it (the conversion on show)")
        self.provider = QComboBox()
        self.provider.addItems(PROVIDERS)
        self.provider.setCurrentText(s.provider)
        self.threads = QSpinBox()
        self.threads.setRange(0, os.cpu_count() or 1)
        self.threads.setValue(s.threads)
        self.threads.setSpecialValueText("onnxruntime's default")
        self.ort_opt = QComboBox()
        self.ort_opt.addItems(ORT_LEVELS)
        self.ort_opt.setCurrentText(s.ort_opt)
        self.ort_opt.setToolTip("onnxruntime's graph optimization level the model is deployed with"
                                " (all is onnxruntime's default)")
        self.budget = QSpinBox()
        self.budget.setRange(5, 3600)
        self.budget.setSuffix(" s")
        self.budget.setValue(int(s.budget_s))
        self.keep_neutral = QCheckBox("Also keep conflicting alternatives with no measurable difference")
        self.keep_neutral.setToolTip("accept-all's fusions are kept unless measured slower; this is about the"
                                     " candidates accept-all leaves out because they conflict")
        self.keep_neutral.setChecked(s.keep_neutral)
        self.target = TargetSelector(self)
        for label, w in (("Target", self.target), ("Provider", self.provider), ("Precision", self.precision),
                         ("Threads", self.threads),
                         ("ORT optimization", self.ort_opt), ("Budget", self.budget),
                         ("", self.keep_neutral)):
            form.addRow(label, w)
        ok, cancel = QDialogButtonBox.StandardButton.Ok, QDialogButtonBox.StandardButton.Cancel
        buttons = QDialogButtonBox(ok | cancel)
        buttons.button(ok).setText("Tune")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def settings(self, dims: dict[str, int] | None = None) -> TuneSettings:
        """The TuneSettings the dialog shows."""
        return TuneSettings(provider=self.provider.currentText(), threads=self.threads.value(),
                            ort_opt=self.ort_opt.currentText(), budget_s=float(self.budget.value()),
                            keep_neutral=self.keep_neutral.isChecked(), dims=dict(dims or {}))


def effect_cell(decision) -> tuple[str, str]:
    """The candidates dock's 'Measured effect' text and tooltip for one tune decision."""
    e = decision.effect
    alone = decision.stage != "final"  # the final check times whole models, not this candidate
    text = "-" if e is None else f"{e.speedup_p50:.2f}x {e.verdict}" if alone else "not measured alone"
    tip = [f"tune: {decision.decision} — {decision.reason}"]
    if e is not None and not alone:
        tip.append(f"not measured alone: the whole chosen model against {e.against}: {e.text()}")
    elif e is not None:
        ci = f"{level_text(e.level)} CI, " if e.level else ""
        tip.append(f"time without ÷ time with: {e.text()} ({ci}{e.runs} runs in {e.sessions} sessions,"
                   f" against {e.against})")
    if decision.max_abs is not None:
        tip.append(f"max |diff| {decision.max_abs:.2g}, max rel {decision.max_rel:.2g}")
    return text, "\n".join(tip)


class TuneRunner(QObject):
    """Fusion → Tune…: asks for the settings, starts Session.tune with a progress dialog (Stop keeps the
    best set so far) and shows what it decided: measured effects, the summary bar and the status line."""

    finished = Signal(object)  # the TuneResult, after its decisions were set
    failed = Signal(str)

    def __init__(self, workbench) -> None:
        super().__init__(workbench)
        self.wb = workbench
        self.session = workbench.win.session
        self.job = None
        self.progress_dialog: QProgressDialog | None = None
        self.last_settings = TuneSettings()
        self.summary = TuneSummaryBar(self.apply_chosen)
        # over the candidates, under their filters: the tune's result in sight where its decisions are
        body = workbench.panel.widget()
        if body is not None and body.layout() is not None:
            body.layout().insertWidget(1, self.summary)
        events = self.session.events
        events.tuned.connect(lambda e: self._done(e.result))
        events.tune_failed.connect(lambda e: self._failed(e.error))
        events.tune_cancelled.connect(lambda e: self._close_progress())
        self.session.jobs.events.progress.connect(self._progress)

    @property
    def result(self):  # noqa: ANN201 - a TuneResult
        """The open model's last tune (the session keeps it; a new model drops it)."""
        return self.session.tune_result

    def install(self, menu) -> None:
        """Add Fusion → Tune… to a menu."""
        act = menu.addAction("&Tune…")
        act.setToolTip("Decide every candidate by measurement at the deployment's settings (fuseview tune)")
        act.triggered.connect(self.ask)
        self.action = act

    def ask(self) -> None:
        """Show the settings dialog and start the tune."""
        if self.session.source_path() is None or self.session.decisions is None:
            self.session.set_status("Open a model and wait for its scan before tuning.", 6000)
            return
        dialog = TuneDialog(self.wb.win, self.dialog_settings(), precision_label(self.session))
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.start(dialog.settings(), dialog.target.remember())

    def dialog_settings(self) -> TuneSettings:
        """The last settings, on the provider the candidates are fused for when one is chosen there."""
        chosen = self.session.fusion_settings.provider
        return replace(self.last_settings, provider=chosen) if chosen in PROVIDERS[1:] else self.last_settings

    def start(self, settings: TuneSettings, target: str = "local"):
        """Start Session.tune with a progress dialog; its Stop keeps the best set so far."""
        if self.job is not None and self.job.running:
            return None
        job = self.session.tune(settings, target)
        if job is None:
            return None
        self.job, self.last_settings = job, settings
        dlg = QProgressDialog("Tuning…", "Stop (keep the best so far)", 0, 1000, self.wb.win)
        dlg.setWindowTitle("Tune")
        dlg.setWindowModality(Qt.WindowModality.WindowModal)
        dlg.setMinimumDuration(0)
        dlg.canceled.connect(job.stop)
        self.progress_dialog = dlg
        return job

    def cancel(self) -> None:
        """Stop the search; the result (the best set so far) still arrives."""
        if self.job is not None:
            self.job.stop()

    def _close_progress(self) -> None:
        if self.progress_dialog is not None:
            self.progress_dialog.canceled.disconnect()
            self.progress_dialog.close()
            self.progress_dialog.deleteLater()
            self.progress_dialog = None

    def _progress(self, event) -> None:
        job = event.job
        if job is self.job and self.progress_dialog is not None:
            self.progress_dialog.setLabelText(job.message)
            self.progress_dialog.setValue(int(1000 * min(max(job.fraction, 0.0), 0.999)))

    def _done(self, result) -> None:
        self._close_progress()
        self.show_result(result)
        self.finished.emit(result)

    def _failed(self, exc) -> None:
        self._close_progress()
        self.session.set_status(f"Tune failed: {exc}", 15000)
        self.failed.emit(str(exc))

    def show_result(self, result) -> None:
        """Show each candidate's measured effect (the session set the decisions), the summary, the status."""
        d = self.wb.session.decisions
        if d is None:
            return
        rep = result.report
        mine = [x for x in rep.decisions if x.candidate in d.by_id]
        self.wb.panel.set_effects({x.candidate: effect_cell(x) for x in mine})
        # the measured effect next to the decision (third on screen), not past the scroll edge
        header = self.wb.panel.table.horizontalHeader()
        header.moveSection(header.visualIndex(EFFECT_COLUMN), 2)
        self.wb.panel.table.resizeColumnToContents(EFFECT_COLUMN)  # "1.09x cannot tell", not elided
        self.summary.show_report(rep)
        head, _details = summary_lines(rep)
        stopped = f" (stopped: {rep.stopped})" if rep.stopped else ""
        stopped += f"; {environment_text(rep.environment)}"
        self.session.set_status(f"{head}{stopped}; Apply chosen set builds it", 30000)

    def apply_chosen(self) -> None:
        """Set the tune's decisions again (the user may have changed some) and build the chosen model."""
        if self.result is None or self.wb.session.decisions is None:
            return
        d = self.wb.session.decisions
        d.set_many({x.candidate: x.decision for x in self.result.report.decisions if x.candidate in d.by_id})
        self.wb.panel.refresh()  # the table shows the tune's decisions again (the graph: decisions event)
        if not self.wb.apply():  # the original is chosen: nothing to build, and the bar says why
            why = self.result.report.final.reason
            self.session.set_status(
                f"Nothing to apply: the chosen model is the original ({why})", 15000)
