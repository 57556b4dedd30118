"""Attention fusion on real-width exports: scan/fuse time, what fused, error at every cache length, speed.

    python bench/bench_attention_real.py MODEL.onnx [...] [--runs 20] [--sessions 3] [--threads 1]
        [--level all] [--seq 128] [--past 64] [--new 1] [--no-validate]

Per model: the scan and the fuse (apply) wall time, attention candidates and fused node counts, the max
abs error of the fused model against the original (onnxruntime CPU, graph optimizations off) at past
length 0/1/64 x new tokens 1/16 (fusion/validate_cache.py; past 0 only without a KV cache), then the
latency of fused vs original at the chosen onnxruntime optimization level: `--sessions` sessions of each
created in turns, runs interleaved round-robin, ratio of medians with fuseview.stats.compare_timings'
interval (spread of the sessions' medians). A decoder with a cache runs one decode step (--past cached,
--new tokens); other models --seq tokens. Timings on a shared machine are noisy: compare ratios of one run.
"""

from __future__ import annotations

import argparse
import collections
import time
from pathlib import Path

import numpy as np

from fuseview.fusion.pipeline import FuseOptions, build_fused, load_for_fusion, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.validate_cache import cache_dims, has_kv_cache, validate_cache_lengths
from fuseview.runtime.inputs import make_feeds
from fuseview.runtime.sessions import create_session
from fuseview.stats import compare_timings

ATTENTION = ("attention_mha", "attention_packed", "attention_gqa")


def latency(original, fused, feeds: dict, args: argparse.Namespace) -> str:
    """Fused / original latency with its interval, sessions created in turns, runs interleaved."""
    sessions = []
    for _ in range(args.sessions):
        for m in (original, fused):
            sessions.append(create_session(m, "cpu", args.level, threads=args.threads)[0])
    for s in sessions:
        s.run(None, feeds)  # warm-up
    times = [[] for _ in sessions]
    for _ in range(args.runs):
        for k, s in enumerate(sessions):
            t = time.perf_counter()
            s.run(None, feeds)
            times[k].append(time.perf_counter() - t)
    a = np.array(times[0::2])  # original, one row per session
    b = np.array(times[1::2])  # fused
    est = compare_timings(b, a, paired=True)  # median(fused) / median(original), interval of that ratio
    lo, hi = est.ci
    verdict = {"faster": "slower", "slower": "faster"}.get(est.verdict, est.verdict)  # of the fused model
    return (f"original {1000 * np.median(a):.2f} ms, fused {1000 * np.median(b):.2f} ms; fused / original"
            f" {est.speedup_p50:.3f} [{lo:.3f}, {hi:.3f}], fused {verdict}")


def bench(path: Path, args: argparse.Namespace) -> None:
    """Print the figures of one model."""
    print(f"== {path.name} ({path.stat().st_size / 2**20:.0f} MiB)")
    t = time.perf_counter()
    model = load_for_fusion(path)
    t_load = time.perf_counter() - t
    t = time.perf_counter()
    scan = scan_for_fusion(model, None, path)
    t_scan = time.perf_counter() - t
    plan = Plan(scan.candidates, str(path))
    plan.accept_all()
    t = time.perf_counter()
    fused = build_fused(model, scan, plan.accepted(), FuseOptions(validate=False), path.parent).model
    t_fuse = time.perf_counter() - t
    rules = collections.Counter(c.rule for c in scan.candidates)
    ops = collections.Counter(n.op_type for n in fused.graph.node)
    att = {k: ops[k] for k in ("Attention", "MultiHeadAttention", "GroupQueryAttention") if ops[k]}
    misses = [m for m in scan.near_misses if m.rule in ATTENTION]
    print(f"load {t_load:.2f} s, scan {t_scan:.2f} s, apply {t_fuse:.2f} s")
    print(f"attention candidates {[(r, rules[r]) for r in ATTENTION if rules[r]]}, near misses {len(misses)}")
    print(f"nodes {len(model.graph.node)} -> {len(fused.graph.node)}, fused attention ops {att},"
          f" Softmax left {ops['Softmax']}")
    if not args.no_validate:
        t = time.perf_counter()
        runs = validate_cache_lengths(model, fused)
        worst = max(v.max_abs for _p, _n, v in runs)
        ok = all(v.ok for _p, _n, v in runs)
        pairs = ", ".join(f"{p}+{n}: {v.max_abs:.2g}" for p, n, v in runs)
        print(f"max abs error (past+new): {pairs}; worst {worst:.2g} ({'ok' if ok else 'DIFFERS'}),"
              f" {time.perf_counter() - t:.1f} s")
    dims = cache_dims(model, args.past, args.new) if has_kv_cache(model) else cache_dims(model, 0, args.seq)
    feeds = make_feeds(model, dims, seed=0)
    step = f"past {args.past} + new {args.new}" if has_kv_cache(model) else f"sequence {args.seq}"
    print(f"latency ORT {args.level}, {args.threads} thread(s), {step}, {args.sessions} sessions x"
          f" {args.runs} interleaved runs: {latency(model, fused, feeds, args)}")


def main() -> None:
    """Run the bench for each model given."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--level", choices=("disabled", "basic", "extended", "all"), default="all")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--past", type=int, default=64)
    ap.add_argument("--new", type=int, default=1)
    ap.add_argument("--no-validate", action="store_true")
    args = ap.parse_args()
    for p in args.models:
        bench(p, args)


if __name__ == "__main__":
    main()
