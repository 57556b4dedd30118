"""The command line starts without the heavy libraries: building the parser imports none of them.

Every command's module is imported to build `fuseview --help`; one that imports onnx (0.2 s, or 1 s with
ml_dtypes 0.7) or onnxruntime at its top makes every command, `--version` included, pay for it. The timed
figures are in bench/bench_startup.py; this test guards the cause, not the clock.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.hostile_cases import ROOT

HEAVY = ("onnx", "onnxruntime", "numpy", "PySide6", "pyqtgraph", "networkx", "torch")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["info", "--help"], ["scan", "--help"],
                                  ["fuse", "--help"], ["tune", "--help"], ["profile", "--help"],
                                  ["trace", "--help"]])
def test_the_parser_imports_no_heavy_library(argv):
    code = (
        "import sys\n"
        "from fuseview.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"loaded = sorted(m for m in {HEAVY!r} if m in sys.modules)\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    line = [x for x in out.stderr.splitlines() if x.startswith("LOADED")]
    assert line == ["LOADED []"], out.stderr[-2000:]


def test_the_window_appears_without_pyqtgraph():
    # pyqtgraph is 0.3 s of the window's start: the plots import it when they first draw
    code = (
        "import os, sys\n"
        "from PySide6.QtCore import QTimer\n"
        "import fuseview.ui.main_window as mw\n"
        "show = mw.MainWindow.show\n"
        "def shown(self):\n"
        "    show(self)\n"
        "    QTimer.singleShot(0, lambda: (print('LOADED', 'pyqtgraph' in sys.modules, flush=True),"
        " os._exit(0)))\n"
        "mw.MainWindow.show = shown\n"
        "from fuseview.cli import main\n"
        "sys.exit(main(['open', 'fuseview/data/demo_gpt2_2l.onnx']))\n"
    )
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=env)
    assert "LOADED False" in out.stdout, (out.stdout + out.stderr)[-2000:]
