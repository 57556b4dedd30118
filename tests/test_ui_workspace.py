"""Issue 37: the window as a profiling workspace — traces opened from the CLI and the File menu, a picture of
every workspace tab, plots showing their top 10 rows and labels that fit, the fused op preselected."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from PySide6.QtGui import QFontMetricsF, QImage
from PySide6.QtWidgets import QApplication, QTableWidget

from fuseview.graph.loader import load_document
from fuseview.ui import qt_app as ui_app
from fuseview.ui import style
from fuseview.ui.headless import run_workbench
from tests.conftest import ASSET_MODELS, ROOT

CAPTURE = ROOT / "tests" / "data" / "traces" / "provenance" / "gpt2_block_onnx"
LLAMA_KV = ASSET_MODELS / "current" / "llama_2l_sdpa_past_dynamo.onnx"
MS = 90_000


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "fuseview", *args], capture_output=True, text=True,
                          timeout=300, env=env, cwd=ROOT)


@pytest.mark.parametrize("how", [["trace", str(CAPTURE), "--tab", "Compile vs ONNX"],
                                 ["open", str(CAPTURE), "--tab", "flame"]])
@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_capture_folder_opens_the_trace_workspace_from_the_cli(tmp_path, how):
    out = tmp_path / "shot.png"
    r = _cli(*how, "--size", "1400x900", "--screenshot", str(out))
    assert r.returncode == 0, r.stderr
    img = QImage(str(out))
    assert (img.width(), img.height()) == (1400, 900)


@pytest.mark.parametrize("how", [["trace", str(CAPTURE)], ["open", "--apply"]])
def test_a_tab_no_view_has_is_one_line_exit_2(tmp_path, how):
    r = _cli(*how, "--tab", "no such tab", "--screenshot", str(tmp_path / "x.png"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith("fuseview: error: --tab 'no such tab'") and "choose one of" in r.stderr
    assert not (tmp_path / "x.png").exists()


def test_file_menu_opens_a_capture_beside_compare_traces(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    from fuseview.ui.main_window import MainWindow

    win = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    qtbot.addWidget(win)
    texts = [a.text().replace("&", "") for a in win.menuBar().actions()[0].menu().actions()]
    at = texts.index("Compare Traces…")
    assert texts[at + 1] == "Open Capture…"
    win.session.jobs.shutdown()


def _rows_in_sight(table: QTableWidget) -> int:
    view = table.viewport().rect()
    return sum(1 for r in range(table.rowCount())
               if view.contains(table.visualRect(table.model().index(r, 0)).adjusted(0, 0, 0, -1)))


def _headers_fit(table: QTableWidget) -> list[str]:
    header = table.horizontalHeader()
    fm = QFontMetricsF(header.font())
    cut = []
    for c in range(table.columnCount()):
        text = table.horizontalHeaderItem(c).text()
        if fm.horizontalAdvance(text) > header.sectionSize(c) + 1:
            cut.append(text)
    return cut


@pytest.mark.parametrize("size", [(1400, 900), (1920, 1080)])
def test_trace_tabs_show_their_top_10_rows_with_labels_that_fit(qtbot, size):
    from fuseview.ui.trace_view import TraceView

    view = TraceView()
    view.show_dialogs = False
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    with qtbot.waitSignal(view.loaded, timeout=MS):
        view.open_traces([str(CAPTURE)])
    view.tabs.setCurrentWidget(view.kernels)
    qtbot.wait(300)
    QApplication.processEvents()
    plot = view.kernels.plot
    n = plot.bar_count()
    assert n >= 9 and plot.fit_rows() >= min(n, 10), (plot.fit_rows(), n)
    assert f"all {n}" in plot.header.text() or "top 10" in plot.header.text(), plot.header.text()
    assert _rows_in_sight(view.kernels.table) >= 3  # the table keeps room under the plot
    assert _headers_fit(view.kernels.table) == []
    view.tabs.setCurrentWidget(view.join)
    qtbot.wait(200)
    table = view.join.table
    assert _rows_in_sight(table) >= min(table.rowCount(), 10), (_rows_in_sight(table), table.rowCount())
    view.tabs.setCurrentWidget(view.flame)
    qtbot.wait(200)
    assert view.flame.isVisible() and view.flame.height() > 200
    view.shutdown()


def _shoot(monkeypatch, tmp_path, doc, **kw) -> dict:
    """An unattended screenshot in this process; the window's state when the picture is taken."""
    seen: dict = {}
    real_grab = ui_app.grab_to_png

    def grab(win, path) -> None:
        wb = win.workbench
        scene = wb.fused_pane.scene
        seen.update(size=(win.width(), win.height()), win=win)
        if scene is not None:
            view = wb.fused_pane.view
            lod = view.scale_factor()
            vis = view.visible_scene_rect()
            seen["selected"] = [it.box.label for it in scene.selectedItems() if hasattr(it, "box")]
            seen["labels"] = [(it.box.label, it.held_label(lod)) for it in scene.boxes.values()
                              if it.box.kind == "node" and vis.contains(it.sceneBoundingRect())]
            seen["lod"] = lod
        seen["status"] = (win.statusBar().currentMessage(), win.statusBar().toolTip())
        real_grab(win, path)

    monkeypatch.setattr(ui_app, "grab_to_png", grab)
    assert run_workbench(doc, screenshot=str(tmp_path / "shot.png"), **kw) == 0
    return seen


