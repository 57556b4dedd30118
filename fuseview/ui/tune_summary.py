"""The bar over the candidates when a tune ends: the chosen model, its speed-up over the original and over
accept-all with their intervals, kept/rejected counts, and the buttons to apply the chosen set or save the
report. Its text is the report's own (FinalCheck.summary, Effect.text): the same figures as the CLI."""

from __future__ import annotations

from collections.abc import Callable
from html import escape
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QFrame, QHBoxLayout, QLabel, QMessageBox, QPushButton, QWidget

from fuseview.errors import FuseviewError

_COLORS = {"faster": "#1a7f37", "slower": "#b42318", "no difference": "#57606a", "cannot tell": "#9a6700"}


def summary_lines(report) -> tuple[str, str]:
    """(headline, details) of a tune report: what was chosen with both speed-ups, then counts and why."""
    f = report.final
    kept = len(report.accepted())
    details = f"{kept} kept, {len(report.decisions) - kept} rejected of {len(report.decisions)} candidates"
    if report.stopped:
        details += f" (stopped: {report.stopped})"
    if f.reason:
        details += f" · {f.reason}"
    c = report.config  # what the A/Bs and the output check ran at
    if "atol" in c:
        kind = "the float16 conversion" if c.get("float16") else "the model as opened"
        details += (f" · measured on {c.get('provider', '?')}, {kind}, outputs at atol {c['atol']:g},"
                    f" rtol {c['rtol']:g}")
    return f"Tune: {f.summary()} — verdict {f.verdict}", details


class TuneSummaryBar(QFrame):
    """Shown over the candidates when a tune ends; hidden until then."""

    def __init__(self, apply_chosen: Callable[[], None], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("tune_summary")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.report = None
        self._apply_chosen = apply_chosen
        lay = QHBoxLayout(self)
        lay.setContentsMargins(6, 4, 6, 4)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.apply_button = QPushButton("Apply chosen set")
        self.apply_button.setToolTip("Set the tune's decisions again and build the chosen model (Apply)")
        self.apply_button.clicked.connect(self._apply_chosen)
        self.save_button = QPushButton("Save report…")
        self.save_button.setToolTip("Write the tune report (JSON, as fuseview tune --json writes it)")
        self.save_button.clicked.connect(self.ask_save)
        lay.addWidget(self.text, 1)
        lay.addWidget(self.apply_button)
        lay.addWidget(self.save_button)
        self.hide()

    def show_report(self, report) -> None:
        """Fill the bar from a tune report and show it."""
        self.report = report
        head, details = summary_lines(report)
        color = _COLORS.get(report.final.verdict, "#57606a")
        self.text.setText(f"<b style='color:{color}'>{escape(head)}</b><br>{escape(details)}")
        self.text.setToolTip(f"{head}\n{details}")
        self.show()

    def plain_text(self) -> str:
        """What the bar says, as plain text (tests, the status bar)."""
        return self.text.toolTip()

    def save_to(self, path: str | Path) -> Path:
        """Write the report (atomically, through TuneReport.save)."""
        if self.report is None:
            raise FuseviewError("no tune report to save")
        return self.report.save(path)

    def ask_save(self) -> None:
        """Ask where, then save; a failure is a dialog and the window stays usable."""
        path, _ = QFileDialog.getSaveFileName(self, "Save tune report", "tune.json", "JSON (*.json)")
        if not path:
            return
        try:
            self.save_to(path)
        except (FuseviewError, OSError) as exc:
            QMessageBox.warning(self, "Save report", f"Could not save the report: {exc}")


