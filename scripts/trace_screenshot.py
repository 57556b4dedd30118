"""Render the trace workspace offscreen to assets/screenshots/ (README pictures).

    QT_QPA_PLATFORM=offscreen python scripts/trace_screenshot.py [BEFORE.json AFTER.json | CAPTURE_DIR]

Two traces give trace_compare_*.png; a capture folder (with its provenance log) trace_workspace_*.png.

Requires: PySide6, pyqtgraph, fuseview
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from fuseview.atomic import write_atomic  # noqa: E402
from fuseview.ui.trace_view import TraceView  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT / "tests" / "data" / "traces"
OUT = ROOT / "assets" / "screenshots"


def main(argv: list[str]) -> int:
    paths = argv or [str(TRACES / "attention_eager.json"), str(TRACES / "attention_compiled.json")]
    app = QApplication.instance() or QApplication([])
    view = TraceView()
    view.show_dialogs = False
    view.resize(1400, 860)
    view.show()
    loop = QEventLoop()
    view.loaded.connect(loop.quit)
    view.failed.connect(lambda msg: (print(msg, file=sys.stderr), loop.quit()))
    view.open_traces(paths)
    loop.exec()
    if view.report is None:
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    prefix = "trace_workspace" if len(paths) == 1 and Path(paths[0]).is_dir() else "trace_compare"
    if prefix == "trace_workspace":
        view.kernels.select(1)  # a fused kernel: several post-grad nodes selected
    shots = [(0, f"{prefix}_kernels.png"), (1, f"{prefix}_events.png"), (3, f"{prefix}_table.png")]
    if prefix == "trace_workspace":
        shots += [(4, f"{prefix}_flame.png"), (5, f"{prefix}_join.png")]
    for tab, name in shots:
        view.tabs.setCurrentIndex(tab)
        for _ in range(5):
            app.processEvents()
        image = view.grab()
        write_atomic(OUT / name, lambda tmp, image=image: image.save(tmp))
        print(OUT / name)
    view.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
