"""The profiling panel on its own: profile MODEL (and FUSED) or open REPORT; optionally save a PNG and quit.

    python scripts/profile_panel_demo.py MODEL [--fused FUSED] [--runs N] [--dims "seq=32"] [--shot OUT.png]
    python scripts/profile_panel_demo.py --report REPORT.json [--shot OUT.png]

Requires: PySide6, pyqtgraph, fuseview
"""

from __future__ import annotations

import argparse
import sys

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QMainWindow

from fuseview.ui.profile_panel import ProfilePanel


def main() -> int:
    """Run the demo window."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--fused")
    ap.add_argument("--report")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--dims", default="")
    ap.add_argument("--tab", type=int, default=0)
    ap.add_argument("--shot")
    args = ap.parse_args()
    app = QApplication.instance() or QApplication(sys.argv)
    win = QMainWindow()
    panel = ProfilePanel(win)
    win.setCentralWidget(panel)
    win.resize(1300, 760)
    win.show()

    def shot(_report=None) -> None:
        panel.tabs.setCurrentIndex(args.tab)
        if args.shot:
            QTimer.singleShot(300, lambda: (panel.grab().save(args.shot), app.quit()))

    panel.profileFinished.connect(shot)
    panel.profileFailed.connect(lambda msg: (print(msg, file=sys.stderr), app.quit() if args.shot else None))
    if args.report:
        panel.open_report(args.report)
        shot()
    elif args.model:
        panel.set_models(args.model, args.fused)
        panel.runs.setValue(args.runs)
        panel.dims.setText(args.dims)
        panel.start_profile()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
