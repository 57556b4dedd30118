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
@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
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


def _bar_rects(vb, bars) -> list:
    """Scene rects of a Bars item's bars, by index."""
    from PySide6.QtCore import QRectF

    o = bars.opts
    out = []
    for i, y in enumerate(o["y"]):
        h = o["height"]
        out.append(vb.mapViewToScene(QRectF(o["x0"][i], y - h / 2, o["width"][i], h)).boundingRect())
    return out


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_every_plot_card_lays_itself_out_at_1400x900(profiled, tmp_path):
    """Issue 30: rows that fit ("top N of M"), titles that wrap, value labels beside or inside their bars
    (never over another bar or label, never outside the data area), legends outside the data. Issue 37:
    in the plots workspace (the graphs step aside) every plot shows its top 10 rows at 1400x900."""
    from fuseview.ui.profile_plots import BarChart

    win, bot = profiled
    wb = win.workbench
    pp = wb.profile_panel
    win.resize(1400, 900)
    pp.hide()
    pp.show()
    wb.workspace.set_on(True)
    bot.wait(300)
    assert win.width() == 1400 and not win.centralWidget().isVisible()
    checked = 0
    for tab in range(pp.tabs.count()):
        pp.tabs.setCurrentIndex(tab)
        bot.wait(250)  # the tab's layout settles; the cards refit on their resize
        QApplication.processEvents()
        for card in pp.plot_cards():
            if not card.isVisible() or not card.has_data:
                continue
            checked += 1
            card.grab().save(str(tmp_path / f"{card.name}.png"))
            head = card.header
            assert head.heightForWidth(head.width()) <= head.height() + 1, f"{card.name}: title cut"
            assert card.rect().contains(QRect(head.pos(), head.size())), card.name
            if not isinstance(card, BarChart):
                continue
            item = card.plot.getPlotItem()
            assert item.legend is None, f"{card.name}: a legend over the data"
            vb = item.getViewBox()
            area = vb.sceneBoundingRect()
            low, high = vb.viewRange()[1]
            n = card.bar_count()
            shown = [r for r in range(n) if low < n - 1 - r < high]
            assert len(shown) >= min(n, 10), f"{card.name}: {len(shown)} rows of {n}"
            if len(shown) < n:
                assert f"top {len(shown)} of {n}" in head.text(), head.text()
            rects = {
                (s, i): r for s, b in enumerate(card.bars.values()) for i, r in enumerate(_bar_rects(vb, b))
            }
            owners = [(s, i) for s in range(len(card.bars)) for i in range(n)]  # set_bars' label order
            labels = []
            for (text, _end), (s, i) in zip(card.values, owners, strict=True):
                if i not in shown:
                    continue
                r = text.sceneBoundingRect().adjusted(1, 1, -1, -1)
                assert area.contains(r), f"{card.name}: label {text.toPlainText()!r} leaves the plot"
                for key, bar in rects.items():
                    if key != (s, i) and key[1] in shown:
                        assert not r.intersects(bar), f"{card.name}: {text.toPlainText()!r} over a bar {key}"
                labels.append((text.toPlainText(), r))
            for a, (ta, ra) in enumerate(labels):
                for tb, rb in labels[a + 1:]:
                    assert not ra.intersects(rb), f"{card.name}: {ta!r} over {tb!r}"
            axis = item.getAxis("left")
            assert axis.width() <= 0.45 * card.width() + 20, f"{card.name}: row labels crowd out the bars"
    assert checked >= 5, checked
    wb.workspace.set_on(False)
    assert win.centralWidget().isVisible()
