"""Profiling cost: GPT-2 (seq 128) profiled by fuseview with --runs 50, against its 50 plain runs.

Target (issue 8, point 7): `fuseview profile gpt2_12l_ts17 --runs 50` costs under twice the 50 plain runs:
the plain runs plus the profiling pass (its profiled runs, warm-up included, + onnxruntime writing its trace
+ fuseview reading it and computing the statistics) under 2x the plain runs alone. The per-node statistics
come from their own, smaller number of profiled runs (--profile-runs; default as `fuseview profile`: 5, or
a tenth of --runs when more). The figures come from profile_model, the path `fuseview profile` takes; each
run is timed around session.run alone (session creation is counted in neither).
Prints the breakdown of each repeat and the median ratio. Run from the repo root:
    python bench/bench_profile.py [MODEL] [--runs 50] [--profile-runs N] [--threads 1] [--repeat 3]
--no-arena turns the CPU memory arena off in the profiled session only (not fuseview's default).
--arena-check profiles with the arena on and off, --repeat sessions each, and prints per-op-type and
per-node p50 times side by side: is arena-off a fair configuration for the profiled runs?
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuseview.runtime.inputs import make_feeds  # noqa: E402
from fuseview.runtime.job import default_profile_runs  # noqa: E402
from fuseview.runtime.profiling import profile_model  # noqa: E402

DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "data" / "gpt2" / "gpt2_12l_ts17.onnx"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT))
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--profile-runs", type=int, default=None,
                    help="profiled runs (default as fuseview profile)")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads (1: steadier)")
    ap.add_argument("--provider", default="cpu")
    ap.add_argument("--repeat", type=int, default=3, help="profile the model this many times; median ratio")
    ap.add_argument("--no-arena", action="store_true", help="CPU memory arena off in the profiled session")
    ap.add_argument("--arena-check", action="store_true", help="per-op-type times with the arena on vs off")
    args = ap.parse_args()
    if args.profile_runs is None:
        args.profile_runs = default_profile_runs(args.runs)

    print("command       python " + " ".join(shlex.quote(a) for a in sys.argv))
    proto = onnx.load(args.model, load_external_data=False)
    feeds = make_feeds(proto, {"seq": args.seq})
    nodes = sum(1 for n in proto.graph.node if n.op_type != "Constant")
    if args.arena_check:
        return arena_check(args, feeds)
    print(f"model         {args.model} (seq {args.seq}, {nodes} nodes run, threads {args.threads},"
          f" {args.runs} runs, {args.profile_runs} profiled runs, {args.warmup} warm-up,"
          f" cpu arena in profiled session:"
          f" {'off' if args.no_arena else 'on'})")
    ratios, floors, wholes = [], [], []
    for rep in range(args.repeat):
        prof = profile_model(args.model, feeds, args.provider, "disabled", args.runs, args.warmup,
                             threads=args.threads, cpu_mem_arena=not args.no_arena,
                             profile_runs=args.profile_runs)
        assert prof["profiled_runs"] == args.profile_runs
        c = prof["profile_session"]["cost_s"]
        plain = c["latency_runs"]
        n_prof = args.profile_runs + min(args.warmup, 1)  # profile_model's one profiled warm-up run
        ort_part = c["profiled_runs"] * n_prof / args.profile_runs + c["trace_write"]
        total = ort_part + c["trace_read"] + c["statistics"]
        ratios.append(total / plain)
        floors.append(ort_part / plain)
        wholes.append((plain + total) / plain)
        plain_run = plain / args.runs
        per_node = (c["profiled_runs"] / args.profile_runs - plain_run) / len(prof["nodes"]) * 1e6
        print(f"--- repeat {rep + 1} ({prof['provider']['provider']})")
        print(f"plain runs    {plain:.3f} s  ({plain / args.runs * 1e3:.2f} ms/run)")
        prof_run = c["profiled_runs"] / args.profile_runs
        print(f"profiled runs {c['profiled_runs']:.3f} s for {args.profile_runs}"
              f"  ({prof_run * 1e3:.2f} ms/run,"
              f" {prof_run / plain_run:.2f}x a plain run; +{per_node:.1f} us per node execution;"
              f" with {min(args.warmup, 1)} warm-up"
              f" ~{c['profiled_runs'] * n_prof / args.profile_runs:.3f} s)")
        print(f"trace write   {c['trace_write']:.3f} s  ({c['trace_bytes'] / 1e6:.1f} MB,"
              " onnxruntime's end_profiling)")
        print(f"trace read    {c['trace_read']:.3f} s  (fuseview: file to runs)")
        print(f"statistics    {c['statistics']:.3f} s")
        print(f"profiling     {total:.3f} s total = {total / plain:.2f}x plain"
              f"  (onnxruntime's part alone, runs + write: {ort_part / plain:.2f}x)")
        print(f"whole profile {plain + total:.3f} s = plain runs + profiling"
              f" = {(plain + total) / plain:.2f}x plain")
        print(f"node sum p50  {prof['node_sum_us']['p50'] / 1e3:.2f} ms of model_run p50"
              f" {prof['run_us']['p50'] / 1e3:.2f} ms (plain p50 {prof['latency_ms']['p50']:.2f} ms)")
    whole = statistics.median(wholes)
    met = "met" if whole < 2 else "NOT met"
    print(f"=== median of {args.repeat}: whole profile (plain + profiling) {whole:.2f}x plain"
          f" (target < 2x: {met});"
          f" profiling pass alone {statistics.median(ratios):.2f}x; onnxruntime's profiled runs + trace write"
          f" alone {statistics.median(floors):.2f}x")
    return 0


def arena_check(args: argparse.Namespace, feeds: dict) -> int:
    """Per-op-type and per-node p50 times, arena on vs off (sessions alternate; median over sessions)."""
    on, off = [], []
    for _ in range(args.repeat):
        for arena, into in ((True, on), (False, off)):
            prof = profile_model(args.model, feeds, args.provider, "disabled", args.runs, args.warmup,
                                 threads=args.threads, cpu_mem_arena=arena)
            into.append(prof)

    def med(profs: list[dict], key: str, name: str) -> dict:
        vals: dict[str, list[float]] = {}
        for p in profs:
            for row in p[key]:
                vals.setdefault(row[name], []).append(row["p50_us"])
        return {k: statistics.median(v) for k, v in vals.items()}

    print(f"p50 us, median of {args.repeat} profiled sessions each; off/on ratio")
    ops_on, ops_off = med(on, "op_types", "op_type"), med(off, "op_types", "op_type")
    for op in sorted(ops_on, key=lambda k: -ops_on[k]):
        o = ops_off.get(op, 0.0)
        print(f"  {op:22s} on {ops_on[op]:9.1f}  off {o:9.1f}  {o / ops_on[op]:.2f}")
    n_on, n_off = med(on, "nodes", "name"), med(off, "nodes", "name")
    total_on, total_off = sum(n_on.values()), sum(n_off.values())
    print(f"  {'all nodes':22s} on {total_on:9.1f}  off {total_off:9.1f}  {total_off / total_on:.2f}")
    big = sorted((n for n in n_on if n_on[n] >= 15), key=lambda n: n_off[n] / n_on[n])
    ratios = [n_off[n] / n_on[n] for n in big]
    print(f"nodes >= 15 us with the arena on: {len(big)}, off/on median {statistics.median(ratios):.2f},"
          f" lowest {ratios[0]:.2f} ({big[0]}), highest {ratios[-1]:.2f} ({big[-1]})")
    for n in big:
        if abs(n_off[n] / n_on[n] - 1) > 0.25:
            print(f"  {n:60s} on {n_on[n]:7.1f}  off {n_off[n]:7.1f}  {n_off[n] / n_on[n]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
