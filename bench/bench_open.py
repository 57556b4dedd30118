"""Open time of big graphs in the window, this tree against another (a copy of main), runs interleaved.

    QT_QPA_PLATFORM=offscreen python bench/bench_open.py --base /tmp/base [--sizes 10000,20000,50000]
        [--kinds chain,wide] [--repeat 1] [--flat | --expand-all]

Makes the models (tests/big_graphs.py: Relu/Neg nodes without name scopes, one chain or 100 side by side)
in a temporary folder, then runs `fuseview open MODEL` as a user does, in a fresh process per run, for this
tree and for --base one after the other. Per run: "shown", seconds from the process start until the graph
is on screen (load and layout in a worker, the scene built; document_shown), with the process's CPU
seconds by then; "settled", until the background scan and onnxruntime check are done too; the longest gap
between 10 ms timer ticks from the window's first show until settled (the UI's longest freeze); and the
drawn boxes. --flat opens with every node drawn; --expand-all opens as the window does, then times Expand
all (from the call until the flat graph is on screen, wall and CPU seconds). Either way, once settled:
"frames", the median and longest milliseconds of 44 steps a user makes (12 zooms out by 0.8, 12 back
in, 20 pans by half a viewport), each step the zoom or scroll and one paint of the view. The last lines give
the ratio base / this tree of the medians. Prints `uptime` first: the figures are wall times on a shared
machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.big_graphs import KINDS, write_big_model  # noqa: E402

# Run inside the tree under test (PYTHONPATH): the real `fuseview open MODEL`, its window watched.
DRIVER = r"""
import json, os, sys, time
T0 = time.perf_counter()
from PySide6.QtCore import QTimer
import fuseview.ui.main_window as mw
from fuseview.ui.headless import pending_work
out = {}
ticks = []
init = mw.MainWindow.__init__
EXPAND = os.environ.get("FUSEVIEW_BENCH_EXPAND") == "1"
def frames(win):
    view, bar, times = win.view, win.view.verticalScrollBar(), []
    steps = [lambda: view.zoom_by(0.8)] * 12 + [lambda: view.zoom_by(1.25)] * 12
    steps += [lambda: bar.setValue(bar.value() + view.viewport().height() // 2)] * 20
    for step in steps:
        t = time.perf_counter()
        step()
        view.viewport().repaint()
        times.append((time.perf_counter() - t) * 1000)
    return times
def watched(self, *a, **k):
    init(self, *a, **k)
    win = self
    def shown():
        if EXPAND and "expand_from" not in out:
            out["expand_from"], out["expand_cpu0"] = time.perf_counter(), time.process_time()
            QTimer.singleShot(0, win.expand_all)
            return
        if "shown_s" not in out:
            out["shown_s"] = time.perf_counter() - T0
            out["shown_cpu_s"] = time.process_time()
            if EXPAND:
                out["expand_s"] = time.perf_counter() - out.pop("expand_from")
                out["expand_cpu_s"] = time.process_time() - out.pop("expand_cpu0")
            out["boxes"] = win.counts()["boxes"]
            QTimer.singleShot(0, settle)
    def settle():
        if pending_work(win):
            QTimer.singleShot(50, settle)
            return
        out["settled_s"] = time.perf_counter() - T0
        gaps = [b - a for a, b in zip(ticks, ticks[1:])]
        out["stall_ms"] = max(gaps, default=0.0) * 1000
        win.view.viewport().repaint()
        out["frames_ms"] = frames(win)  # once settled: no worker competes for the GIL
        print("RESULT " + json.dumps(out), flush=True)
        os._exit(0)
    tick = QTimer(self)
    tick.setInterval(10)
    tick.timeout.connect(lambda: ticks.append(time.perf_counter()))
    tick.start()
    self.document_shown.connect(shown)
    self.error_shown.connect(lambda m: (print("ERROR " + m, flush=True), os._exit(3)))
mw.MainWindow.__init__ = watched
from fuseview.cli import main
sys.exit(main(["open", *sys.argv[1:]]))
"""


def run_once(tree: Path, model: Path, timeout: float, flat: bool = False, expand: bool = False) -> dict:
    """One fresh `fuseview open MODEL` (with --flat: every node drawn; expand: then Expand all) of tree."""
    env = dict(os.environ, PYTHONPATH=str(tree), QT_QPA_PLATFORM="offscreen")
    env["FUSEVIEW_BENCH_EXPAND"] = "1" if expand else "0"
    t = time.perf_counter()
    command = [sys.executable, "-c", DRIVER, str(model), *(["--flat"] if flat else [])]
    with tempfile.TemporaryDirectory(prefix="fuseview-bench-") as home:
        env["XDG_CONFIG_HOME"] = home  # no recent-files list written home
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=tempfile.gettempdir())
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{tree} on {model.name}: no result after {time.perf_counter() - t:.0f} s "
                       f"(exit {done.returncode}): {(done.stdout + done.stderr)[-600:]}")


def _fmt(rows: list[dict]) -> str:
    keys = ("shown_s", "shown_cpu_s", "settled_s", "stall_ms")
    med = {k: statistics.median(r[k] for r in rows) for k in keys}
    expand = ""
    if "expand_s" in rows[0]:
        expand = (f"expand all {statistics.median(r['expand_s'] for r in rows):6.2f} s "
                  f"({statistics.median(r['expand_cpu_s'] for r in rows):5.2f} CPU s), ")
    frames = [t for r in rows for t in r["frames_ms"]]
    return (f"{expand}shown {med['shown_s']:6.2f} s ({med['shown_cpu_s']:5.2f} CPU s), "
            f"settled {med['settled_s']:6.2f} s, longest UI stall {med['stall_ms']:6.0f} ms, "
            f"frames {statistics.median(frames):5.1f} / {max(frames):6.1f} ms (median / longest), "
            f"{rows[0]['boxes']:,} boxes")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, help="another tree to compare with (e.g. a copy of main)")
    p.add_argument("--sizes", default="10000,20000,50000")
    p.add_argument("--kinds", default="chain,wide")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--flat", action="store_true", help="open with --flat (every node drawn, no groups)")
    p.add_argument("--expand-all", action="store_true", help="open, then time Expand all (every node drawn)")
    args = p.parse_args(argv)
    if args.flat and args.expand_all:
        p.error("--flat or --expand-all, not both")
    kinds = args.kinds.split(",")
    if not set(kinds) <= set(KINDS):
        p.error(f"--kinds: of {', '.join(KINDS)}")
    print(subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
    trees = {"this": ROOT} | ({"base": args.base.resolve()} if args.base else {})
    with tempfile.TemporaryDirectory(prefix="fuseview-big-") as folder:
        models = [write_big_model(Path(folder), int(n), k) for k in kinds for n in args.sizes.split(",")]
        results: dict[tuple[str, str], list[dict]] = {}
        for model in models:
            for _ in range(args.repeat):
                for name, tree in trees.items():  # interleaved: this, base, this, base ...
                    results.setdefault((model.stem, name), []).append(
                        run_once(tree, model, args.timeout, args.flat, args.expand_all))
            for name in trees:
                print(f"{model.stem:12} {name:4}: {_fmt(results[(model.stem, name)])}", flush=True)
        if args.base:
            first = ("expand_s", "expand_cpu_s") if args.expand_all else ("shown_s", "shown_cpu_s")
            print(f"ratio base / this (medians): {first[0]} (wall), {first[1]} (CPU), settled (wall), "
                  "frame (median of every step)")
            for model in models:
                this, base = results[(model.stem, "this")], results[(model.stem, "base")]
                ratio = [statistics.median(r[k] for r in base) / statistics.median(r[k] for r in this)
                         for k in (*first, "settled_s")]
                ratio.append(statistics.median(t for r in base for t in r["frames_ms"])
                             / statistics.median(t for r in this for t in r["frames_ms"]))
                print(f"{model.stem:12}: " + ", ".join(f"{x:.1f}x" for x in ratio))
    return 0


if __name__ == "__main__":
    sys.exit(main())
