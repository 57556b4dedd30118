"""Time the workbench on big graphs: scan in the worker, candidate overlay, one decision, Apply.

    QT_QPA_PLATFORM=offscreen python bench/bench_workbench.py [MODEL.onnx ...]

Prints one line per model: nodes, candidates, the scan's time in its worker thread, the overlay's time
on the UI thread (marks, badges, near-miss tooltips), the time of one accept (table + overlay refresh),
and Apply's wall time (apply + checker + onnxruntime validation + layout of the fused graph).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QSettings, QTimer  # noqa: E402

from fuseview.ui.app import ensure_app  # noqa: E402
from fuseview.ui.main_window import MainWindow  # noqa: E402

DEFAULT = [ROOT.parent / "shared" / "models" / n for n in ("gpt2_12l_ts17.onnx", "gpt2_48l_ts13.onnx")]


def wait(signal, timeout_ms: int = 300_000) -> None:
    """Run the event loop until signal fires."""
    loop = QEventLoop()
    signal.connect(loop.quit)
    QTimer.singleShot(timeout_ms, loop.quit)
    loop.exec()
    signal.disconnect(loop.quit)


def main(paths: list[Path]) -> None:
    """One line of figures per model."""
    ensure_app()
    for path in paths:
        win = MainWindow(settings=QSettings("/tmp/fuseview-bench.ini", QSettings.Format.IniFormat))
        win.show_dialogs = False
        win.resize(1400, 900)
        win.show()
        wb = win.workbench
        win.open_file(path)
        wait(wb.scanned)
        t = time.perf_counter()
        wb._paint_original()
        overlay = time.perf_counter() - t
        first = wb.session.decisions.candidates[0].id
        wb.panel.select_id(first)
        t = time.perf_counter()
        wb.panel.accept_current()
        accept = time.perf_counter() - t
        wb.panel.accept_all()
        t = time.perf_counter()
        wb.apply()
        wait(wb.applied)
        applied = time.perf_counter() - t
        print(
            f"{path.name}: {len(wb.session.root.graph.nodes)} nodes,"
            f" {len(wb.session.decisions.candidates)} candidates; "
            f"scan {wb.session.scan_seconds * 1000:.0f} ms (worker), overlay {overlay * 1000:.0f} ms, "
            f"accept {accept * 1000:.0f} ms, apply+validate+layout {applied:.2f} s",
            flush=True,
        )
        win.session.jobs.shutdown()
        win.close()
        win.deleteLater()


if __name__ == "__main__":
    # ../shared/models sits beside this project's checkout; elsewhere the 12-layer test export stands in
    fallback = [ROOT / "tests" / "data" / "gpt2" / "gpt2_12l_ts17.onnx"]
    main([Path(p) for p in sys.argv[1:]] or [m for m in DEFAULT if m.is_file()] or fallback)
