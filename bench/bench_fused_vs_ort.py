"""fuseview fuse-all vs onnxruntime.transformers.optimizer on GPT-2 exports: fusions, time, latency, error.

    python bench/bench_fused_vs_ort.py [MODEL ...] [--runs N] [--threads T] [--levels disabled all]
                                       [--clock wall|cpu]

Latency of the original, fuseview's fused and the ort-optimized model is measured in one process with
identical session options (CPU) at each onnxruntime optimization level asked for, runs interleaved
round-robin; fuseview vs ort-opt is reported with fuseview.stats.compare_timings (ratio of medians, paired
bootstrap interval, verdict). Logits are compared with the original's on the same inputs. Timings on a
shared machine are noisy: compare the ratios within one run, not absolute figures across runs.
fuseview scans for the CPU provider (the one measured here). `--clock cpu` times each run by the calling
thread's CPU time instead of the wall clock: with 1 thread onnxruntime runs the graph on the calling
thread, so the time a busy machine keeps the process waiting is left out (the wall figures are then
printed beside it).
"""

from __future__ import annotations

import argparse
import collections
import logging
import os
import statistics
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from fuseview.fusion.apply import apply_candidates
from fuseview.fusion.plan import Plan
from fuseview.fusion.scan import load_model, scan_model
from fuseview.runtime.inputs import make_feeds
from fuseview.stats import compare_timings

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = [ROOT / "tests" / "data" / "gpt2" / "gpt2_12l_ts13.onnx"]
LEVELS = {
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
FUSED_OPS = (
    "SkipLayerNormalization",
    "LayerNormalization",
    "FastGelu",
    "Gelu",
    "BiasGelu",
    "Attention",
    "MultiHeadAttention",
    "EmbedLayerNormalization",
    "FusedMatMul",
    "SkipSimplifiedLayerNormalization",
    "SimplifiedLayerNormalization",
    "GemmFastGelu",
    "QuickGelu",
)


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Counts of the fused op types in a model."""
    c = collections.Counter(n.op_type for n in model.graph.node)
    return {k: c[k] for k in FUSED_OPS if c[k]}


def session(model: onnx.ModelProto, threads: int, level: str = "disabled") -> ort.InferenceSession:
    """CPU session at one onnxruntime optimization level."""
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def bench(path: Path, runs: int, threads: int, levels: list[str], clock: str = "wall") -> None:
    """Print fusions, fusion time, latency and logits error for one model."""
    print(f"== {path.name}")
    model = load_model(path)
    t = time.perf_counter()
    scan = scan_model(model, base_dir=path.parent, provider="cpu")
    plan = Plan(scan.candidates, str(path))
    plan.accept_all()
    fused = apply_candidates(model, scan, plan.accepted()).model
    t_fv = time.perf_counter() - t
    print(f"fuseview   scan+apply {t_fv:.2f} s   fused ops {op_counts(fused)}")

    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    t = time.perf_counter()
    opt = optimize_model(str(path), model_type="gpt2", num_heads=0, hidden_size=0, opt_level=0)
    t_ort = time.perf_counter() - t
    ort_model = opt.model
    stats = {k: v for k, v in opt.get_fused_operator_statistics().items() if v}
    print(f"ort-opt    optimize_model {t_ort:.2f} s   reported {stats}")
    print(f"ort-opt    fused ops {op_counts(ort_model)}")
    feeds = make_feeds(model)
    shape = "x".join(str(d) for d in next(iter(feeds.values())).shape)
    for level in levels:
        models = {"original": model, "fuseview": fused, "ort-opt": ort_model}
        sessions = {k: session(m, threads, level) for k, m in models.items()}
        outs = {k: s.run(None, feeds)[0] for k, s in sessions.items()}  # also the warm-up run
        times: dict[str, list[float]] = {k: [] for k in sessions}
        walls: dict[str, list[float]] = {k: [] for k in sessions}
        for _ in range(runs):
            for k, s in sessions.items():
                t, c = time.perf_counter(), time.thread_time()
                s.run(None, feeds)
                times[k].append(time.thread_time() - c if clock == "cpu" else time.perf_counter() - t)
                walls[k].append(time.perf_counter() - t)
        base = statistics.median(times["original"])
        what = "thread CPU time" if clock == "cpu" else "wall time"
        print(
            f"latency    CPU, {threads} thread(s), ORT {level}, input {shape},"
            f" median {what} of {runs} interleaved runs, load average {os.getloadavg()[0]:.1f}"
        )
        for k in sessions:
            med = statistics.median(times[k])
            diff = float(np.max(np.abs(outs[k].astype(np.float64) - outs["original"].astype(np.float64))))
            print(
                f"  {k:<9} {med * 1000:8.2f} ms   x{base / med:4.2f} vs original"
                f"   max|logits diff| {diff:.3g}"
            )
        est = compare_timings(times["ort-opt"], times["fuseview"], paired=True)
        lo, hi = est.ci
        print(
            f"  fuseview / ort-opt latency {1 / est.speedup_p50:.3f}"
            f" [{1 / hi:.3f}, {1 / lo:.3f}] (target <= 0.85)   {est.summary()}"
        )
        if est.noise.warning:
            print(f"  noise: {est.noise.warning}")
        if clock == "cpu":
            wall = compare_timings(walls["ort-opt"], walls["fuseview"], paired=True)
            print(f"  (wall clock: {1 / wall.speedup_p50:.3f} [{1 / wall.ci[1]:.3f}, {1 / wall.ci[0]:.3f}])")


def main() -> None:
    """Run the comparison for each model given (default: GPT-2 12 and 48 layers, ts13)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path, default=DEFAULT)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--levels", nargs="+", choices=list(LEVELS), default=["disabled", "all"])
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time runs by the wall clock or by the calling thread's CPU time (1 thread)")
    args = ap.parse_args()
    for p in args.models:
        bench(p, args.runs, args.threads, args.levels, args.clock)


if __name__ == "__main__":
    main()
