"""Save a picture of the window at 1400 x 900 after Fusion → Tune… (docs/screenshots/tune_summary.png):
the summary bar over the candidates, and the measured effect among their first columns.

    QT_QPA_PLATFORM=offscreen python scripts/tune_screenshot.py MODEL OUT.png [--budget 60] [--threads 1]

Requires: PySide6, pyqtgraph, fuseview
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    """Open the model in the window, tune it in the background, save the window once the bar shows."""
    from PySide6.QtCore import QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from fuseview.tuning.settings import TuneSettings
    from fuseview.ui.main_window import MainWindow

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--budget", type=float, default=60.0)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory() as tmp:
        win = MainWindow(settings=QSettings(str(Path(tmp) / "s.ini"), QSettings.Format.IniFormat))
        win.resize(1400, 900)
        win.show()
        loop = QEventLoop()
        win.workbench.scanned.connect(loop.quit)
        win.open_file(args.model)
        loop.exec()
        win.workbench.tuner.finished.connect(lambda _result: QTimer.singleShot(500, loop.quit))
        win.workbench.tuner.start(TuneSettings(threads=args.threads, budget_s=args.budget))
        loop.exec()
        app.processEvents()
        win.grab().save(str(args.out))
        win.session.jobs.shutdown()
        win.close()
    app.processEvents()
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
