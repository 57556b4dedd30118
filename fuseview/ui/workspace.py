"""The plots workspace: while a profile is open, or the Profile dock was opened from View or ran a profile,
its plots take the window's centre (the graphs step aside until View → Plots Workspace, F10 or the dock's
"Back to graphs" brings them back), and `--tab NAME`
picks what a screenshot shows: the graphs, a Profile tab, the tune result, or a trace workspace tab."""

from __future__ import annotations

import re

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QPushButton, QTabWidget
from shiboken6 import isValid

from fuseview.errors import FuseviewError

GRAPHS = "graphs"
TUNE = "tune"
# the candidates dock's share of the width while it shows a tune result (its table and summary bar)
TUNE_SHARE = 0.5
# the candidates dock's share of the width while the plots hold the centre
PLOTS_SIDE_SHARE = 0.32


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def find_tab(tabs: QTabWidget, name: str) -> int | None:
    """The index of the tab whose title is name, or holds it as a whole ('flame' in 'One step (flame)');
    None when none or several do."""
    key = _key(name)
    titles = [_key(tabs.tabText(i)) for i in range(tabs.count())]
    if key in titles:
        return titles.index(key)
    hits = [i for i, t in enumerate(titles) if key and key in t]
    return hits[0] if len(hits) == 1 else None


def tab_names(tabs: QTabWidget) -> list[str]:
    """The tabs' titles, as --tab takes them."""
    return [tabs.tabText(i) for i in range(tabs.count())]


class PlotsWorkspace(QObject):
    """The Profile dock's plots in the centre (the graph panes hidden) or in a strip under the graphs."""

    def __init__(self, workbench) -> None:
        super().__init__(workbench)
        self.wb = workbench
        win, pp = workbench.win, workbench.profile_panel
        self.action = QAction("Plots &Workspace", win)
        self.action.setCheckable(True)
        self.action.setShortcut("F10")
        self.action.setToolTip("The profile's plots take the window's centre; the graphs step aside")
        self.action.toggled.connect(self.set_on)
        win.addAction(self.action)
        win.panels_menu.addAction(self.action)
        self.button = QPushButton("Back to graphs")
        self.button.setToolTip("The graphs take the centre again, the plots a strip under them (F10)")
        self.button.clicked.connect(lambda: self.set_on(not self.on))
        pp.button_row.addWidget(self.button)
        # a finished profile (or an opened report) is what the user asked to see: its plots get the room
        pp.reportShown.connect(lambda: self.set_on(True))
        # so is the dock opened from View (not when the window shows it itself, after Apply), and Run
        pp.toggleViewAction().triggered.connect(lambda checked: checked and self.set_on(True))
        pp.run_button.clicked.connect(lambda: self.set_on(True))
        pp.visibilityChanged.connect(lambda shown: shown or self.set_on(False))  # the dock closed
        # a bar clicked names a node or an op type: show it in the graphs
        pp.nodeActivated.connect(lambda *_a: self.set_on(False))
        pp.opTypeActivated.connect(lambda *_a: self.set_on(False))
        self._sync()

    @property
    def on(self) -> bool:
        """Whether the plots hold the centre."""
        return self.action.isChecked()

    def set_on(self, on: bool) -> None:
        """Give the plots the centre (the graph panes hidden) or back to a strip under the graphs."""
        wb, win = self.wb, self.wb.win
        if not isValid(win):
            return  # the window is being torn down (its docks hide one by one)
        if on and wb.profile_panel.report() is None and not wb.profile_panel.isVisible():
            on = False  # nothing to plot and no dock to run one from: the graphs keep the room
        if self.action.isChecked() != on:
            self.action.blockSignals(True)
            self.action.setChecked(on)
            self.action.blockSignals(False)
        central = win.centralWidget()
        if central is not None:
            central.setVisible(not on)  # a hidden centre: the bottom dock takes the full height
        if on:
            wb.profile_panel.show()
            self._give_room()
            # a dock shown just now (View → Profile) is laid out by the event loop: size it again after
            QTimer.singleShot(50, self._give_room)
        else:
            wb.tidy_docks()
        self._sync()

    def _give_room(self) -> None:
        wb, win = self.wb, self.wb.win
        if not self.on or not isValid(win):
            return
        # the plots are what is looked at now: the candidates column narrows to a third of the window
        narrow = max(wb.panel.minimumSizeHint().width(), int(win.width() * PLOTS_SIDE_SHARE))
        # (through the bottom dock: with the centre hidden, resizing the right column alone is undone)
        win.resizeDocks([wb.profile_panel], [win.width() - narrow], Qt.Orientation.Horizontal)

    def _sync(self) -> None:
        self.button.setText("Back to graphs" if self.on else "Plots workspace")
        self.button.setVisible(self.on or self.wb.profile_panel.report() is not None)

    def show_tab(self, name: str) -> None:
        """Show what --tab names: 'graphs', 'tune', or a Profile tab (FuseviewError: no such tab)."""
        wb = self.wb
        if _key(name) == GRAPHS:
            self.set_on(False)
            return
        if _key(name) == TUNE:
            self.set_on(False)
            wb.profile_panel.hide()
            win = wb.win
            win.resizeDocks([wb.panel], [int(win.width() * TUNE_SHARE)], Qt.Orientation.Horizontal)
            h = win.height()  # the table of decisions over a short inspector
            win.resizeDocks([wb.panel, win.inspector], [h * 3 // 4, h // 6], Qt.Orientation.Vertical)
            return
        check_tab(self, name)
        tabs = wb.profile_panel.tabs
        if wb.profile_panel.report() is None:
            raise FuseviewError(f"--tab {name!r} shows a profile: add --profile")
        tabs.setCurrentIndex(find_tab(tabs, name) or 0)
        self.set_on(True)


def check_tab(workspace: PlotsWorkspace, name: str) -> None:
    """Refuse a --tab name no tab of the window has, before any work starts (FuseviewError)."""
    key = _key(name)
    if key not in (GRAPHS, TUNE) and find_tab(workspace.wb.profile_panel.tabs, name) is None:
        names = ", ".join([GRAPHS, TUNE, *tab_names(workspace.wb.profile_panel.tabs)])
        raise FuseviewError(f"--tab {name!r}: no such tab of the window; choose one of: {names}")
