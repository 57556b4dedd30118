"""How long the window's event loop stalls while the profiling panel profiles a model (offscreen).

    QT_QPA_PLATFORM=offscreen python bench/bench_profile_panel.py [MODEL] [--fuse] [--runs N] [--dims seq=128]

Prints the profile's duration, the 10 ms timer's ticks, the longest gap between ticks while the profile ran
and the time the UI thread then spent drawing the plots.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication

from fuseview.ui.profile_panel import ProfilePanel

MODEL = Path(__file__).resolve().parents[2] / "shared" / "models" / "gpt2_12l_ts17.onnx"


def fused_model(path: Path):
    """The model with every candidate of the fusion engine applied (in memory)."""
    from fuseview.fusion.apply import apply_plan
    from fuseview.fusion.plan import Plan
    from fuseview.fusion.scan import load_model, scan_model

    model = load_model(path)
    plan = Plan(scan_model(model).candidates)
    plan.accept_all()
    return apply_plan(model, plan.accepted()).model


def main() -> int:
    """Run one profile in the panel and print the event loop's longest stall."""
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=str(MODEL))
    ap.add_argument("--fuse", action="store_true", help="profile against the fully fused model")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--dims", default="seq=128")
    args = ap.parse_args()
    app = QApplication.instance() or QApplication(sys.argv)
    panel = ProfilePanel()
    panel.resize(1200, 700)
    panel.show()
    panel.set_models(args.model, fused_model(Path(args.model)) if args.fuse else None)
    panel.runs.setValue(args.runs)
    panel.dims.setText(args.dims)
    stamps: list[float] = []
    timer = QTimer()
    timer.setInterval(10)
    timer.timeout.connect(lambda: panel.is_running() and stamps.append(time.perf_counter()))
    result: dict = {}
    panel.profileFinished.connect(lambda _r: (result.update(drawn=time.perf_counter()), app.quit()))
    panel.profileFailed.connect(lambda msg: (result.update(error=msg), app.quit()))
    timer.start()
    t0 = time.perf_counter()
    panel.start_profile()
    app.exec()
    if "error" in result:
        print(f"profile failed: {result['error']}")
        return 1
    end = stamps[-1]
    gaps = [b - a for a, b in zip([t0, *stamps], stamps, strict=False)]
    print(f"model {Path(args.model).name}{' vs fused' if args.fuse else ''}, {args.runs} runs, {args.dims}")
    print(f"profile {end - t0:.2f} s, {len(stamps)} ticks of 10 ms, longest stall {max(gaps) * 1000:.0f} ms")
    print(f"drawing the plots afterwards: {(result['drawn'] - end) * 1000:.0f} ms on the UI thread")
    return 0


if __name__ == "__main__":
    sys.exit(main())
