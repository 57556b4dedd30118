"""Candidates dock: every fusion candidate with its status; filter, step through, accept, reject, undo."""

from __future__ import annotations

from functools import lru_cache
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QStyledItemDelegate,
    QStyleOptionViewItem,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from fuseview.errors import FuseviewError
from fuseview.session.decisions import ACCEPTED, APPLIED, REJECTED, STATUSES, Decisions
from fuseview.session.exports import MeasuredCost, candidate_costs
from fuseview.ui import style
from fuseview.ui.flow_layout import FlowLayout
from fuseview.units import format_bytes

COLUMNS = (
    "Rule", "Fused op", "Scope", "Nodes", "Saved", "Status", "Conflicts", "Measured", "Share", "ORT does it",
    "Measured effect",
)
MEASURED_COLUMNS = (7, 8)
# what a reviewer decides by comes first on screen (a 500 px dock shows these without scrolling); names
# and scopes, long and elided anyway, last. Logical column numbers stay those of COLUMNS.
VISUAL_ORDER = (
    "Rule", "Status", "Nodes", "Measured", "Share", "ORT does it", "Conflicts", "Saved", "Fused op", "Scope",
)
CONFLICTS_COLUMN = 6
RULE_MAX = 140  # px: the Rule column at most
ORT_COLUMN = 9
EFFECT_COLUMN = 10  # filled by Fusion → Tune… (fuseview.ui.tune_dialog): speed-up with it, verdict
# does onnxruntime's own optimizer (ORT_ENABLE_ALL, CPU) make the same fusion from the unfused model?
_ORT_WORDS = {True: "yes", False: "no", None: "?"}
_ORT_TIPS = {
    True: "onnxruntime makes this fusion itself at load time (ORT_ENABLE_ALL, CPU): little to add",
    False: "onnxruntime leaves these nodes unfused at ORT_ENABLE_ALL (CPU): this fusion adds to it",
    None: "cannot be read off onnxruntime's optimized graph (its tensors went into a bigger fusion)",
}
_STATUS_COLORS = {ACCEPTED: "#1a7f37", APPLIED: "#0b5cad", REJECTED: "#8c959f"}
_ID_ROLE = Qt.ItemDataRole.UserRole
TEXT_MARGINS = 8  # px a cell's text leaves at its sides (the style's 3 px each, and a little)


