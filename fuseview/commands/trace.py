"""`fuseview trace BEFORE.json [AFTER.json]`: profiler traces before/after torch.compile, compared."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fuseview.errors import FuseviewError
from fuseview.session.reports import TraceReport
from fuseview.traces.report import build_report
from fuseview.units import format_us as _us  # a short name: the tables below are long lines

HELP = "summarise a torch.profiler or onnxruntime trace, or compare one before and after torch.compile"
TOP = 15


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview trace`."""
    p.add_argument("before", help="Chrome-trace JSON (torch.profiler export_chrome_trace, or onnxruntime)")
    p.add_argument("after", nargs="?", help="the same workload after torch.compile (or another change)")
    p.add_argument("--json", metavar="OUT", help="write the report (fuseview.trace_compare, v1) to OUT")
    p.add_argument("--steps", type=int, metavar="N",
                   help="use only the last N steps of each trace (earlier ones are often warm-up)")
    p.add_argument("--top", type=int, default=TOP, help=f"rows of the event table (default {TOP})")


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def print_report(rep: dict, top: int = TOP, out=None) -> None:
    """The readable summary of a trace report."""
    out = out or sys.stdout
    w = lambda s="": print(s, file=out)  # noqa: E731
    for t in rep["traces"]:
        s = t["step_us"]
        w(f"[{t['role']}] {t['path']}  ({t['source']}, {t['steps']} steps from {t['step_kind']};"
          f" step p50 {_us(s['p50'])}, min {_us(s['min'])}, max {_us(s['max'])})")
    d = rep["diff"]
    if d is None:
        t = rep["traces"][0]
        w(f"  {'event':<48}{'category':<17}{'count':>7}{'per step':>11}{'self':>11}{'share':>8}")
        for e in t["events"][:top]:
            w(f"  {_clip(e['name'], 47):<48}{e['category']:<17}{e['count']:>7}{_us(e['per_step_us']):>11}"
              f"{_us(e['self_us'] / max(t['steps'], 1)):>11}{e['share'] * 100:>7.1f}%")
        return
    sp = d["step_speedup"]
    w()
    w(f"step time: before/after {sp['summary']}")
    if sp["noise"]["warning"]:
        w(f"  note: {sp['noise']['warning']}")
    b, a = rep["traces"]
    nb, na = max(b["steps"], 1), max(a["steps"], 1)
    w()
    w(f"  {'event (time per step)':<48}{'category':<17}{'before':>11}{'after':>11}{'count b/a':>12}")
    rows = {}
    for e in b["events"]:
        rows[e["name"]] = [e["category"], e["per_step_us"], None, e["count"] / nb, 0.0]
    for e in a["events"]:
        r = rows.setdefault(e["name"], [e["category"], None, None, 0.0, 0.0])
        r[2], r[4] = e["per_step_us"], e["count"] / na
    order = sorted(rows, key=lambda n: -max(rows[n][1] or 0.0, rows[n][2] or 0.0))
    for name in order[:top]:
        cat, x, y, cb, ca = rows[name]
        w(f"  {_clip(name, 47):<48}{cat:<17}{_us(x):>11}{_us(y):>11}{f'{cb:g}/{ca:g}':>12}")
    w()
    w(f"added {len(d['added'])} event names, removed {len(d['removed'])}, in both {len(d['changed'])}")
    if d["fused_kernels"]:
        w()
        w("compiled kernels (time per step; replaced: the before-trace ops named by the kernel,"
          " their GPU kernels' time when the kernel ran on a GPU)")
        w(f"  {'kernel':<52}{'time':>10}{'replaced':>10}{'ratio':>8}  fused ops -> matched in before")
        for k in d["fused_kernels"]:
            ok = k["time_us"] > 0 and k["replaced_us"]
            ratio = f"{k['replaced_us'] / k['time_us']:.1f}x" if ok else "-"
            ops = "+".join(k["fused_ops"])
            matched = ", ".join(k["matched_before"]) or "nothing"
            dev = " (GPU kernels)" if k["replaced_from"] == "device" else ""
            w(f"  {_clip(k['name'], 51):<52}{_us(k['time_us']):>10}{_us(k['replaced_us']):>10}{ratio:>8}"
              f"  {ops} -> {matched}{dev}")
    if d["note"]:
        w()
        w(d["note"])


def run(args: argparse.Namespace) -> int:
    """Read the trace(s), print the summary or the comparison, write the report."""
    from fuseview.traces.stats import load_trace

    if args.steps is not None and args.steps < 1:
        raise FuseviewError(f"--steps {args.steps}: must be at least 1")
    if args.json:
        out = Path(args.json)
        if not out.resolve().parent.is_dir():
            raise FuseviewError(f"--json {args.json}: folder does not exist")
        for p in (args.before, args.after):
            if p is not None and Path(p).exists() and out.resolve() == Path(p).resolve():
                raise FuseviewError(f"--json {args.json}: would overwrite an input trace")
    before = load_trace(args.before, args.steps)
    after = load_trace(args.after, args.steps) if args.after else None
    report = TraceReport.from_json(build_report(before, after))
    print_report(report.to_json(), args.top)
    if args.json:
        path = report.save(args.json)
        print(f"\nreport written to {path}")
    return 0
