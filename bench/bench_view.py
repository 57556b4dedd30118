"""Time the viewer on big graphs: building the scene, and painting one frame at fit and at 1:1 zoom.

    QT_QPA_PLATFORM=offscreen python bench/bench_view.py [MODEL.onnx ...]

Prints one line per model and zoom; paint times are the median of 5 frames rendered into a QImage the
size of a 1400x900 window's view.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QRectF, Qt  # noqa: E402
from PySide6.QtGui import QImage, QPainter  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

import fuseview.ui  # noqa: E402,F401  - applies the PySide6 None-refcount workaround first
from fuseview.graph.layout import layout_graph  # noqa: E402
from fuseview.graph.loader import load_document  # noqa: E402
from fuseview.ui.app import ensure_app  # noqa: E402
from fuseview.ui.graph_scene import GraphScene, route_paths  # noqa: E402
from fuseview.ui.graph_view import GraphView  # noqa: E402

DEFAULT = [
    ROOT.parent / "shared" / "models" / "gpt2_48l_ts13.onnx",
    ROOT / "assets" / "models" / "gpt2_96l_ts13.onnx",
]
W, H = 1120, 800  # the view's size inside a 1400x900 window with the inspector open


def paint_ms(view: GraphView, repeats: int = 5) -> tuple[float, float, int]:
    """First-frame and median milliseconds to paint the view into an image, and the items visible."""
    img = QImage(W, H, QImage.Format.Format_ARGB32_Premultiplied)
    times = []
    for _ in range(repeats):
        img.fill(0xFFFFFFFF)
        p = QPainter(img)
        p.setRenderHints(view.renderHints())
        t = time.perf_counter()
        view.render(p, QRectF(0, 0, W, H), view.viewport().rect())
        p.end()
        times.append((time.perf_counter() - t) * 1000)
    visible = len(view.items(view.viewport().rect(), Qt.ItemSelectionMode.IntersectsItemBoundingRect))
    return times[0], statistics.median(times), visible


def bench(model: Path) -> None:
    t0 = time.perf_counter()
    doc = load_document(model)
    t1 = time.perf_counter()
    lay = layout_graph(doc.graph, None)
    t2 = time.perf_counter()
    paths = route_paths(lay)  # the window builds these in its worker thread
    t2b = time.perf_counter()
    scene = GraphScene(doc.graph, lay, paths=paths)
    t3 = time.perf_counter()
    view = GraphView()
    view.resize(W, H)
    view.setScene(scene)
    name = model.stem
    print(
        f"{name}: {len(lay.boxes):,} boxes, {len(lay.routes):,} routes (flat); load {t1 - t0:.2f} s, "
        f"layout {t2 - t1:.2f} s, edge paths {t2b - t2:.2f} s (worker), scene {t3 - t2b:.2f} s "
        "(in one go; the window adds a big one in 30 ms slices)"
    )
    view.fit()
    first, ms, n = paint_ms(view)
    print(
        f"{name}: paint at fit zoom ({view.scale_factor() * 100:.2f}%, {n:,} items visible, overview): "
        f"{ms:.1f} ms a frame, first frame {first:.1f} ms (draws the cached picture)"
    )
    scene.set_overview(False)  # the same frame painted item by item, for comparison
    first, ms, n = paint_ms(view, repeats=3)
    print(f"{name}: paint at fit zoom item by item (no overview picture, {n:,} items): {ms:.1f} ms a frame")
    scene.set_overview(True)
    # fit of a very tall graph is a sliver: also the densest readable-overview case, all columns at 10%
    view.set_zoom(0.1)
    view.centerOn(scene.sceneRect().center())
    first, ms, n = paint_ms(view)
    print(f"{name}: paint at 10% zoom ({n:,} items visible): {ms:.1f} ms a frame")
    view.set_zoom(1.0)
    view.centerOn(scene.sceneRect().center())
    first, ms, n = paint_ms(view)
    print(f"{name}: paint at 1:1 zoom ({n:,} items visible): {ms:.1f} ms a frame, first {first:.1f} ms")


def ui_stalls(model: Path, mode: str = "flat") -> None:
    """Open a model in the window and report the longest gap between 10 ms timer ticks (UI freezes)."""
    from PySide6.QtCore import QEventLoop, QSettings, QTimer

    from fuseview.ui.main_window import MainWindow

    win = MainWindow(
        settings=QSettings(str(Path(os.devnull)), QSettings.Format.IniFormat), expansion_mode=mode
    )
    win.remember_files = False
    win.resize(1400, 900)
    win.show()
    ticks: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    loop = QEventLoop()
    win.document_shown.connect(loop.quit)
    win.error_shown.connect(lambda _m: loop.quit())
    t0 = time.perf_counter()
    timer.start()
    win.open_file(model)
    loop.exec()
    shown = time.perf_counter()
    for _ in range(20):  # first paints
        QApplication.processEvents()
    timer.stop()
    gaps = [b - a for a, b in zip([t0] + ticks, ticks + [time.perf_counter()], strict=False)]
    print(
        f"{model.stem} ({mode}) in the window: shown after {shown - t0:.2f} s; longest UI stall "
        f"{max(gaps) * 1000:.0f} ms (scene built in slices, first paint, GC; load and layout run in a worker)"
    )
    win.close()


def main(argv: list[str]) -> int:
    ensure_app()
    models = [Path(a) for a in argv] or [m for m in DEFAULT if m.is_file()]
    for m in models:
        bench(m)
    for m in models:
        for mode in ("auto", "flat"):  # auto: how a big graph opens by default (grouped by scope)
            ui_stalls(m, mode)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
