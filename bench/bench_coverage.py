"""Coverage matrix: per model, fuseview's candidates per rule, fused counts next to onnxruntime's transformers
optimizer, the validated difference, and fused + ORT_ENABLE_ALL / original + ORT_ENABLE_ALL latency.

    python bench/bench_coverage.py [MODEL ...] [--runs N] [--threads T] [--no-latency]

Models: tests/data/gpt2, assets/models and assets/models/families (all in the checkout). Every candidate a
plan accepts (conflicts resolved biggest first) is applied; the fused model must pass onnx's full checker and
match the original in onnxruntime (max abs over every output, generated inputs). Latency: both models in
onnxruntime CPU with ORT_ENABLE_ALL, runs interleaved pair by pair, the ratio of medians with a paired
bootstrap interval from fuseview.stats.compare_timings (< 1 means the fused model is faster). The ORT
optimizer column is onnxruntime.transformers.optimizer's fused-op count for GPT-2/BERT-style models
("-" where it has no model type). Prints one markdown table (the README's coverage matrix).
"""

from __future__ import annotations

import argparse
import collections
import logging
import time
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from fuseview.fusion.apply import apply_candidates
from fuseview.fusion.plan import Plan
from fuseview.fusion.scan import load_model, scan_model
from fuseview.fusion.validate import validate
from fuseview.runtime.inputs import make_feeds
from fuseview.stats import compare_timings

ROOT = Path(__file__).resolve().parent.parent
ASSETS = ROOT / "assets" / "models"
FOLDERS = (ROOT / "tests" / "data" / "gpt2", ASSETS, ASSETS / "families")
ORT_TYPES = {"gpt2": "gpt2", "bert": "bert"}  # file-name prefix -> onnxruntime.transformers model type
SKIP = {"gpt2_96l_ts13"}  # 96 layers: minutes of onnxruntime optimizer time; bench_fused_vs_ort covers it


def default_models() -> list[Path]:
    """Every .onnx in the checkout's model folders."""
    return [p for f in FOLDERS for p in sorted(f.glob("*.onnx")) if p.stem not in SKIP]


def ort_optimizer_fused(path: Path) -> int | None:
    """Fused ops onnxruntime.transformers.optimizer makes (None where it has no model type for it)."""
    kind = next((t for pre, t in ORT_TYPES.items() if path.stem.startswith(pre)), None)
    if kind is None:
        return None
    try:  # the optimizer needs sympy for its symbolic shape inference (pip install sympy)
        import sympy  # noqa: F401
    except ImportError:
        return None
    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimize_model(str(path), model_type=kind, num_heads=0, hidden_size=0, opt_level=0)
    stats = opt.get_fused_operator_statistics()
    return int(sum(v for k, v in stats.items() if v and k not in ("MatMul", "Gemm")))


def _session(model: onnx.ModelProto, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def latency_ratio(original: onnx.ModelProto, fused: onnx.ModelProto, runs: int, threads: int) -> str:
    """fused / original median latency with ORT_ENABLE_ALL, interleaved, with its 95% interval."""
    feeds = make_feeds(original, None, seed=0)
    a, b = _session(fused, threads), _session(original, threads)
    for s in (a, b):
        s.run(None, feeds)
    ta, tb = [], []
    for _ in range(runs):
        for s, out in ((a, ta), (b, tb)):
            t = time.perf_counter()
            s.run(None, feeds)
            out.append(time.perf_counter() - t)
    # speed-up of the fused model (original p50 / fused p50); the table shows its inverse, fused / original.
    est = compare_timings(tb, ta, paired=True)
    lo, hi = est.ci
    return f"{1 / est.speedup_p50:.2f} [{1 / hi:.2f}, {1 / lo:.2f}] {est.verdict}"


def _graph_nodes(nodes) -> int:  # noqa: ANN001
    total = 0
    for n in nodes:
        total += n.op_type != "Constant"
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                total += _graph_nodes(a.g.node)
    return total


def count_nodes(model: onnx.ModelProto) -> int:
    """Non-Constant nodes of the main graph, its If/Loop/Scan bodies and its local functions."""
    return _graph_nodes(model.graph.node) + sum(_graph_nodes(f.node) for f in model.functions)


def row(path: Path, runs: int, threads: int, latency: bool) -> list[str]:
    """One table row for one model."""
    model = load_model(path)
    scan = scan_model(model, base_dir=path.parent)
    plan = Plan(scan.candidates)
    plan.accept_all()
    accepted = set(plan.accepted())
    per_rule = collections.Counter(c.rule for c in scan.candidates if c.id in accepted)
    rules = ", ".join(f"{r} {n}" for r, n in sorted(per_rule.items(), key=lambda t: (-t[1], t[0]))) or "-"
    res = apply_candidates(model, scan, accepted)
    try:
        onnx.checker.check_model(res.model, full_check=True)
        check = "ok"
    except Exception as exc:  # noqa: BLE001 - reported in the table
        check = f"FAIL: {str(exc).splitlines()[0][:60]}"
    v = validate(model, res.model, False)
    diff = max((o.max_abs for o in v.outputs), default=0.0)
    fused_nodes = count_nodes(res.model) - count_nodes(model)
    ort_n = ort_optimizer_fused(path)
    lat = latency_ratio(model, res.model, runs, threads) if latency else "-"
    return [
        path.stem,
        str(len(scan.candidates)),
        rules,
        str(len(accepted)),
        "-" if ort_n is None else str(ort_n),
        f"{fused_nodes:+d}",
        check,
        f"{diff:.1e}",
        lat,
    ]


def main() -> None:
    """Print the coverage matrix as markdown."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-latency", action="store_true")
    args = ap.parse_args()
    t0 = time.perf_counter()
    head = ["model", "candidates", "fused per rule (applied)", "applied", "ORT optimizer fused", "Δ nodes",
            "full check", "max abs diff", "fused/original ENABLE_ALL [95% CI]"]
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for path in args.models or default_models():
        np.random.seed(0)
        cells = row(path, args.runs, args.threads, not args.no_latency)
        print("| " + " | ".join(cells) + " |", flush=True)
    print(f"\n{time.perf_counter() - t0:.0f} s, onnxruntime {ort.__version__}, {args.runs} interleaved runs, "
          f"{args.threads} thread(s)")


if __name__ == "__main__":
    main()