@pytest.mark.parametrize("size", [(1400, 900), (1920, 1080)])
@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_llama_kv_after_apply_preselects_the_attention_and_names_every_matmul(qapp, monkeypatch, tmp_path,
                                                                              size):
    seen = _shoot(monkeypatch, tmp_path, load_document(LLAMA_KV), apply=True, size=size)
    assert seen["size"] == size
    assert seen["selected"] == ["GroupQueryAttention"], seen["selected"]
    matmuls = [held for label, held in seen["labels"] if label == "MatMul"]
    assert matmuls, "no MatMul in sight"
    if style.font(11).pixelSize() * seen["lod"] < 5:  # zoomed out: the held label is drawn
        assert all(h is not None and h[1] == "MatMul" for h in matmuls), (seen["lod"], matmuls)
    shown, full = seen["status"]
    assert full and (shown == full or (shown.endswith(" …") and full.startswith(shown[:-2])))


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_profile_workspace_gives_every_plot_its_top_10_rows_at_1920x1080(qapp, monkeypatch, tmp_path):
    from fuseview import DEMO_MODEL
    from fuseview.ui.profile_plots import BarChart

    cards: dict = {}

    def record(win, path) -> None:
        pp = win.workbench.profile_panel
        assert not win.centralWidget().isVisible() and pp.isVisible()
        for tab in range(pp.tabs.count()):
            pp.tabs.setCurrentIndex(tab)
            QApplication.processEvents()
            for card in pp.plot_cards():
                if card.isVisible() and card.has_data and isinstance(card, BarChart):
                    cards[card.name] = (card.fit_rows(), card.bar_count())
        roof = pp.roofline_card
        pp.tabs.setCurrentWidget(roof)
        QApplication.processEvents()
        cards["roofline_height"] = roof.height()
        cards["size"] = (win.width(), win.height())

    monkeypatch.setattr(ui_app, "grab_to_png", record)
    code = run_workbench(load_document(DEMO_MODEL), apply=True, profile=True,
                         screenshot=str(tmp_path / "s.png"), size=(1920, 1080), tab="Op types")
    assert code == 0 and cards["size"] == (1920, 1080)
    assert cards["roofline_height"] >= 400
    bars = {k: v for k, v in cards.items() if isinstance(v, tuple) and k != "size"}
    assert len(bars) >= 4
    for name, (fit, n) in bars.items():
        assert fit >= min(n, 10), (name, fit, n)


def test_status_text_is_cut_at_a_word():
    fm = QFontMetricsF(style.font(12))
    text = "Applied 9 fusions: validated on onnxruntime: max |diff| 2.7e-07 over 3 input sets (ok)"
    cut = style.elide_words(text, fm, fm.horizontalAdvance(text) / 2)
    assert cut.endswith(" …") and text.startswith(cut[:-2]) and text[len(cut) - 2] == " "
    assert fm.horizontalAdvance(cut) <= fm.horizontalAdvance(text) / 2
    assert style.elide_words(text, fm, 10_000) == text