class CandidatesPanel(QDockWidget):
    """Table of candidates (rule, fused op, scope, node count, saved bytes, status, conflicts)."""

    candidate_selected = Signal(str)  # '' when no row is current
    changed = Signal()  # a decision changed (accept, reject, undo, redo, plan opened)
    apply_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__("Fusion candidates", parent)
        self.setObjectName("candidates")
        self.decisions: Decisions | None = None
        self.scopes: dict[str, str] = {}
        self.node_filter: set[str] | None = None  # candidate ids of the selected node
        self.costs: dict[str, MeasuredCost] = {}  # from a profile of the original model
        self.ort_does_it: dict[str, bool | None] = {}  # from fuseview.fusion.ort_compare, once it ran
        self.effects: dict[str, tuple[str, str]] = {}  # candidate -> (text, tooltip) from the last tune
        self.sort_by_measured = False  # rows by measured time, most first (else scan order)
        self._filling = False

        body = QWidget()
        col = QVBoxLayout(body)
        col.setContentsMargins(4, 4, 4, 4)
        col.addLayout(self._build_filters())
        self._build_table()
        col.addWidget(self.table, 1)
        col.addLayout(self._build_buttons())
        self._build_info()
        col.addWidget(self.summary)
        col.addWidget(self.info)
        self.setWidget(body)
        self.set_decisions(None)

    def _build_filters(self) -> QHBoxLayout:
        """The rule and status filters and the selected-node switch."""
        filters = QHBoxLayout()
        self.rule_filter = QComboBox()
        self.status_filter = QComboBox()
        self.status_filter.addItem("All statuses", "")
        for s in STATUSES:
            self.status_filter.addItem(s, s)
        self.node_only = QCheckBox("Selected node only")
        self.node_only.setToolTip("Show only the candidates the selected node belongs to")
        for w in (self.rule_filter, self.status_filter):
            w.currentIndexChanged.connect(self.refresh)
        self.node_only.toggled.connect(self.refresh)
        filters.addWidget(self.rule_filter, 1)
        filters.addWidget(self.status_filter)
        filters.addWidget(self.node_only)
        return filters

    def _build_table(self) -> None:
        """The candidates' table: one row each, columns in VISUAL_ORDER, elided cells, sized per refresh."""
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setAlternatingRowColors(True)
        header = self.table.horizontalHeader()
        # sized once per refresh: ResizeToContents would measure every cell on every insert
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        for visual, name in enumerate(VISUAL_ORDER):
            header.moveSection(header.visualIndex(COLUMNS.index(name)), visual)
        self._sized = False
        self.table.setTextElideMode(Qt.TextElideMode.ElideLeft)
        self._conflicts_delegate = _WordElide(self.table)  # kept: the view does not own its delegates
        self.table.setItemDelegateForColumn(CONFLICTS_COLUMN, self._conflicts_delegate)
        self._rule_delegate = _ElideRight(self.table)
        self.table.setItemDelegateForColumn(0, self._rule_delegate)
        self.table.setColumnWidth(2, 140)
        for c in MEASURED_COLUMNS:
            self.table.horizontalHeaderItem(c).setToolTip(
                "measured time of the nodes the candidate would replace (median per run) and its share of the"
                " run, from the last profile of the original model; click to sort by it"
            )
        header.sectionClicked.connect(self._header_clicked)
        self.table.currentCellChanged.connect(self._current_changed)

    def _build_buttons(self) -> FlowLayout:
        """Accept/Reject (one or a rule), Undo/Redo and Apply, none taking the keyboard focus."""
        buttons = FlowLayout(spacing=4)  # wraps: the dock's minimum width stays small
        self.buttons: dict[str, QPushButton] = {}
        for key, text, tip, slot in (
            ("accept", "Accept", "Accept the current candidate (A)", self.accept_current),
            ("reject", "Reject", "Reject the current candidate (R)", self.reject_current),
            ("accept_rule", "Accept rule", "Accept every free candidate of this rule", self.accept_rule),
            ("reject_rule", "Reject rule", "Reject every candidate of this rule", self.reject_rule),
            ("undo", "Undo", "Undo the last decision (Ctrl+Z)", self.undo),
            ("redo", "Redo", "Redo (Ctrl+Shift+Z)", self.redo),
            ("apply", "Apply accepted", "Build the fused model (Ctrl+Return)", self.apply_requested.emit),
        ):
            b = QPushButton(text)
            b.setToolTip(tip)
            b.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keep keyboard focus on the table / graph
            b.clicked.connect(slot)
            buttons.addWidget(b)
            self.buttons[key] = b
        return buttons

    def _build_info(self) -> None:
        self.summary = QLabel("")
        self.info = QLabel("")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.RichText)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

    # data -------------------------------------------------------------------------------------------
    def decide_width(self) -> int:
        """The dock width that shows the columns a reviewer decides by (up to Conflicts) without scrolling."""
        t = self.table
        header = t.horizontalHeader()
        last = COLUMNS.index("Conflicts")
        right = header.sectionPosition(last) + header.sectionSize(last)
        chrome = t.verticalHeader().width() + t.verticalScrollBar().sizeHint().width() + 2 * t.frameWidth()
        return right + chrome + 24  # the dock's margins

    def widen_conflicts(self, dock_width: int) -> None:
        """Give the Conflicts column what a dock of dock_width leaves beyond decide_width (up to its text)."""
        t, col = self.table, CONFLICTS_COLUMN
        widest = max(
            (t.fontMetrics().horizontalAdvance(t.item(r, col).text()) + 16 for r in range(t.rowCount())),
            default=0,
        )
        spare = dock_width - self.decide_width()
        if spare > 0 and widest > t.columnWidth(col):
            t.setColumnWidth(col, min(widest, t.columnWidth(col) + spare))

    def set_decisions(self, decisions: Decisions | None, scopes: dict[str, str] | None = None) -> None:
        """Show the candidates of a new scan (None: nothing scanned)."""
        self.decisions = decisions
        self._sized = False
        self.scopes = scopes or {}
        self.ort_does_it = {}  # another model's answers would be wrong; the workbench asks again
        self.effects = {}
        self.node_filter = None
        self.rule_filter.blockSignals(True)
        self.rule_filter.clear()
        self.rule_filter.addItem("All rules", "")
        if decisions is not None:
            counts = decisions.counts()
            for r in decisions.rules:
                self.rule_filter.addItem(f"{r} ({counts[r]})", r)
        self.rule_filter.blockSignals(False)
        self.info.setText("")
        self.refresh()

    def refresh(self) -> None:
        """Rebuild the rows from the decisions and the filters (keeps the current candidate)."""
        keep = self.current_id()
        self._filling = True
        self.table.setUpdatesEnabled(False)
        self.table.setRowCount(0)
        d = self.decisions
        ids = self.visible_ids()
        self.table.setRowCount(len(ids))
        for row, cid in enumerate(ids):
            c = d.by_id[cid]
            status = d.status(cid)
            conflict = d.conflict_text(cid)
            blocked = d.blocked_by(cid) is not None
            cells = (
                c.rule,
                c.fused_op,
                self.scopes.get(cid, ""),
                str(len(c.nodes)),
                format_bytes(c.saved_bytes),  # MiB, as the CLI writes it
                status,
                conflict,
                *self._cost_cells(cid),
                _ORT_WORDS[self.ort_does_it[cid]] if cid in self.ort_does_it else "",
                self.effects[cid][0] if cid in self.effects else "",
            )
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(_ID_ROLE, cid)
                if col == ORT_COLUMN and cid in self.ort_does_it:
                    item.setToolTip(_ORT_TIPS[self.ort_does_it[cid]])
                elif col == EFFECT_COLUMN and cid in self.effects:
                    item.setToolTip(self.effects[cid][1])
                elif col in MEASURED_COLUMNS and cid in self.costs:
                    item.setToolTip(f"{cid}\n{text}\n{self.costs[cid].gain_text()}")
                else:
                    item.setToolTip(f"{cid}\n{text}" if col != CONFLICTS_COLUMN else d.conflict_tip(cid))
                if blocked:
                    item.setForeground(QBrush(QColor("#9aa3ad")))
                elif col == 5 and status in _STATUS_COLORS:
                    item.setForeground(QBrush(QColor(_STATUS_COLORS[status])))
                if col == 0:
                    item.setIcon(_swatch(d.colors[c.rule]))
                if col in (3, 4, *MEASURED_COLUMNS):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(row, col, item)
        if ids and not self._sized:
            for col in (0, 1, 3, 4, 5):
                self.table.resizeColumnToContents(col)
            # long rule names (attention_gqa_rotary_qkv) end in '…' (whole in the filter and tooltip): their
            # room goes to Conflicts, which names the rival rule (issue 37)
            self.table.setColumnWidth(0, min(self.table.columnWidth(0), RULE_MAX))
            fm = self.table.fontMetrics()
            self.table.setColumnWidth(
                5, max(self.table.columnWidth(5), fm.horizontalAdvance("accepted") + 16)
            )
            # measured columns fill in later (a profile): as wide as their widest text or heading from the
            # start, no wider (the default 100 px each pushed Conflicts out of a 1400 px window's dock)
            for col, widest in ((7, "9999.0 µs"), (8, "100.0%"), (ORT_COLUMN, "yes")):
                heading = self.table.horizontalHeaderItem(col).text()
                room = max(fm.horizontalAdvance(widest), fm.horizontalAdvance(heading)) + 18
                self.table.setColumnWidth(col, room)
            self._sized = True
        self.table.setUpdatesEnabled(True)
        self._filling = False
        if keep in ids:
            self.table.setCurrentCell(
                ids.index(keep), self.table.currentColumn() if self.table.currentColumn() >= 0 else 0
            )
        self._summarise()

    def _summarise(self) -> None:
        d = self.decisions
        if d is None:
            self.summary.setText("No model scanned.")
        else:
            st = [d.status(c.id) for c in d.candidates]
            self.summary.setText(
                f"{len(st)} candidates: {st.count('pending')} pending, {st.count('accepted')} accepted, "
                f"{st.count('rejected')} rejected, {st.count('applied')} applied   "
                f"({len(d.scan.near_misses)} near misses)"
            )
        for key in ("accept", "reject", "accept_rule", "reject_rule"):
            self.buttons[key].setEnabled(bool(self.current_id()))
        self.buttons["undo"].setEnabled(bool(d and d.plan.history))
        self.buttons["redo"].setEnabled(bool(d and d.plan.future))
        self.buttons["apply"].setEnabled(bool(d and d.accepted()))

    def visible_ids(self) -> list[str]:
        """Ids of the rows the filters let through, in table order."""
        d = self.decisions
        if d is None:
            return []
        rule = self.rule_filter.currentData() or ""
        status = self.status_filter.currentData() or ""
        out = []
        cands = d.candidates
        if self.sort_by_measured and self.costs:
            none = MeasuredCost(-1.0, -1.0, 0, 0)
            cands = sorted(cands, key=lambda c: -self.costs.get(c.id, none).measured_us)
        for c in cands:
            if rule and c.rule != rule:
                continue
            if status and d.status(c.id) != status:
                continue
            if self.node_only.isChecked() and self.node_filter is not None and c.id not in self.node_filter:
                continue
            out.append(c.id)
        return out

    # measured cost ---------------------------------------------------------------------------------
    def set_profile(self, report: dict | None) -> None:
        """Measured time and share of each candidate's nodes from a profile report (None clears them).

        A report of another model (none of the candidates' nodes in it) clears them too.
        """
        costs: dict[str, MeasuredCost] = {}
        if report is not None and self.decisions is not None:
            try:
                costs = candidate_costs(report, self.decisions.candidates)
            except FuseviewError:
                costs = {}
        self.costs = costs
        self.refresh()

    def set_ort_does_it(self, does_it: dict[str, bool | None] | None) -> None:
        """Per candidate, whether onnxruntime's own optimizer makes that fusion (None clears the column)."""
        self.ort_does_it = dict(does_it or {})
        self.refresh()

    def set_effects(self, effects: dict[str, tuple[str, str]] | None) -> None:
        """Per candidate, the tune's measured effect (text, tooltip); None clears the column."""
        self.effects = dict(effects or {})
        self.refresh()

    def _cost_cells(self, cid: str) -> tuple[str, str]:
        cost = self.costs.get(cid)
        if cost is None:
            return "", ""
        return f"{cost.measured_us:.1f} µs", f"{cost.share * 100:.1f}%"

    def _header_clicked(self, col: int) -> None:
        if col not in MEASURED_COLUMNS:
            return
        self.sort_by_measured = not self.sort_by_measured
        header = self.table.horizontalHeader()
        header.setSortIndicatorShown(self.sort_by_measured)
        if self.sort_by_measured:
            header.setSortIndicator(col, Qt.SortOrder.DescendingOrder)
        self.refresh()

    # current row ----------------------------------------------------------------------------------
    def current_id(self) -> str:
        """Id of the current row's candidate, or ''."""
        item = self.table.item(self.table.currentRow(), 0) if self.table.currentRow() >= 0 else None
        return str(item.data(_ID_ROLE)) if item is not None else ""

    def select_id(self, cid: str) -> bool:
        """Make a candidate's row current (False when the filters hide it)."""
        ids = self.visible_ids()
        if cid not in ids:
            return False
        self.table.setCurrentCell(ids.index(cid), 0)
        return True

    def _current_changed(self, row: int, _col: int, old_row: int, _old_col: int) -> None:
        if self._filling or row == old_row:
            return
        self._summarise()
        self.candidate_selected.emit(self.current_id())

    def step(self, delta: int) -> str:
        """Next (+1) or previous (-1) candidate, wrapping around; returns its id."""
        n = self.table.rowCount()
        if n == 0:
            return ""
        row = self.table.currentRow()
        row = (0 if delta > 0 else n - 1) if row < 0 else (row + delta) % n
        self.table.setCurrentCell(row, 0)
        return self.current_id()

    # decisions ------------------------------------------------------------------------------------
    def _do(self, fn) -> None:
        if self.decisions is not None and fn():
            self.refresh()
            self.changed.emit()

    def accept_current(self) -> None:
        """Accept the current candidate (conflicting ones become rejected)."""
        cid = self.current_id()
        if cid:
            self._do(lambda: self.decisions.accept(cid))

    def reject_current(self) -> None:
        """Reject the current candidate."""
        cid = self.current_id()
        if cid:
            self._do(lambda: self.decisions.reject(cid))

    def accept_rule(self, rule: str | None = None) -> None:
        """Accept every free candidate of a rule (default: the current candidate's)."""
        rule = rule or self._current_rule()
        if rule:
            self._do(lambda: self.decisions.accept(rule))

    def reject_rule(self, rule: str | None = None) -> None:
        """Reject every candidate of a rule (default: the current candidate's)."""
        rule = rule or self._current_rule()
        if rule:
            self._do(lambda: self.decisions.reject(rule))

    def accept_all(self) -> None:
        """Accept every undecided candidate."""
        self._do(lambda: self.decisions.accept_all())

    def undo(self) -> None:
        """Undo the last decision."""
        self._do(lambda: self.decisions.undo())

    def redo(self) -> None:
        """Redo the last undone decision."""
        self._do(lambda: self.decisions.redo())

    def _current_rule(self) -> str:
        cid = self.current_id()
        return self.decisions.by_id[cid].rule if cid and self.decisions else ""

    # the selected node ----------------------------------------------------------------------------
    def show_node(self, name: str | None) -> None:
        """Say which candidates (and near misses) a selected node belongs to; None clears it."""
        d = self.decisions
        if d is None or not name:
            self.node_filter = None
            self.info.setText("")
            if self.node_only.isChecked():
                self.refresh()
            return
        ids = d.of_node.get(name, [])
        self.node_filter = set(ids)
        lines = [f"<b>{escape(name)}</b>"]
        if ids:
            lines.append("in " + ", ".join(f"{escape(i)} <i>({d.status(i)})</i>" for i in ids))
        else:
            lines.append("in no candidate")
        for m in d.misses_of_node.get(name, []):
            lines.append(f"near miss <b>{escape(m.rule)}</b>: {escape(m.reason)}")
        self.info.setText("<br>".join(lines))
        if self.node_only.isChecked():
            self.refresh()


@lru_cache(maxsize=64)
def _swatch(color: str):
    from PySide6.QtGui import QIcon, QPixmap

    pix = QPixmap(10, 10)
    pix.fill(QColor(color))
    return QIcon(pix)


class _WordElide(QStyledItemDelegate):
    """Draws a cell's text cut at a word with '…' (the whole text stays in the item and its tooltip)."""

    def initStyleOption(self, option: QStyleOptionViewItem, index) -> None:  # noqa: N802 (Qt's name)
        """Qt's options, with the text elided at a word to the cell's width."""
        super().initStyleOption(option, index)
        room = option.rect.width() - TEXT_MARGINS
        if room > 0 and option.text:
            option.text = style.elide_words(option.text, option.fontMetrics, room)


class _ElideRight(QStyledItemDelegate):
    """Draws a cell's text cut at its end (the table elides at the left, for scopes)."""

    def initStyleOption(self, option: QStyleOptionViewItem, index) -> None:  # noqa: N802 (Qt's name)
        """Qt's options, eliding at the right."""
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideRight
