"""fuseview tune over real models: tune time, tuned ÷ original and tuned ÷ accept-all latency, with intervals.

    python bench/bench_tune.py [MODEL ...] [--threads 1 2] [--budget 120] [--ort-opt all] [--sessions 3]
        [--check-budget 60] [--busy 2]

Default models: the demo model, every model in assets/models and assets/models/families. For each model and
thread count, `fuseview.tune` runs at those settings (its own measurements decide), then a separate check
(fresh sessions, not the runs the decisions came from) times the original, accept-all and the tuned model
interleaved, sequentially until both ratios decide or --check-budget ends (fuseview.runtime.ab), and
states each ratio of medians (time ÷ time: below 1 is faster) with its
95 % interval (fuseview.stats, Welch's t over per-session medians) and a verdict said of the tuned model.
Timings on a shared machine are noisy: compare the ratios within one run; say how loaded the machine was.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuseview import DEMO_MODEL  # noqa: E402
from fuseview.errors import FuseviewError  # noqa: E402
from fuseview.fusion.pipeline import FuseOptions, build_fused, dims_for  # noqa: E402
from fuseview.fusion.plan import Plan  # noqa: E402
from fuseview.runtime.ab import measure_until_decided  # noqa: E402
from fuseview.runtime.inputs import make_feeds  # noqa: E402
from fuseview.stats import compare_timings  # noqa: E402
from fuseview.tuning.settings import TuneSettings  # noqa: E402
from fuseview.workflows.tune import tune  # noqa: E402


def default_models() -> list[Path]:
    """The demo model and every model in the checkout's model folders."""
    folders = [ROOT / "assets" / "models", ROOT / "assets" / "models" / "families"]
    return [DEMO_MODEL] + [p for f in folders for p in sorted(f.glob("*.onnx"))]


def ratio_text(original_rows: np.ndarray, other_rows: np.ndarray) -> str:
    """'0.93 [0.90, 0.97] faster': other ÷ original time (below 1: other is faster), verdict of other."""
    est = compare_timings(original_rows, other_rows, paired=True)  # original / other: >1 other faster
    lo, hi = est.ci
    return f"{1 / est.speedup_p50:.2f} [{1 / hi:.2f}, {1 / lo:.2f}] {est.verdict}"


def bench(path: Path, threads: int, args: argparse.Namespace) -> str:
    """One line: tune time, what it kept, and the independent check's ratios."""
    settings = TuneSettings(threads=threads, ort_opt=args.ort_opt, budget_s=args.budget, provider="cpu")
    t0 = time.perf_counter()
    res = tune(path, settings)
    seconds = time.perf_counter() - t0
    rep = res.report
    model = res.original
    dims = dict(rep.config["dims"])  # as tune measured it (a KV-cache decoder: its decode step)
    opts = FuseOptions(dims=dims, validate=False, strict=False)
    from fuseview.fusion.pipeline import scan_for_fusion

    scan = scan_for_fusion(model, dims_for(model, opts), path)
    everything = Plan(scan.candidates).accept_all()
    over = set(rep.baseline.get("over_tolerance", []))
    accept_all = build_fused(model, scan, [c for c in everything if c not in over], opts).model
    models = [model, accept_all, res.model]
    # the one sequential runner, fresh sessions: until both ratios decide or the check's budget ends
    seq = measure_until_decided(models, make_feeds(model, dims, 0), [(0, 2), (1, 2)],
                                budget_s=args.check_budget, provider="cpu", opt_level=args.ort_opt,
                                threads=threads, sessions=args.sessions, runs=args.sessions * 10, warmup=3,
                                seed=1, level=0.95)
    grouped = seq.grouped
    tuned_vs_orig = ratio_text(grouped[0], grouped[2])
    tuned_vs_all = ratio_text(grouped[1], grouped[2])
    stop = f" stopped:{rep.stopped}" if rep.stopped else ""
    return (f"{path.stem[:26]:<27}{threads:>3}  {seconds:6.1f} s{stop:<14} kept {len(rep.accepted()):>2}/"
            f"{len(rep.decisions):<3} {rep.final.chosen:<11} tuned/original {tuned_vs_orig:<34}"
            f" tuned/accept-all {tuned_vs_all}  (check: {seq.runs} runs a model)\n"
            f"{'':<30}tune's own verdict: {rep.final.verdict}; {rep.final.summary()}")


def main() -> int:
    """Run the benchmark and print one line per model and thread count."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--budget", type=float, default=120.0)
    ap.add_argument("--ort-opt", default="all")
    ap.add_argument("--sessions", type=int, default=3, help="sessions a model in each check batch (3)")
    ap.add_argument("--check-budget", type=float, default=60.0,
                    help="seconds the independent check may take (sequential, fresh sessions; 60)")
    ap.add_argument("--busy", type=int, default=0, help="CPU-bound processes started beside it (0)")
    args = ap.parse_args()
    from contextlib import nullcontext

    from tests.load_helpers import busy_loops

    with busy_loops(args.busy) if args.busy else nullcontext():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """One line per model and thread count, with the load at the start and the end."""
    models = args.models or default_models()
    print(f"cpu count {os.cpu_count()}, load average {os.getloadavg()[0]:.2f} (1 min) at start,"
          f" {args.busy} busy loops beside; ORT {args.ort_opt}; budget {args.budget:g} s;"
          f" check: batches of {args.sessions} sessions x 10 runs a model, up to {args.check_budget:g} s")
    print(f"{'model':<27}{'thr':>3}  {'tune':>8}{'':<14} {'kept':<11}{'chosen':<11} ratios: time ÷ time,"
          " 95% CI, verdict of the tuned model")
    for path in models:
        for threads in args.threads:
            try:
                print(bench(path, threads, args), flush=True)
            except FuseviewError as exc:
                print(f"{path.stem[:26]:<27}{threads:>3}  error: {exc}", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} (1 min) at the end")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
