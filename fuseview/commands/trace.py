"""`fuseview trace BEFORE.json [AFTER.json] [--provenance DIR]` or `fuseview trace CAPTURE_DIR`.

Profiler traces before/after torch.compile, compared; with Inductor's provenance log (a TORCH_TRACE
folder) each compiled kernel is attributed exactly, else by its name (said so).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fuseview.commands._trace_window import run_window
from fuseview.commands.open import parse_size
from fuseview.errors import FuseviewError
from fuseview.units import format_us

if TYPE_CHECKING:
    from fuseview.reports import FusedKernel, TraceReport

HELP = "summarise a torch.profiler or onnxruntime trace, or compare one before and after torch.compile"
TOP = 15
SOURCE_LINES = 4  # source lines printed per kernel


def _us(us: float | None) -> str:
    """A time as every trace text writes it (µs, the window's spelling too); a short name for long lines."""
    return format_us(us, "µs")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview trace`."""
    p.add_argument("before", help="Chrome-trace JSON (torch.profiler export_chrome_trace, or onnxruntime),"
                   " or a folder from fuseview.capture (eager.json, compiled.json, torch_trace/)")
    p.add_argument("after", nargs="?", help="the same workload after torch.compile (or another change)")
    p.add_argument("--provenance", metavar="DIR",
                   help="the TORCH_TRACE folder of the compiled run (provenance_tracking_level = 1)")
    p.add_argument("--json", metavar="OUT",
                   help="write the report (fuseview.trace_compare, v2) to OUT (-: print it, not the summary)")
    p.add_argument("--steps", type=int, metavar="N",
                   help="use only the last N steps of each trace (earlier ones are often warm-up)")
    p.add_argument("--top", type=int, default=TOP, help=f"rows of the event table (default {TOP})")
    p.add_argument("--onnx-time", action="store_true",
                   help="for a capture with model.onnx: also profile it and its fused version in onnxruntime"
                        " (same shapes) and give each source line's ONNX time before and after fusion")
    p.add_argument("--window", action="store_true",
                   help="open the trace workspace window on it (Kernels, flame, Compile vs ONNX, ...)")
    p.add_argument("--screenshot", metavar="OUT.png",
                   help="with or without --window: read the traces in the workspace, save a picture of it"
                        " (--tab NAME: which tab, e.g. Kernels, flame, 'Compile vs ONNX') and exit")
    p.add_argument("--tab", metavar="NAME", help="the workspace tab --window or --screenshot shows")
    p.add_argument("--size", metavar="WxH", type=parse_size,
                   help="workspace window size, e.g. 1400x900 (default: the screen's; 1400x900 without one)")
    p.add_argument("--python", action="store_true",
                   help="also list Python-function events (with_stack=True frames; hidden by default:"
                        " they nest, so their times add up to more than the step)")


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def print_report(rep: TraceReport, top: int = TOP, out=None, python: bool = False) -> None:
    """The readable summary of a trace report: kernels first, then ops by self time (no Python frames
    unless python is set)."""
    out = out or sys.stdout
    w = lambda s="": print(s, file=out)  # noqa: E731
    for t in rep.traces:
        s = t.step_us
        w(f"[{t.role}] {t.path}  ({t.source}, {t.steps} steps from {t.step_kind};"
          f" step p50 {_us(s.p50)}, min {_us(s.min)}, max {_us(s.max)})")
        for why in t.excluded_steps:
            w(f"  left out: {why}")
    choice = rep.provenance_choice
    if choice and choice["ignored"]:
        w(f"provenance: read {choice['used']}")
        for ig in choice["ignored"]:
            w(f"  ignored {Path(ig['log']).name}: {ig['why']}")
    d = rep.diff
    if d is None:
        _print_events(rep, top, python, w)
        return
    sp = d.step_speedup
    w()
    w(f"step time: before/after {sp.summary}")
    if sp.noise_warning:
        w(f"  note: {sp.noise_warning}")
    exact = rep.exact_kernels
    if exact:
        _print_provenance(exact, w)
    guessed = [k for k in d.fused_kernels if k.attribution == "name"]
    if guessed:
        _print_guessed(guessed, bool(exact), w)
    missing = d.unclaimed_pre_grad
    if missing:
        w()
        w(f"{len(missing)} pre-grad nodes that no kernel's provenance names nor a rewritten pattern reaches"
          " (their eager time is in no kernel's 'replaced'):")
        for m in missing[:TOP]:
            where = f"{Path(m['file']).name}:{m['line']}" if m["file"] else "no source"
            w(f"  [{m['graph']}] {m['node']} ({m['aten']}) {where}  {_clip(m['code'] or '', 70)}")
    _print_events(rep, top, python, w)
    w()
    w(f"added {len(d.added)} event names, removed {len(d.removed)}, in both {len(d.changed)}")
    if d.note:
        w()
        w(d.note)


def _print_events(rep: TraceReport, top: int, python: bool, w) -> None:
    """The ops and kernels by self time per step (a nested call's time counted once), one column a trace."""
    from fuseview.traces.display import is_python, shown_events, shown_name

    traces = rep.traces
    rows: dict[str, list] = {}
    for i, t in enumerate(traces):
        steps = max(t.steps, 1)
        for e in shown_events(t.events, python):  # an old report marks no Python frame: told by the name
            r = rows.setdefault(e.name, [e.category] + [None] * (2 * len(traces)))
            r[1 + i], r[1 + len(traces) + i] = e.self_us / steps, e.count / steps
    order = sorted(rows, key=lambda n: -max(v or 0.0 for v in rows[n][1:1 + len(traces)]))
    w()
    if len(traces) == 1:
        w(f"  {'event (self time per step: children excluded)':<64}{'category':<17}{'self':>11}{'count':>9}")
        for name in order[:top]:
            cat, x, c = rows[name]
            w(f"  {_clip(shown_name(name), 63):<64}{cat:<17}{_us(x):>11}{c:>9.3g}")
    else:
        w(f"  {'event (self time per step: children excluded)':<64}{'category':<17}{'before':>11}"
          f"{'after':>11}{'count b/a':>12}")
        for name in order[:top]:
            cat, x, y, cb, ca = rows[name]
            w(f"  {_clip(shown_name(name), 63):<64}{cat:<17}{_us(x):>11}{_us(y):>11}"
              f"{f'{cb or 0:g}/{ca or 0:g}':>12}")
    if not python and any(is_python(e) for t in traces for e in t.events):
        w("  (Python-function events hidden: they nest, so their times overlap; --python lists them)")


def _print_guessed(guessed: list[FusedKernel], exact: bool, w) -> None:
    w()
    w("compiled kernels GUESSED FROM THEIR NAMES" + (" (not in the provenance log)" if exact else
      " (no --provenance log: a guess)") + " (time per step; replaced: the before-trace ops named"
      " by the kernel, their GPU kernels' time when the kernel ran on a GPU)")
    w(f"  {'kernel':<52}{'time':>10}{'replaced':>10}{'repl/k':>8}  fused ops -> matched in before")
    for k in guessed:
        ok = k.time_us > 0 and k.replaced_us
        ratio = f"{k.replaced_us / k.time_us:.1f}x" if ok else "-"
        ops = "+".join(k.fused_ops)
        matched = ", ".join(k.matched_before) or "nothing"
        dev = " (GPU kernels)" if k.replaced_from == "device" else ""
        w(f"  {_clip(k.name, 51):<52}{_us(k.time_us):>10}{_us(k.replaced_us):>10}{ratio:>8}"
          f"  {ops} -> {matched}{dev}")


def print_join(rows, out=None) -> None:
    """Inductor's kernels beside fuseview's fusions of the exported model, per source line, and the totals
    (every time is on one line only, so the lines add up)."""
    from fuseview.traces.display import JOIN_SPLIT as SPLIT

    w = lambda s="": print(s, file=out or sys.stdout)  # noqa: E731
    w()
    w("torch.compile beside fuseview's fusions of model.onnx, per source line (lines where one compiler"
      f" fuses and the other does not first; time per step; {SPLIT})")
    who = {(True, True): "both fuse", (True, False): "only Inductor fuses",
           (False, True): "only fuseview fuses", (False, False): "neither fuses"}
    shown = [r for r in rows if r.shown]
    for r in shown:
        one = "; ONNX has one node there" if len(r.onnx_before) == 1 and not r.onnx_fuses else ""
        w(f"  {r.where}  {_clip(r.code, 70)}  [{who[(r.inductor_fuses, r.onnx_fuses)]}{one}]")
        if r.modules:
            w(f"    in {_clip(', '.join(r.modules), 90)}")
        eager = ", ".join(sorted(r.eager_ops)) or "no eager op found"
        w(f"    eager {eager} {_us(r.eager_us)} -> Inductor {', '.join(r.kernels) or 'no kernel'}"
          f" {_us(r.kernel_us)}")
        after = f" -> {', '.join(r.onnx_after)}" if r.fusions else " (no fuseview fusion)"
        ort = (f"  onnxruntime {_us(r.ort_before_us)} -> {_us(r.ort_after_us)}"
               if r.ort_before_us is not None else "")
        w(f"    ONNX {', '.join(r.onnx_before) or 'no node'}{after}{ort}")
        for f in r.fusions:
            w(f"      {f}")
    if shown:
        timed = [r for r in shown if r.ort_before_us is not None]
        ort = (f"; onnxruntime {_us(sum(r.ort_before_us or 0.0 for r in timed))} ->"
               f" {_us(sum(r.ort_after_us or 0.0 for r in timed))}" if timed else "")
        w(f"  all {len(shown)} lines: eager {_us(sum(r.eager_us for r in shown))} -> Inductor"
          f" {_us(sum(r.kernel_us for r in shown))}{ort}")


def _lines(source) -> str:
    by_file: dict[str, list[int]] = {}
    for s in source:
        by_file.setdefault(Path(s.file).name, []).append(s.line)
    return ", ".join(f"{f} line{'s' if len(v) > 1 else ''} {', '.join(map(str, sorted(set(v))))}"
                     for f, v in by_file.items())


def _print_provenance(kernels: list[FusedKernel], w) -> None:
    from fuseview.traces.compare import ratio_phrase

    w()
    w("compiled kernels by Inductor's provenance (time per step: median [min-max] over the steps;"
      " replaced: the eager ops the kernel's graph nodes came from; an op shared by several kernels"
      " split in proportion to their times)")
    for k in kernels:
        p, ks = k.provenance, k.extra["per_step"]["kernel_us"]
        assert p is not None  # attributed by provenance
        w(f"  [{p.graph}] {p.kernel if k.kind == 'extern' else k.name} ({k.kind})")
        region = p.extra.get("region_aten") or []
        named = [m for m in k.matched_before if m not in region]
        took = (f"eager ops {', '.join(named)}" if named
                else f"no eager op of type {', '.join(p.aten)} found")
        if region:
            took += f" and, rewritten with them, {', '.join(region)}"
        words = ratio_phrase(k.time_us, k.replaced_us, k.extra.get("speedup"))
        w(f"    {took} took {_us(k.replaced_us)} per step -> kernel takes {_us(k.time_us)}"
          f" [{_us(ks['min'])}-{_us(ks['max'])}]: {words}")
        if "speedup" in k.extra:
            w(f"    replaced/kernel: {k.extra['speedup']['summary']}")
        if p.source:
            w(f"    from {_lines(p.source)}:")
            for s in p.source[:SOURCE_LINES]:
                w(f"      {Path(s.file).name}:{s.line}  {_clip(s.code, 90)}")
            if len(p.source) > SOURCE_LINES:
                w(f"      … {len(p.source) - SOURCE_LINES} more in the --json report")
        w(f"    post-grad nodes: {_clip(', '.join(p.post_grad), 100)}")


def run(args: argparse.Namespace) -> int:
    """Read the trace(s), print the summary or the comparison, write the report."""
    from fuseview.workflows.traces import assemble_traces, resolve_traces

    given = [args.before] + ([args.after] if args.after is not None else [])
    inputs = resolve_traces(given, args.steps, args.provenance)
    if args.window or args.screenshot or args.tab:
        return run_window(given, args.steps, args.provenance, args.screenshot, args.size, args.tab)
    to_stdout = args.json == "-"  # as `scan --json`: the report on stdout instead of the summary
    if args.json and not to_stdout:
        out = Path(args.json)
        if not out.resolve().parent.is_dir():
            raise FuseviewError(f"--json {args.json}: folder does not exist")
        for p in inputs.files:
            if os.path.exists(p) and out.resolve() == Path(p).resolve():
                raise FuseviewError(f"--json {args.json}: would overwrite an input trace")
    opened = assemble_traces(inputs, join=not to_stdout, ort_time=args.onnx_time)
    report = opened.report
    if to_stdout:
        print(report.text(), end="")
        return 0
    print_report(report, args.top, python=args.python)
    if opened.join is not None:
        print_join(opened.join)
    if args.json:
        path = report.save(args.json)
        print(f"\nreport written to {path}")
    return 0