@pytest.mark.slow
@pytest.mark.parametrize("size", [(1400, 900), (1920, 1080)])
def test_tune_result_view_shows_its_summary_and_effects_unclipped(qtbot, tmp_path, size):
    from PySide6.QtCore import QSettings

    from fuseview.tuning.settings import TuneSettings
    from fuseview.ui.candidates_panel import EFFECT_COLUMN
    from fuseview.ui.main_window import MainWindow

    win = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    win.show_dialogs = False
    qtbot.addWidget(win)
    win.resize(*size)
    win.show()
    wb = win.workbench
    with qtbot.waitSignal(wb.scanned, timeout=MS):
        win.open_file(ASSET_MODELS / "mlp_gelu_erf_ts17.onnx")
    qtbot.waitUntil(lambda: not win.busy, timeout=MS)
    # the layout of a finished tune is the point, not its verdict: the final check stops at a shorter budget
    fast = dict(runs=15, sessions=3, max_batches=1, warmup=2, seeds=1, ort_optimizer="off", budget_s=12)
    with qtbot.waitSignal(wb.tuner.finished, timeout=MS):
        assert wb.tuner.start(TuneSettings(threads=1, **fast)) is not None
    wb.workspace.show_tab("tune")
    qtbot.wait(300)
    bar = wb.tuner.summary
    assert bar.isVisible() and win.width() == size[0]
    assert bar.text.heightForWidth(bar.text.width()) <= bar.text.height() + 1, "the tune summary is cut"
    table = wb.panel.table
    header = table.horizontalHeader()
    left = header.sectionViewportPosition(EFFECT_COLUMN)
    assert 0 <= left and left + header.sectionSize(EFFECT_COLUMN) <= table.viewport().width()
    fm = QFontMetricsF(table.font())
    for row in range(table.rowCount()):
        text = table.item(row, EFFECT_COLUMN).text()
        assert fm.horizontalAdvance(text) <= header.sectionSize(EFFECT_COLUMN), text
    assert _rows_in_sight(table) >= min(table.rowCount(), 10)
    win.session.jobs.shutdown()


def test_the_profile_dock_opened_from_view_or_run_takes_the_centre_and_gives_it_back(qtbot, tmp_path):
    """#37: not only a shown report: the dock opened from View, and Run, give the plots the room; Back to
    graphs (and F10) return it; the dock shown by the window itself leaves the graphs the centre."""
    from PySide6.QtCore import QSettings

    from fuseview import DEMO_MODEL
    from fuseview.ui.main_window import MainWindow

    win = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.Format.IniFormat))
    win.show_dialogs = False
    qtbot.addWidget(win)
    win.resize(1400, 900)
    win.show()
    wb = win.workbench
    pp, ws = wb.profile_panel, wb.workspace
    try:
        with qtbot.waitSignal(wb.scanned, timeout=MS):
            win.open_file(DEMO_MODEL)
        qtbot.waitUntil(lambda: not win.busy, timeout=MS)
        assert not pp.isVisible() and win.centralWidget().isVisible() and not ws.on
        pp.toggleViewAction().trigger()  # View → Profile
        qtbot.waitUntil(lambda: pp.isVisible() and ws.on, timeout=5_000)
        assert not win.centralWidget().isVisible() and pp.report() is None
        qtbot.waitUntil(lambda: pp.width() >= 0.6 * win.width(), timeout=2_000)  # the plots get the room
        assert ws.button.isVisible() and ws.button.text() == "Back to graphs"
        ws.button.click()
        qtbot.waitUntil(lambda: win.centralWidget().isVisible(), timeout=5_000)
        assert not ws.on and pp.isVisible()  # the dock stays, as a strip under the graphs
        ws.action.trigger()  # F10 with the dock open and nothing plotted yet
        assert ws.on and not win.centralWidget().isVisible()
        ws.action.trigger()
        assert not ws.on and win.centralWidget().isVisible()
        pp.run_button.click()  # Run from the dock: a real profile in a child process
        assert ws.on and not win.centralWidget().isVisible() and pp.is_running()
        pp.cancel()
        qtbot.waitUntil(lambda: not pp.is_running(), timeout=MS)
        pp.toggleViewAction().trigger()  # closing the dock gives the graphs back
        qtbot.waitUntil(lambda: win.centralWidget().isVisible() and not ws.on, timeout=5_000)
        # the dock shown by the window itself (no one asked from View): the graphs keep the centre
        pp.show()
        qtbot.wait(100)
        assert pp.isVisible() and win.centralWidget().isVisible() and not ws.on
    finally:
        win.session.jobs.shutdown()
