"""How long the process lingers after the window closes (open a model, wait for it, close, time the exit).

    python bench/bench_exit.py [MODEL.onnx ...]   (default: the 12-layer GPT-2 in tests/data)

Each model runs twice: as `fuseview MODEL` ends (end_process) and with the full teardown (--slow).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = r"""
import sys, time
from PySide6.QtCore import QTimer
from fuseview.ui.app import ensure_app, run_app
import fuseview.ui.app as app_mod
from fuseview.ui.main_window import MainWindow

app = ensure_app()
orig_show = MainWindow.show

def show(self):
    orig_show(self)
    def shown():
        # let the scan finish too, as a user would look at the candidates before quitting
        def close():
            if self.workbench.session.decisions is None:
                QTimer.singleShot(50, close)
                return
            print("closing", time.time(), flush=True)
            self.close()
        QTimer.singleShot(200, close)
    self.document_shown.connect(shown)

MainWindow.show = show
run_app(path=sys.argv[1], end_process="--slow" not in sys.argv)
"""


def main() -> None:
    """Print seconds from window close to process exit, per model."""
    models = [Path(a) for a in sys.argv[1:]] or [ROOT / "tests" / "data" / "gpt2" / "gpt2_12l_ts17.onnx"]
    for m, flags in [(m, f) for m in models for f in ([], ["--slow"])]:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(m), *flags],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
        )
        closed = None
        for line in proc.stdout:
            if line.startswith("closing"):
                closed = float(line.split()[1])
        proc.wait()
        end = time.time()
        how = "full teardown" if flags else "end_process"
        print(f"{m.name} ({how}): exit {proc.returncode}, {end - closed:.2f} s from close to process end")


if __name__ == "__main__":
    main()
