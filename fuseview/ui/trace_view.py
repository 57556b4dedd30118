"""The trace workspace: two profiler traces (before/after torch.compile) as plots and tables, in a window.

Its own window (not a dock under the ONNX panes). The top half turns a `fuseview.trace_compare` report
into rows (no Qt); the bottom half shows them. The workspace is a view of the session: File → Compare
Traces…, Open capture… (a compare_compile folder, with its provenance log) and dropping .json files call
Session.open_traces (the pipeline `fuseview trace` runs, as a job), and it draws the traces_opened event.
Times are total time per step (an event with its children, as the CLI shows) unless "self" is chosen.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QMimeData, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from fuseview.errors import FuseviewError
from fuseview.reports import TraceReport
from fuseview.session.exports import OpenedTraces
from fuseview.session.jobs import JobHandle
from fuseview.session.session import Session
from fuseview.traces.categories import CATEGORIES, STEP
from fuseview.traces.display import shown_events, shown_name
from fuseview.ui import dialogs
from fuseview.ui import profile_plots as plots
from fuseview.ui.dialogs import export_plots_button
from fuseview.ui.trace_join import JoinPanel
from fuseview.ui.trace_kernels import KERNEL, REPLACED, KernelPanel
from fuseview.ui.workers import qt_job_service

BEFORE, AFTER = "before", "after"
TOTAL, SELF = "total time per step (with children)", "self time per step (children excluded)"
# the profile plots pick a bar's colour by its series name: give the trace series the same two colours
for _name, _like in ((BEFORE, plots.ORIGINAL), (AFTER, plots.FUSED), (REPLACED, plots.ORIGINAL),
                     (KERNEL, plots.FUSED)):
    plots.COLORS.setdefault(_name, plots.COLORS[_like])
ADDED, REMOVED, BOTH = "added", "removed", "in both"
COLUMNS = ["event", "category", "change", "count/step before", "count/step after", "total µs/step before",
           "total µs/step after", "Δ total µs/step (after − before)", "self µs/step before",
           "self µs/step after"]


# ------------------------------------------------------------------------------------ report -> rows
def event_rows(report: dict, python: bool = False) -> list[dict]:
    """One row per event name over both traces: per-step counts and times, added/removed/in both.

    Python-function frames only with python set; never a frame of fuseview's own capture; a frame's path
    relative to the working folder."""
    traces = report["traces"]
    rows: dict[str, dict] = {}
    for t in traces:
        steps = max(t["steps"], 1)
        for e in shown_events(t["events"], python):
            r = rows.setdefault(e["name"], {"name": shown_name(e["name"]), "category": e["category"],
                                            BEFORE: None, AFTER: None, "count_before": 0.0,
                                            "count_after": 0.0, "self_before": None, "self_after": None})
            r[t["role"]] = e["per_step_us"]
            r[f"self_{t['role']}"] = e["self_us"] / steps
            r[f"count_{t['role']}"] = e["count"] / steps
    for r in rows.values():
        if len(traces) == 1:
            r["change"] = ""
        else:
            r["change"] = ADDED if r[BEFORE] is None else REMOVED if r[AFTER] is None else BOTH
        r["delta"] = (r[AFTER] or 0.0) - (r[BEFORE] or 0.0)
    return sorted(rows.values(), key=lambda r: -max(r[BEFORE] or 0.0, r[AFTER] or 0.0))


def top_event_series(report: dict, top: int = plots.TOP_N, stat: str = SELF,
                     python: bool = False) -> tuple[list[str], dict[str, list]]:
    """The event names with the most time per step (either trace), and their before/after times.

    stat SELF (the default, what the CLI prints: children excluded, so nested calls and a wrapper such
    as `Torch-Compiled Region` do not count their children again) or TOTAL (an event with its children).
    """
    key = {TOTAL: "{}", SELF: "self_{}"}[stat]
    rows = event_rows(report, python)
    rows.sort(key=lambda r: -max(r[key.format(BEFORE)] or 0.0, r[key.format(AFTER)] or 0.0))
    roles = [t["role"] for t in report["traces"]]
    return ([r["name"] for r in rows[:top]],
            {role: [r[key.format(role)] for r in rows[:top]] for role in roles})


def step_series(report: dict) -> tuple[list[str], dict[str, list]]:
    """Step times of each trace, step by step (None where a trace has fewer steps)."""
    traces = report["traces"]
    n = max(len(t["step_times_us"]) for t in traces)
    series = {t["role"]: [t["step_times_us"][i] if i < len(t["step_times_us"]) else None for i in range(n)]
              for t in traces}
    return [f"step {i + 1}" for i in range(n)], series


def summary_text(report: TraceReport) -> str:
    """What the report says in a few lines: the traces, the step speed-up, and any plain note."""
    lines = []
    for t in report.traces:
        lines.append(f"{t.role}: {Path(t.path).name} ({t.source}, {t.steps} steps from {t.step_kind},"
                     f" p50 {plots.fmt_us(t.step_us.p50)})")
        lines += [f"  left out (warm-up): {why}" for why in t.excluded_steps]
    d = report.diff
    if d:
        lines.append(f"step time before/after: {d.step_speedup.summary}")
        warn = d.step_speedup.noise_warning
        if warn:
            lines.append(f"note: {warn}")
        exact = len(report.exact_kernels)
        how = (f"{exact} attributed by Inductor's provenance, {len(d.fused_kernels) - exact} guessed"
               " from their names")
        lines.append(f"{len(d.fused_kernels)} compiled kernels ({how}); {len(d.added)} event names"
                     f" added, {len(d.removed)} removed")
        if d.note:
            lines.append(d.note)
    return "\n".join(lines)


def trace_paths(mime: QMimeData) -> list[str]:
    """The local .json files in a drop, at most two (before, after)."""
    if not mime.hasUrls():
        return []
    paths = [u.toLocalFile() for u in mime.urls() if u.isLocalFile()]
    return [p for p in paths if p.lower().endswith(".json")][:2]


# ------------------------------------------------------------------------------------------- widgets
class _NumberItem(QTableWidgetItem):
    """A table cell that sorts by its number (None sorts first)."""

    def __init__(self, value: float | None, text: str):
        super().__init__(text)
        self.value = float("-inf") if value is None else float(value)
        self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other) -> bool:
        return self.value < getattr(other, "value", float("-inf"))


class TraceView(QWidget):
    """The trace workspace window: step speed-up, time per event, kernels vs what they replaced, diff."""

    loaded = Signal()  # a report is on screen
    failed = Signal(str)
    node_requested = Signal(str)  # an onnxruntime event (a node name) was clicked

    def __init__(self, parent: QWidget | None = None, session: Session | None = None) -> None:
        """session: the window's (which connects it through follow); None: a session of its own."""
        super().__init__(parent)
        self.setWindowTitle("fuseview — trace workspace")
        self.setWindowFlag(Qt.WindowType.Window)  # its own window, even with the main window as parent
        self.setObjectName("trace_view")
        self.trace_report: TraceReport | None = None  # the report on show
        self.report: dict | None = None  # the same as JSON: what the row functions above read
        self.paths: list[str] = []
        self.show_dialogs = True
        self.last_error = ""
        self._rows: list[dict] = []
        if session is None:
            session = Session(qt_job_service(self))
            follow(session, lambda: self)
        self.session = session
        self._build()

    def _build(self) -> None:
        body = self
        buttons = self._build_buttons()
        self.status = QLabel("Open two traces (before and after torch.compile), or drop them on the window.")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._build_plots()
        table_page = self._build_table_page()
        self._build_tabs(table_page)
        lay = QVBoxLayout(body)
        lay.addLayout(buttons)
        lay.addWidget(self.status)
        lay.addWidget(self.tabs, 1)
        for card in self.plot_cards():
            card.show_message("no traces yet: Open traces…")
        self._update_enabled()

    def _build_buttons(self) -> QHBoxLayout:
        """Open traces / capture, Cancel, the progress bar, the time shown, Python events, Save and Export."""
        self.open_button = QPushButton("Open traces…")
        self.open_button.clicked.connect(self.choose_traces)
        self.capture_button = QPushButton("Open capture…")
        self.capture_button.setToolTip("A folder from fuseview.capture.compare_compile: eager.json,"
                                       " compiled.json and torch_trace/ (exact attribution)")
        self.capture_button.clicked.connect(self.choose_capture)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self.cancel)
        self.cancel_button.setEnabled(False)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.save_button = QPushButton("Save report…")
        self.save_button.clicked.connect(self._ask_save)
        self.export_button = export_plots_button(self._ask_export)
        buttons = QHBoxLayout()
        self.time_stat = QComboBox()
        self.time_stat.addItems([SELF, TOTAL])
        self.time_stat.currentIndexChanged.connect(lambda _i: self._draw_events())
        self.python = QCheckBox("Python functions")
        self.python.setToolTip("List the Python-function events of a with_stack=True trace too (they nest:"
                               " their times overlap each other and the ops inside them)")
        self.python.toggled.connect(lambda on: (self._draw_events(), self._fill_table(),
                                                self.flame.set_python(on)))
        for w in (self.open_button, self.capture_button, self.cancel_button, self.progress, self.time_stat,
                  self.python, self.save_button, self.export_button):
            buttons.addWidget(w, 1 if w is self.progress else 0)
        return buttons

    def _build_plots(self) -> None:
        us = plots.fmt_us
        self.event_plot = plots.BarChart("events", "Self time per op/kernel (children excluded): before vs"
                                         " after", "µs per step (linear)", value_text=us)
        self.event_plot.barClicked.connect(lambda row, _s: self._event_clicked(row))
        self.kernels = KernelPanel()
        self.kernel_plot = self.kernels.plot
        from fuseview.ui.trace_flame import FlameView  # pyqtgraph: only once a trace workspace is made

        self.flame = FlameView()
        self.step_plot = plots.BarChart("steps", "Step times", "µs", value_text=us)

    def _build_table_page(self) -> QWidget:
        """The diff table under its name, category and change filters."""
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSortingEnabled(True)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        self.table.cellDoubleClicked.connect(lambda r, _c: self._table_clicked(r))
        self.filter_text = QLineEdit()
        self.filter_text.setPlaceholderText("filter by name")
        self.filter_category = QComboBox()
        self.filter_category.addItems(["all categories", *[c for c in CATEGORIES if c != STEP]])
        self.filter_change = QComboBox()
        self.filter_change.addItems(["all changes", ADDED, REMOVED, BOTH])
        for w in (self.filter_text, self.filter_category, self.filter_change):
            sig = w.textChanged if isinstance(w, QLineEdit) else w.currentIndexChanged
            sig.connect(self.apply_filters)
        filters = QHBoxLayout()
        filters.addWidget(self.filter_text, 1)
        filters.addWidget(self.filter_category)
        filters.addWidget(self.filter_change)
        table_page = QWidget()
        tl = QVBoxLayout(table_page)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.addLayout(filters)
        tl.addWidget(self.table)
        return table_page

    def _build_tabs(self, table_page: QWidget) -> None:
        self.tabs = QTabWidget()
        self.tabs.addTab(self.kernels, "Kernels")
        self.tabs.addTab(self.event_plot, "Time per event")
        self.tabs.addTab(self.step_plot, "Step times")
        self.tabs.addTab(table_page, "Diff table")
        self.tabs.addTab(self.flame, "One step (flame)")
        self.join = JoinPanel()
        self.tabs.addTab(self.join, "Compile vs ONNX")

    def plot_cards(self) -> list[plots.PlotCard]:
        """The plots, in tab order."""
        return [self.event_plot, self.kernel_plot, self.step_plot]

    def _update_enabled(self) -> None:
        busy = self.is_running
        self.open_button.setEnabled(not busy)
        self.capture_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.save_button.setEnabled(self.report is not None and not busy)
        self.export_button.setEnabled(self.report is not None and not busy)

    @property
    def is_running(self) -> bool:
        """Whether traces are being read."""
        return bool(self.session.jobs.active("traces"))

    # loading ----------------------------------------------------------------------------------------
    def choose_traces(self) -> None:
        """Ask for one or two trace files (before first)."""
        paths, _ = QFileDialog.getOpenFileNames(self, "Compare traces: before, then after", "",
                                                "Profiler traces (*.json);;All files (*)")
        if paths:
            self.open_traces(paths)

    def choose_capture(self) -> None:
        """Ask for a capture folder (eager.json, compiled.json, torch_trace/)."""
        folder = QFileDialog.getExistingDirectory(self, "Open a capture folder (fuseview.capture)")
        if folder:
            self.open_traces([folder])

    def open_traces(self, paths: list[str | os.PathLike], steps: int | None = None,
                    provenance: str | os.PathLike | None = None) -> JobHandle | None:
        """Read one or two traces (or one capture folder) through Session.open_traces; returns the job."""
        paths = [str(p) for p in paths]
        if not 1 <= len(paths) <= 2:
            self._fail(FuseviewError(f"choose one or two traces, not {len(paths)}"))
            return None
        self.paths = paths
        return self.session.open_traces(paths, steps, provenance)

    def cancel(self) -> None:
        """Stop reading (the result, if any, is dropped)."""
        self.session.jobs.cancel("traces")

    def shutdown(self) -> None:
        """End the reading thread (the window is closing)."""
        jobs = self.session.jobs.cancel("traces")
        for job in jobs:
            job.wait(10)

    # the session's events (connected by follow) -----------------------------------------------------
    def _started(self, job: JobHandle) -> None:
        self.show()  # a read started anywhere (a menu, a drop, session.open_traces) brings the workspace up
        self.raise_()
        self.activateWindow()
        self.status.setText(job.title + " …")
        self.progress.setValue(0)
        self.progress.setFormat("")
        self._update_enabled()

    def _progress(self, message: str, fraction: float) -> None:
        self.progress.setValue(int(fraction * 1000))
        self.progress.setFormat(message)

    def _opened(self, opened: OpenedTraces) -> None:
        self.progress.setValue(1000)
        self.progress.setFormat("done")
        self.flame.show_timelines(opened.timelines)
        self.join.set_rows(opened.join)
        self.show_report(opened.report, opened.graph_codes)

    def _failed(self, exc: BaseException) -> None:
        self.progress.setValue(0)
        self.progress.setFormat("")
        self._fail(exc)

    def _cancelled(self) -> None:
        self.status.setText("cancelled")
        self.progress.setValue(0)
        self.progress.setFormat("")
        self._update_enabled()

    def _fail(self, exc: BaseException) -> None:
        message = dialogs.error_text(exc)
        self.last_error = message
        self.status.setText(message)
        self._update_enabled()
        self.failed.emit(message)
        if self.show_dialogs:
            dialogs.show_error(self, "Cannot compare traces", message)

    # showing ----------------------------------------------------------------------------------------
    def show_report(self, report: TraceReport | dict, graph_codes: dict | None = None) -> None:
        """Draw a trace report (one trace, or a before/after pair; graph_codes: post-grad graphs' code)."""
        typed = report if isinstance(report, TraceReport) else TraceReport.from_json(report)
        self.trace_report, self.report = typed, typed.to_json()
        self.status.setText(summary_text(typed))
        self._draw_events()
        d = typed.diff
        self.kernels.show_report(self.report, d.note if d and d.note else
                                 "no compiled kernels" if d else "one trace: nothing to compare",
                                 graph_codes)
        labels, series = step_series(self.report)
        self.step_plot.set_bars(labels, series)
        # a comparison opens on its kernels; a single trace (nothing compiled to compare) on its events
        self.tabs.setCurrentWidget(self.kernels if d else self.event_plot)
        self._fill_table()
        self._update_enabled()
        self.loaded.emit()

    def _draw_events(self) -> None:
        if self.report is None:
            return
        labels, series = top_event_series(self.report, stat=self.time_stat.currentText(),
                                          python=self.python.isChecked())
        if labels:
            self.event_plot.title = (f"{self.time_stat.currentText().capitalize()} per op/kernel:"
                                     " before vs after")
            self.event_plot.set_bars(labels, series)
        else:
            self.event_plot.show_message("no events")

    def _fill_table(self) -> None:
        if self.report is None:
            return
        rows = event_rows(self.report, self.python.isChecked())
        self._rows = rows
        t = self.table
        t.setSortingEnabled(False)
        t.setRowCount(len(rows))
        for i, r in enumerate(rows):
            name = QTableWidgetItem(r["name"])
            name.setData(Qt.ItemDataRole.UserRole, i)
            name.setToolTip(r["name"])
            t.setItem(i, 0, name)
            t.setItem(i, 1, QTableWidgetItem(r["category"]))
            t.setItem(i, 2, QTableWidgetItem(r["change"]))
            t.setItem(i, 3, _NumberItem(r["count_before"], f"{r['count_before']:g}"))
            t.setItem(i, 4, _NumberItem(r["count_after"], f"{r['count_after']:g}"))
            for col, key in ((5, BEFORE), (6, AFTER)):
                v = r[key]
                t.setItem(i, col, _NumberItem(v, "-" if v is None else f"{v:.1f}"))
            t.setItem(i, 7, _NumberItem(r["delta"], f"{r['delta']:+.1f}"))
            for col, key in ((8, "self_before"), (9, "self_after")):
                v = r[key]
                t.setItem(i, col, _NumberItem(v, "-" if v is None else f"{v:.1f}"))
        # no sort column until the user picks one: rows stay slowest first (either trace)
        t.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)
        t.setSortingEnabled(True)
        t.resizeColumnsToContents()
        self.apply_filters()

    def apply_filters(self) -> int:
        """Hide the table rows the filters exclude; returns how many stay visible."""
        text = self.filter_text.text().strip().lower()
        cat = self.filter_category.currentText()
        change = self.filter_change.currentText()
        shown = 0
        for i in range(self.table.rowCount()):
            row = self._rows[self.table.item(i, 0).data(Qt.ItemDataRole.UserRole)]
            ok = ((not text or text in row["name"].lower())
                  and (cat == "all categories" or row["category"] == cat)
                  and (change == "all changes" or row["change"] == change))
            self.table.setRowHidden(i, not ok)
            shown += ok
        return shown

    def _event_clicked(self, row: int) -> None:
        if 0 <= row < len(self.event_plot.labels):
            self._reveal(self.event_plot.labels[row])

    def _table_clicked(self, row: int) -> None:
        self._reveal(self.table.item(row, 0).text())

    def _reveal(self, name: str) -> None:
        # onnxruntime events are graph nodes: the window can show them when that model is open
        if self.report and any(t["source"] == "onnxruntime" for t in self.report["traces"]):
            self.node_requested.emit(name)

    # exporting --------------------------------------------------------------------------------------
    def save_report(self, path: str | os.PathLike) -> Path:
        """Write the report shown (fuseview.trace_compare, validated) atomically."""
        if self.trace_report is None:
            raise FuseviewError("no traces to save")
        return self.trace_report.save(path)

    def export_plots(self, folder: str | os.PathLike, fmt: str = "png") -> list[Path]:
        """Write each plot that has data as trace_<name>.<fmt> into folder."""
        out = Path(folder)
        if not out.is_dir():
            raise FuseviewError(f"{folder}: folder does not exist")
        return [c.export(out / f"trace_{c.name}.{fmt}") for c in self.plot_cards() if c.has_data]

    def _ask_save(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save trace report", "trace_compare.json",
                                              "JSON (*.json)")
        if path:
            try:
                self.save_report(path)
                self.status.setText(f"report written to {path}")
            except Exception as exc:  # noqa: BLE001 - shown in a dialog
                self._fail(exc)

    def _ask_export(self, fmt: str) -> None:
        folder = QFileDialog.getExistingDirectory(self, f"Export plots as {fmt.upper()} into")
        if folder:
            try:
                written = self.export_plots(folder, fmt)
                self.status.setText(f"wrote {len(written)} plots to {folder}")
            except Exception as exc:  # noqa: BLE001 - shown in a dialog
                self._fail(exc)


