"""`fuseview profile MODEL [--against OTHER]`: where the time goes and how the outputs differ."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from fuseview.defaults import DEFAULT_SESSIONS, OPT_LEVEL_NAMES, PROVIDER_CHOICES
from fuseview.errors import FuseviewError
from fuseview.targets import TARGET_HELP
from fuseview.units import format_us as _us  # a short name: the tables below are long lines

if TYPE_CHECKING:
    from fuseview.reports.profile import CompareReport, ModelProfile, ProfileReport

HELP = "profile a model in onnxruntime (per-operator times, latency) and compare it against another"
TOP = 12


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview profile`."""
    p.add_argument("model", help="path to an .onnx file")
    p.add_argument("--against", metavar="OTHER",
                   help="second model (e.g. the fused one): run on the same inputs and compared")
    p.add_argument("--provider", choices=PROVIDER_CHOICES, default="auto",
                   help="auto: CUDA when onnxruntime-gpu and a GPU are present, else CPU (default auto)")
    p.add_argument("--runs", type=int, default=20,
                   help="timed plain runs per model; with --against the two models take turns (default 20)")
    p.add_argument("--profile-runs", type=int, default=None, metavar="N",
                   help="profiled runs the per-node times come from"
                   " (default 5, or a tenth of --runs when more)")
    p.add_argument("--threshold", type=float, default=0.02,
                   help="smallest speed-up (fraction) the verdict calls faster or slower (default 0.02: 2%%)")
    p.add_argument("--sessions", type=int, default=DEFAULT_SESSIONS,
                   help="with --against: onnxruntime sessions per model, their runs interleaved; a session"
                   f" has a speed of its own, which the interval then includes (default {DEFAULT_SESSIONS})")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up runs (default 3)")
    p.add_argument("--dim", action="append", metavar="NAME=VALUE",
                   help="value of a symbolic input dim (default batch-like 1, sequence-like 128, others 1)")
    p.add_argument("--inputs", metavar="FILE.npz", help="inputs from an .npz file instead of generated ones")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated inputs (default 0)")
    p.add_argument("--ort-opt", choices=list(OPT_LEVEL_NAMES), default="all",
                   help="onnxruntime's graph optimization level of the latency and the verdict"
                   " (default all: onnxruntime's default, as deployed)")
    p.add_argument("--attribution-opt", choices=list(OPT_LEVEL_NAMES), default="disabled",
                   help="level of the per-node profile and the output comparison"
                   " (default disabled: the nodes are the model's own)")
    p.add_argument("--ort-fusions", action="store_true",
                   help="also show what onnxruntime itself fuses (at --ort-opt, or extended when disabled)")
    p.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (default 0: its own)")
    p.add_argument("--json", metavar="OUT",
                   help="write the report (JSON, schema_version 3) to OUT (- prints it instead of the table)")
    p.add_argument("--atol", type=float, default=None,
                   help="absolute tolerance of the comparison (1e-4; 1e-2 for a float16 model)")
    p.add_argument("--rtol", type=float, default=None,
                   help="relative tolerance of the comparison (1e-3; 1e-2 for a float16 model)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--target", default="local", metavar="local|ray:ADDRESS", help=TARGET_HELP)
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="with --against: measure in interleaved batches of --runs runs until the verdict"
                   " decides or SECONDS end (then 'cannot tell' with the runs it would need); without it,"
                   " on a ray target: the most the profile may take there (default: one batch, no bound)")


class _StderrProgress:
    """Progress on stderr, at most a few lines a second, one line per stage."""

    def __init__(self) -> None:
        self.last = 0.0
        self.stage = ""
        self.tty = sys.stderr.isatty()

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if stage == self.stage and done < total and now - self.last < 0.5:
            return
        self.last = now
        if self.tty:
            end = "\n" if done >= total else ""
            print(f"\r{stage} {done}/{total}   ", end=end, file=sys.stderr, flush=True)
        elif done >= total or stage != self.stage:
            print(f"{stage} {done}/{total}", file=sys.stderr, flush=True)
        self.stage = stage


