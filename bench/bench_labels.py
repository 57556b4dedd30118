"""Paint cost of the labels held readable when zoomed out: one 1400x900 frame with and without them.

    QT_QPA_PLATFORM=offscreen python bench/bench_labels.py [MODEL.onnx]   (default: GPT-2 12 layers, flat)

Prints the median of 7 frames per zoom; figures are noisy on a shared machine: compare within one run.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QRectF  # noqa: E402
from PySide6.QtGui import QColor, QImage, QPainter  # noqa: E402

import fuseview.ui.graph_scene as graph_scene  # noqa: E402
from fuseview.graph.layout import layout_graph  # noqa: E402
from fuseview.graph.loader import load_document  # noqa: E402
from fuseview.ui.app import ensure_app  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def frame_ms(scene, source: QRectF) -> float:
    """Milliseconds to paint source into a 1400x900 image (median of 7)."""
    times = []
    for _ in range(7):
        img = QImage(1400, 900, QImage.Format.Format_ARGB32_Premultiplied)
        img.fill(QColor("white"))
        p = QPainter(img)
        t = time.perf_counter()
        scene.render(p, QRectF(img.rect()), source)
        times.append(time.perf_counter() - t)
        p.end()
    return statistics.median(times) * 1000


def main() -> None:
    """Print paint times at 25-45 % zoom with held labels on and off."""
    ensure_app()
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "gpt2" / "gpt2_12l_ts17.onnx"
    doc = load_document(path)
    scene = graph_scene.GraphScene(doc.graph, layout_graph(doc.graph, None))
    whole = scene.itemsBoundingRect()
    held_px = graph_scene._HELD_LABEL_PX
    for scale in (0.25, 0.3, 0.35, 0.45):
        source = QRectF(whole.x(), whole.y(), 1400 / scale, 900 / scale)
        row = []
        for px in (held_px, 1e9):  # 1e9: a label never fits, so none is held
            graph_scene._HELD_LABEL_PX = px
            row.append(frame_ms(scene, source))
        graph_scene._HELD_LABEL_PX = held_px
        print(f"{path.name} zoom {scale:.0%}: {row[0]:.1f} ms with held labels, {row[1]:.1f} ms without")


if __name__ == "__main__":
    main()