def follow(session: Session, view: Callable[[], TraceView]) -> None:
    """Make the workspace a view of the session's traces: its events, and the progress of its job
    (view() returns the workspace, made on first use)."""
    session.events.traces_opened.connect(lambda e: view()._opened(e.traces))
    session.events.traces_failed.connect(lambda e: view()._failed(e.error))
    session.events.traces_cancelled.connect(lambda _e: view()._cancelled())
    jobs = session.jobs.events
    jobs.started.connect(lambda e: e.job.kind == "traces" and view()._started(e.job))
    jobs.progress.connect(lambda e: e.job.kind == "traces" and view()._progress(e.job.message,
                                                                                 e.job.fraction))


def install(window, file_menu: QMenu) -> None:
    """Add File → Compare Traces… and Open Capture… to the window (the workspace is made on first use)."""
    window.trace_view = None

    def view() -> TraceView:
        if window.trace_view is None:
            # a window of its own: the ONNX panes keep their room
            tv = window.trace_view = TraceView(window, window.session)
            tv.show_dialogs = getattr(window, "show_dialogs", True)
            tv.resize(1200, 800)
            tv.node_requested.connect(lambda name: _reveal_node(window, name))
        return window.trace_view

    window.trace_view_for = view
    follow(window.session, view)
    act = file_menu.addAction("Compare &Traces…")
    act.setToolTip("Compare two profiler traces (before/after torch.compile), or summarise one")
    act.triggered.connect(lambda: view().choose_traces())
    cap = file_menu.addAction("Open &Capture…")
    cap.setToolTip("Open a capture folder (fuseview.capture: eager.json, compiled.json, torch_trace/) in the"
                   " trace workspace")
    cap.triggered.connect(lambda: _choose_capture(window, view))
    window.open_capture_action = cap


def _choose_capture(window, view: Callable[[], TraceView]) -> None:
    folder = QFileDialog.getExistingDirectory(window, "Open a capture folder (fuseview.capture)")
    if folder:
        view().open_traces([folder])


def _reveal_node(window, name: str) -> None:
    doc = getattr(window, "doc", None)
    idx = doc.graph.node_by_name.get(name) if doc is not None else None
    if idx is not None:
        window.reveal_node(idx)


def handle_drop(window, mime: QMimeData) -> bool:
    """Open dropped .json traces in the trace view; False when the drop holds none."""
    paths = trace_paths(mime)
    if not paths:
        return False
    window.trace_view_for().open_traces(paths)
    return True
