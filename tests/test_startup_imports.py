"""The command line starts without the heavy libraries: building the parser imports none of them.

Every command's module is imported to build `fuseview --help`; one that imports onnx (0.2 s, or 1 s with
ml_dtypes 0.7) or onnxruntime at its top makes every command, `--version` included, pay for it. The timed
figures are in bench/bench_startup.py; this test guards the cause, not the clock.
"""

from __future__ import annotations

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
