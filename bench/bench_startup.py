"""Start-up figures: `import fuseview`, the CLI's start (--version, info/scan --help), the window appearing.

Each figure is the median wall time of --repeat fresh processes, less a bare `python -c pass` (the
targets: the CLI ≤ 0.3 s beyond Python itself, the window ≤ 1 s). The window is `fuseview open MODEL`
as the command line runs it, timed from the process start until its event loop has shown the window
(offscreen; the model goes on loading in the background). `--importtime` adds the slowest imports of each
(python -X importtime), to find what a start pulls in.

    QT_QPA_PLATFORM=offscreen python bench/bench_startup.py [--repeat 7] [--importtime]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Runs `fuseview open DEMO` through the real command line; once the window's event loop has shown it,
# prints "shown" and ends the process (the bench times the whole process up to that line).
WINDOW = """
import os, sys
from PySide6.QtCore import QTimer
import fuseview.ui.main_window as mw
show = mw.MainWindow.show
def shown(self):
    show(self)
    QTimer.singleShot(0, lambda: (print("shown", flush=True), os._exit(0)))
mw.MainWindow.show = shown
from fuseview.cli import main
sys.exit(main(["open", sys.argv[1]]))
"""

CASES = {
    "python -c pass": ["-c", "pass"],
    "import fuseview": ["-c", "import fuseview"],
    "fuseview --version": ["-m", "fuseview", "--version"],
    "fuseview info --help": ["-m", "fuseview", "info", "--help"],
    "fuseview scan --help": ["-m", "fuseview", "scan", "--help"],
    "fuseview info DEMO": ["-m", "fuseview", "info", "DEMO"],
    "window shown (fuseview open DEMO)": ["-c", WINDOW, "DEMO"],
}
TARGETS = {"fuseview --version": 0.3, "fuseview info --help": 0.3, "fuseview scan --help": 0.3,
           "import fuseview": 0.3, "fuseview info DEMO": 0.25, "window shown (fuseview open DEMO)": 1.0}


def _env() -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _time(args: list[str], window: bool) -> float:
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=_env(), timeout=120)
    dt = time.perf_counter() - t0
    if out.returncode != 0 or (window and "shown" not in out.stdout):
        raise SystemExit(f"{args[:3]} failed ({out.returncode}): {out.stderr.strip()[-400:]}")
    return dt


def _slowest_imports(args: list[str], top: int = 6) -> list[str]:
    out = subprocess.run([sys.executable, "-X", "importtime", *args], capture_output=True, text=True,
                         env=_env(), timeout=120)
    rows = []
    for line in out.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = (x.strip() for x in line[len("import time:"):].split("|"))
            if cumulative.isdigit() and not name.startswith(" "):
                rows.append((int(cumulative), name.strip()))
    # top-level names only would hide what fuseview pulls in: show the largest cumulative entries
    rows.sort(reverse=True)
    return [f"{us / 1e3:7.1f} ms  {name}" for us, name in rows[:top]]


def main() -> None:
    """Print the median start-up time of each case, less bare Python, against its target."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--importtime", action="store_true", help="also list the slowest imports of each case")
    ap.add_argument("--model", default=str(ROOT / "fuseview" / "data" / "demo_gpt2_2l.onnx"))
    a = ap.parse_args()
    for args in CASES.values():  # warm the bytecode and file caches once
        _time([x.replace("DEMO", a.model) for x in args], args[1] == WINDOW)
    medians = {}
    for label, args in CASES.items():
        args = [a.model if x == "DEMO" else x for x in args]
        times = [_time(args, label.startswith("window")) for _ in range(a.repeat)]
        medians[label] = statistics.median(times)
    base = medians["python -c pass"]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; median of {a.repeat} runs each")
    print(f"{'case':<36}{'wall':>9}{'beyond python':>15}{'target':>9}")
    for label, t in medians.items():
        target = TARGETS.get(label)
        beyond = t - base
        verdict = "" if target is None else (f"{target:>7.1f}s " + ("met" if beyond <= target else "MISSED"))
        print(f"{label:<36}{t:>8.3f}s{beyond:>14.3f}s{verdict:>13}")
        if a.importtime and label != "python -c pass":
            for row in _slowest_imports([a.model if x == "DEMO" else x for x in CASES[label]]):
                print(f"      {row}")


if __name__ == "__main__":
    main()