def _g(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def roofline_lines(m: ModelProfile, top: int = 5) -> list[str]:
    """A model's roofline: the machine's roofs, the non-GEMM share, the top memory-bound nodes."""
    roof = m.roofline
    if not roof:
        return []
    mach = roof["machine"]
    out = [f"non-GEMM share of the node time: {roof['non_gemm_share']:.1%}"]
    mem = sorted((n for n in roof["nodes"] if n["bound"] == "memory"), key=lambda n: -n["time_us"])[:top]
    if mem:
        what = "device time per run" if roof.get("time_source") == "device" else "median time"
        out.append(f"top memory-bound nodes ({what}; FLOP/byte; achieved GB/s of the roof's"
                   f" {mach['peak_gbps']:.1f}):")
        from fuseview.texttable import table_lines

        rows = [[_us(n["time_us"]), f"{n['flops'] / max(n['bytes'], 1):.2f}", f"{n['achieved_gbps']:.2f}",
                 n["op_type"], n["node"]] for n in mem]
        out += table_lines(rows, "rrr")  # columns as wide as their widest cell: long op types stay aligned
    return out


def device_lines(m: ModelProfile, top: int = 5) -> list[str]:
    """A CUDA model's device time (runtime.report.device_summary), then its top nodes: device vs host-side."""
    from fuseview.runtime.report import device_summary

    line = device_summary(m.device_time, m.node_sum_us.mean)
    if line is None:
        return []
    out = [line]
    rows = sorted((n for n in m.nodes if n.device_mean_us), key=lambda n: -(n.device_mean_us or 0.0))
    if rows:
        out.append("top nodes by device time (device: GPU kernels per run; host-side: the node's span on"
                   " the host):")
        out += [f"  {_us(n.device_mean_us):>10} device  {_us(n.extra.get('host_mean_us')):>10} host-side"
                f"  {n.op_type:<16} {n.name}" for n in rows[:top]]
    return out


def print_report(rep: ProfileReport, out: TextIO | None = None) -> None:
    """The readable table of a report: latency, top operators, per-fusion time/error, output diffs."""
    w = _writer(out or sys.stdout)
    env = rep.environment
    gpu = f"  gpu: {env.gpu}" if env.gpu else ""
    w(f"onnxruntime {env.onnxruntime}  cpu: {env.cpu or '?'}{gpu}")
    inp = rep.inputs
    dims = ", ".join(f"{k}={v}" for k, v in inp.dims.items()) or "none"
    seed = f" (seed {inp.seed})" if inp.seed is not None else ""
    w(f"inputs: {inp.source}{seed}; dims {dims}")
    if inp.extra.get("note"):
        w(f"  note: {inp.extra['note']}")
    for f in inp.feeds:
        rng = f" in [{f['min']}, {f['max']}]" if "min" in f else ""
        w(f"  {f['name']}: {f['dtype']} {f['shape']}{rng}")
    for m in rep.models:
        _print_model(m, w)
    _print_machine(rep, w)
    if rep.comparison is not None:
        _print_comparison(rep.comparison, w)
    for f in rep.extra.get("ort_fusions") or []:
        w()
        w(f"onnxruntime's own fusions [{f['role']}] at {f['opt_level']} on {f['provider']['provider']}:"
          f" {f['nodes_before']} -> {f['nodes_after']} nodes"
          f" ({f['constants_to_initializers']} Constant nodes became initializers)")
        w("  added:   " + (", ".join(f"{k} +{v}" for k, v in f["added"].items()) or "none"))
        w("  removed: " + (", ".join(f"{k} -{v}" for k, v in f["removed"].items()) or "none"))


def _writer(out: TextIO) -> Callable[..., None]:
    return lambda s="": print(s, file=out)


def _print_model(m: ModelProfile, w: Callable[..., None]) -> None:
    """One model's block: where it ran, its latency, op types, top nodes and roofline."""
    from fuseview.stats import by_median
    from fuseview.texttable import table_lines

    w()
    prov = m.provider
    kind = f" ({m.extra['precision']})" if "precision" in m.extra else ""  # older reports lack it
    w(f"[{m.role}] {m.path or '(in memory)'}{kind}")
    own = " (optimizations off: the model's own nodes)" if m.ort_opt_level == "disabled" else ""
    w(f"  provider {prov['provider']} ({prov['reason']}); latency at ort optimization"
      f" {m.extra.get('latency_ort_opt', m.ort_opt_level)}, per-node times at {m.ort_opt_level}{own}")
    lat = m.latency_ms
    w(f"  latency  p50 {lat.p50:.3f} ms  p90 {lat.p90:.3f} ms  mean {lat.mean:.3f} ms"
      f"  ({m.runs} runs, {m.warmup} warm-up, no profiling)")
    w(f"  profiled run {_us(m.run_us.mean)}, node times sum {_us(m.node_sum_us.mean)}"
      f"  ({m.extra.get('profiled_runs', m.runs)} profiled runs)")
    place = m.placement
    if place:
        w("  placement: " + ", ".join(
            f"{p.replace('ExecutionProvider', '')} {r['nodes']} nodes {r['share']:.0%} of node time"
            for p, r in place["providers"].items()) + f"; Memcpy nodes {len(place['memcpy_nodes'])}")
    if "host-side" in {n.time_source for n in m.nodes}:
        w("  note: the node times below are host-side (onnxruntime's CUDA EP events time launches);"
          " device times are in the 'device time' lines")
    for text in device_lines(m):
        w(f"  {text}")
    ops = [[o.op_type, o.provider.replace("ExecutionProvider", ""), str(o.nodes), _us(o.mean_us),
            _us(o.p50_us), _us(o.p90_us), f"{share * 100:.1f}%", _us(o.extra.get("overhead_us"))]
           for o, share in by_median(m.op_types, lambda o: o.p50_us)[:TOP]]
    head = ["op type", "provider", "nodes", "mean", "p50", "p90", "share", "overhead"]
    for row in table_lines(ops, "llrrrrrr", head):
        w(row)
    w("  top nodes (median per run, p90 for the spread; ranked and shared by the median):")
    top = [[f"{_us(n.p50_us)} (p90 {_us(n.p90_us)})", f"{share * 100:.1f}%", n.op_type, n.name]
           for n, share in by_median(m.nodes, lambda n: n.p50_us)[:5]]
    for row in table_lines(top, "rr", indent="    "):
        w(row)
    for text in roofline_lines(m):
        w(f"  {text}")


def _print_machine(rep: ProfileReport, w: Callable[..., None]) -> None:
    """The profiler's overhead, the machine's roofs, the two latencies and the verdict."""
    ovh = rep.extra.get("profiler_overhead")
    if ovh:
        w()
        w(f"profiler overhead: {ovh['per_event_us']:.1f} us of wall time per node event; a node doing nothing"
          f" reads {ovh['node_floor_us']:.1f} us ('overhead' column: that times the nodes; {ovh['method']})")
    roofs = [m.roofline for m in rep.models if m.roofline]
    if roofs:
        mach = roofs[0]["machine"]
        w()
        w(f"machine roofline: peak {mach['peak_gflops']:.1f} GFLOP/s, {mach['peak_gbps']:.1f} GB/s"
          f" ({'cached' if mach.get('cached') else 'measured now'}: {mach['method']})")
    if len(roofs) == 2:
        w(f"non-GEMM share of the node time: model {roofs[0]['non_gemm_share']:.1%},"
          f" against {roofs[1]['non_gemm_share']:.1%}")
    if len(rep.models) == 2:
        a, b = (m.latency_ms.p50 for m in rep.models)
        w()
        w(f"latency p50: model {a:.3f} ms, against {b:.3f} ms")
        cmp = rep.comparison
        if cmp is not None and cmp.placement_flag:
            w(cmp.placement_flag)
        line = rep.verdict_line()
        if line:
            w(line)
            warning = cmp.latency.noise["warning"] if cmp is not None and cmp.latency is not None else None
            if warning:
                w(f"  note: {warning}")


def _print_comparison(cmp: CompareReport, w: Callable[..., None]) -> None:
    """The outputs' differences and each fusion's time and error."""
    from fuseview.texttable import table_lines

    w()
    on_cuda = (cmp.extra.get("provider") or {}).get("provider") == "CUDAExecutionProvider"
    tf32 = "float32, TF32 off, " if on_cuda else ""
    result = "PASS" if cmp.passed else "FAIL"
    kind = cmp.extra.get("precision", "float32")
    at = f", a {kind} model" if kind != "float32" else ""
    w(f"outputs ({tf32}atol {cmp.extra['atol']:g}, rtol {cmp.extra['rtol']:g}{at}): {result}")
    outs = [[name, _g(d["max_abs"]), _g(d["max_rel"]), _g(d["mean_abs"]), _g(d["cosine"]),
             "pass" if d["passed"] else "FAIL"] for name, d in cmp.outputs.items()]
    head = ["output", "max abs", "max rel", "mean abs", "cosine", "result"]
    for row in table_lines(outs, "lrrrr", head):
        w(row)
    if cmp.extra.get("deployment"):
        from fuseview.runtime.deployment import deployment_lines

        for text in deployment_lines(cmp.extra["deployment"]):
            w(text)
    if not cmp.fusions:
        return
    w(f"fusions ({len(cmp.fusions)}):")
    w("  times: sums of per-node medians (p50) over the profiled runs")
    w("  'not measurable': the difference is within the runs' spread or the profiler's node floor")
    rows = []
    for f in cmp.fusions:
        t = f.get("time") or {}
        errs = [e["max_abs"] for e in f["errors"].values() if e["max_abs"] is not None]
        res = "-" if f["passed"] is None else ("pass" if f["passed"] else "FAIL")
        sp = t.get("speedup_p50")
        sp_text = "-" if not sp else (f"{sp:.2f}x" if t.get("measurable", True) else "not measurable")
        orig = f"{_us(t.get('original_p50_us'))}" + (f" ({t['original_nodes']})" if t else "")
        rows.append([f["rule"] or "-", "+".join(f["op_types"]), _us(t.get("fused_p50_us")), orig,
                     sp_text, _g(max(errs) if errs else None), res, f["node"]])
    head = ["rule", "fused ops", "fused", "original (nodes)", "speedup", "max abs", "result", "node"]
    for row in table_lines(rows, "llrrrr", head):
        w(row)


def run(args: argparse.Namespace) -> int:
    """Profile, print the table, write the report; exit 3 when a comparison fails its tolerances."""
    from fuseview.dims import parse_dim_args
    from fuseview.reports import ProfileReport
    from fuseview.runtime.job import ProfileRequest
    from fuseview.targets import open_profile_target

    for label, path in (("model", args.model), ("--against", args.against), ("--inputs", args.inputs)):
        if path is not None and not Path(path).is_file():
            raise FuseviewError(f"{label} {path}: file not found")
    if args.budget is not None and not args.budget > 0:
        raise FuseviewError("--budget must be more than 0 seconds")
    from fuseview.runtime.ir_check import check_ir_version

    for path in (args.model, args.against):  # before any work, naming the file (not "this model")
        if path is not None:
            check_ir_version(path)
    to_stdout = args.json == "-"  # as `scan --json`: the report on stdout instead of the table
    if args.json and not to_stdout and not Path(args.json).resolve().parent.is_dir():
        raise FuseviewError(f"--json {args.json}: folder does not exist")
    req = ProfileRequest(
        model=args.model, against=args.against, provider=args.provider, runs=args.runs, warmup=args.warmup,
        dims=parse_dim_args(args.dim), inputs_npz=args.inputs, seed=args.seed, ort_opt=args.ort_opt,
        attribution_opt=args.attribution_opt, ort_fusions=args.ort_fusions, atol=args.atol, rtol=args.rtol,
        threads=args.threads, threshold=args.threshold, profile_runs=args.profile_runs,
        sessions=args.sessions, budget_s=args.budget if args.against else None,
    )
    # a ray: target is reached here, a failure one line within the budget
    target = open_profile_target(args.target, req, None if args.against else args.budget)
    report = ProfileReport.from_json(target.profile(req, None if args.quiet else _StderrProgress()))
    if to_stdout:
        print(report.text())
    else:
        print_report(report)
    if args.json and not to_stdout:
        path = report.save(args.json)
        print(f"\nreport written to {path}")
    return 0 if report.passed else 3
