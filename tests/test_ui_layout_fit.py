"""Issue 19: the workbench with the Profile dock open fits 1400×900 and 1920×1080 (offscreen screenshots)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, QSettings
from PySide6.QtWidgets import QApplication, QDockWidget, QWidget

from fuseview.ui.graph_view import GraphView
from fuseview.ui.legend import CORNERS, Legend
from fuseview.ui.main_window import MainWindow
from tests.conftest import GPT2_MODELS

GPT2_2L = GPT2_MODELS / "gpt2_2l_ts17.onnx"
MS = 90_000


def _rect_in(win: QWidget, w: QWidget) -> QRect:
    return QRect(w.mapTo(win, QPoint(0, 0)), w.size())


@pytest.fixture(scope="module")
def profiled(qapp, tmp_path_factory, request):
    """One window: GPT-2 opened, every candidate applied, both models profiled (few runs), dock open."""
    from pytestqt.qtbot import QtBot

    tmp = tmp_path_factory.mktemp("layout")
    w = MainWindow(settings=QSettings(str(tmp / "settings.ini"), QSettings.Format.IniFormat))
    w.show_dialogs = False  # unattended: no modal box (an error fails a wait instead), none on close
    bot = QtBot(request)
    w.resize(1400, 900)
    w.show()
    with bot.waitSignal(w.workbench.scanned, timeout=MS):
        w.open_file(GPT2_2L)
    bot.waitUntil(lambda: not w.busy, timeout=MS)
    wb = w.workbench
    wb.panel.accept_all()
    with bot.waitSignal(wb.applied, timeout=MS):
        assert wb.apply()
    bot.waitUntil(lambda: not w.busy, timeout=MS)
    pp = wb.profile_panel
    pp.runs.setValue(4)
    pp.warmup.setValue(1)
    pp.dims.setText("seq=16")
    pp.show()  # as View → Profile does
    with bot.waitSignal(pp.profileFinished, timeout=MS):
        pp.start_profile()
    yield w, bot
    w.session.jobs.shutdown()
    pp.shutdown()
    w.close()


@pytest.mark.parametrize("size", [(1400, 900), (1920, 1080)])
def test_workbench_with_profile_dock_fits(profiled, size, tmp_path):
    win, bot = profiled
    wb = win.workbench
    win.resize(*size)
    wb.profile_panel.hide()
    wb.profile_panel.show()  # reopened at this size: the dock takes its share, not its size hint
    bot.wait(400)  # resizes settle, legends step aside
    QApplication.processEvents()
    frame = win.rect()
    panes = [win.view, wb.fused_pane.view]
    docks = [d for d in win.findChildren(QDockWidget) if d.isVisible()]
    assert {d.objectName() or d.windowTitle() for d in docks} >= {"Profile"} or wb.profile_panel in docks
    for w in [*panes, *docks, win.statusBar(), win.search, wb.fused_pane.title, wb.original_title]:
        r = _rect_in(win, w)
        assert frame.contains(r), f"{w.objectName() or type(w).__name__} {r} leaves the window {frame}"
        hint = w.minimumSizeHint()
        assert r.width() >= max(hint.width(), 1) and r.height() >= max(hint.height(), 1), type(w).__name__
    for a, b in [(x, y) for i, x in enumerate(docks) for y in docks[i + 1:]] + [(p, d) for p in panes
                                                                              for d in docks]:
        assert not _rect_in(win, a).intersects(_rect_in(win, b)), (a.windowTitle(), b.windowTitle())
    # the graphs keep room to read: 45 % of the height at least, each pane 360 px wide or more
    widths = [p.width() for p in panes]
    assert win.view.height() >= 0.45 * size[1] and min(widths) >= 360, (win.view.height(), widths)
    assert wb.profile_panel.height() <= 0.45 * size[1]
    # the columns a reviewer decides by are visible without scrolling
    table = wb.panel.table
    header = table.horizontalHeader()
    for name in ("Rule", "Status", "Nodes", "Measured", "Share", "ORT does it"):
        col = [table.horizontalHeaderItem(c).text() for c in range(table.columnCount())].index(name)
        right = header.sectionViewportPosition(col) + header.sectionSize(col)
        assert 0 <= header.sectionViewportPosition(col) and right <= table.viewport().width(), name
    # the fused pane's title shows the validation figures, on a second line if need be
    title = wb.fused_pane.title
    assert "max rel" in title.text() and "…" not in title.text().split("\n")[0]
    # each legend sits where it covers the fewest boxes
    for legend in win.findChildren(Legend):
        if legend.isVisible() and not legend.moved:
            assert legend.covered(legend.corner) == min(legend.covered(c) for c in CORNERS)
    shot = tmp_path / f"workbench_{size[0]}x{size[1]}.png"
    assert win.grab().save(str(shot), "PNG") and shot.stat().st_size > 20_000
    assert isinstance(win.view, GraphView)
