"""Non-GEMM share of original and fused models, and the Roofline card's picture (docs/roofline.md).

    QT_QPA_PLATFORM=offscreen python scripts/roofline_figures.py MODEL... [--runs 20] [--threads 1]
        [--report REPORT.json]... [--screenshot OUT.png]

Each model is fused with every candidate (as `fuseview fuse`, in memory), then profiled against its fused
version (as `fuseview profile --against`); --report adds a report `fuseview profile --against --json`
already wrote (a real-width model: the CLI keeps its weights on disk). One line per report gives the
non-GEMM share of each model, the bytes, the machine's roofline and the latency verdict; --screenshot
draws the first report's Roofline card to a PNG.

Requires: fuseview, onnxruntime, PySide6, pyqtgraph
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    """Fuse and profile each model; print the shares; optionally save the first one's card."""
    import fuseview
    from fuseview.runtime.report import load_report, verdict_line

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--report", action="append", default=[], type=Path)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--screenshot", type=Path)
    args = ap.parse_args()
    first = None
    made = ((path, None) for path in args.models)
    for path, rep in [*made, *((p, load_report(p)) for p in args.report)]:
        if rep is None:
            fused = fuseview.fuse(path).model
            rep = fuseview.profile(path, against=fused, runs=args.runs, threads=args.threads, ort_opt="all",
                                   attribution_opt="disabled").to_json()  # as `fuseview profile` does
        first = first or rep
        a, b = (m["roofline"] for m in rep["models"])
        mach = a["machine"]
        print(f"{path.name}: non-GEMM share original {a['non_gemm_share']:.1%} -> fused"
              f" {b['non_gemm_share']:.1%}; bytes {a['bytes'] / 1e6:.2f} -> {b['bytes'] / 1e6:.2f} MB,"
              f" GFLOP {a['flops'] / 1e9:.3f} -> {b['flops'] / 1e9:.3f}; roofline {mach['peak_gflops']:.1f}"
              f" GFLOP/s, {mach['peak_gbps']:.1f} GB/s; {verdict_line(rep)}")
    if args.screenshot and first is not None:
        from PySide6.QtWidgets import QApplication

        from fuseview.ui.roofline_card import RooflineCard

        app = QApplication.instance() or QApplication([])
        card = RooflineCard()
        card.resize(1000, 720)
        card.show()
        card.set_report(first)
        app.processEvents()
        print(f"wrote {card.export(args.screenshot)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
