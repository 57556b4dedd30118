"""Profiling overhead: 50 profiled runs of GPT-2 (seq 128), trace parsed, against 50 plain runs.

Target: the profiling pass (profiled runs + writing and parsing onnxruntime's trace + statistics) takes under
twice the plain inference time of the same runs. Prints both times and the ratio. Run from the repo root:
    python bench/bench_profile.py [MODEL] [--runs 50] [--seq 128] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuseview.runtime import trace  # noqa: E402
from fuseview.runtime.inputs import make_feeds  # noqa: E402
from fuseview.runtime.profiling import runnable, summarize  # noqa: E402
from fuseview.runtime.sessions import create_session  # noqa: E402

DEFAULT = Path(__file__).resolve().parent.parent.parent / "shared" / "models" / "gpt2_12l_ts17.onnx"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (1: steadier)")
    ap.add_argument("--provider", default="cpu")
    args = ap.parse_args()

    proto = onnx.load(args.model, load_external_data=False)
    feeds = make_feeds(proto, {"seq": args.seq})
    src = runnable(args.model)

    sess, choice = create_session(src, args.provider, "disabled", threads=args.threads)
    for _ in range(args.warmup):
        sess.run(None, feeds)
    t0 = time.perf_counter()
    for _ in range(args.runs):
        sess.run(None, feeds)
    plain = time.perf_counter() - t0
    del sess

    with tempfile.TemporaryDirectory() as tmp:
        sess, _ = create_session(src, args.provider, "disabled", str(Path(tmp) / "p"), threads=args.threads)
        for _ in range(args.warmup):
            sess.run(None, feeds)
        t0 = time.perf_counter()
        for _ in range(args.runs):
            sess.run(None, feeds)
        t_runs = time.perf_counter() - t0
        path = sess.end_profiling()
        t_end = time.perf_counter() - t0 - t_runs
        size = Path(path).stat().st_size
        t1 = time.perf_counter()
        events = trace.read_trace(path)
        runs = trace.split_runs(events)[args.warmup:]
        summary = summarize(runs, trace.has_kernel_events(events))
        t_parse = time.perf_counter() - t1
    profiled = t_runs + t_end + t_parse
    assert summary["profiled_runs"] == args.runs

    print(f"model         {args.model} (seq {args.seq}, {len(proto.graph.node)} nodes, {choice.provider},"
          f" threads {args.threads})")
    print(f"plain         {args.runs} runs {plain:.3f} s  ({plain / args.runs * 1e3:.2f} ms/run)")
    print(f"profiled runs {args.runs} runs {t_runs:.3f} s  ({t_runs / args.runs * 1e3:.2f} ms/run)")
    print(f"trace write   {t_end:.3f} s  ({size / 1e6:.1f} MB)")
    print(f"trace parse   {t_parse:.3f} s  ({len(events)} events)")
    print(f"profiling     {profiled:.3f} s total")
    ratio = profiled / plain
    print(f"ratio         {ratio:.2f}x plain  (target < 2x: {'met' if ratio < 2 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
