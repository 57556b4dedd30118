"""`fuseview sweep MODEL... -o DIR`: tune every model (at every dims set), locally or on a Ray cluster."""

from __future__ import annotations

import argparse
import sys
import time

from fuseview.errors import FuseviewError
from fuseview.targets import TARGET_HELP

HELP = "tune many models (and dims sets) into one folder with a summary; in parallel on a Ray cluster"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview sweep`."""
    p.add_argument("models", nargs="+", metavar="MODEL", help=".onnx files (never modified)")
    p.add_argument("-o", "--out-dir", dest="out_dir", required=True, metavar="DIR",
                   help="folder for each item's tuned model, report and summary (sweep.json, sweep.txt);"
                   " items whose report is already there are skipped")
    p.add_argument("--target", default="local", metavar="local|ray:ADDRESS", help=TARGET_HELP)
    p.add_argument("--dims-set", action="append", default=[], metavar="NAME=V[,NAME=V...]",
                   help="a set of input dims to tune at (repeat for more; default: the model's defaults)")
    p.add_argument("--budget", type=float, default=60.0, metavar="SECONDS",
                   help="each item's tune budget (default 60); a task past twice it + 60 s is cancelled")
    p.add_argument("--provider", choices=("auto", "cpu", "cuda"), default="auto", help="where it runs (auto)")
    p.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (default 0)")
    p.add_argument("--ort-opt", choices=("disabled", "basic", "extended", "all"), default="all",
                   help="onnxruntime's graph optimization level it deploys with (default all)")
    p.add_argument("--runs", type=int, default=30, help="timed runs per model per batch of sessions (30)")
    p.add_argument("--sessions", type=int, default=3, help="onnxruntime sessions per model per batch (3)")
    p.add_argument("--threshold", type=float, default=0.02,
                   help="smallest speed-up (fraction) called faster or slower (default 0.02: 2%%)")
    p.add_argument("--keep-neutral", action="store_true", help="keep fusions with no measurable difference")
    p.add_argument("--float16", action="store_true",
                   help="tune each model's float16 conversion (inputs and outputs keep their types)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def parse_dims_sets(values: list[str]) -> list[dict[str, int]]:
    """`NAME=V,NAME=V` strings to dims dicts (FuseviewError on a malformed one)."""
    from fuseview.dims import parse_dim_args

    return [parse_dim_args([x for x in v.split(",") if x.strip()], "--dims-set") for v in values]


def run(args: argparse.Namespace) -> int:
    """Run the sweep, print the summary table; exit 2 when an item failed (the others are written)."""
    from fuseview.workflows.sweep import SUMMARY_JSON, sweep

    t0 = time.monotonic()

    def progress(message: str, _fraction: float) -> None:
        print(f"[{time.monotonic() - t0:5.0f} s] {message}", file=sys.stderr, flush=True)

    summary = sweep(args.models, args.out_dir, args.target, parse_dims_sets(args.dims_set),
                    None if args.quiet else progress, budget_s=args.budget, provider=args.provider,
                    threads=args.threads, ort_opt=args.ort_opt, runs=args.runs, sessions=args.sessions,
                    threshold=args.threshold, keep_neutral=args.keep_neutral, float16=args.float16)
    print(summary.text())
    print(f"summary    {args.out_dir.rstrip('/')}/{SUMMARY_JSON}")
    if summary.failed:
        first = summary.failed[0]
        raise FuseviewError(f"{len(summary.failed)} of {len(summary.rows)} items failed ({first.item}:"
                            f" {first.status[len('failed: '):]}); the others are written")
    return 0
