"""`fuseview tune MODEL -o OUT`: keep only the fusions measured faster at the deployment's settings."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import textwrap
import threading
import time
from pathlib import Path

from fuseview.atomic import all_or_none
from fuseview.errors import FuseviewError
from fuseview.targets import TARGET_HELP

HELP = "decide each fusion by measurement at the deployment's settings and write the fastest correct model"
PROVIDERS = ("auto", "cpu", "cuda")
ORT_LEVELS = ("disabled", "basic", "extended", "all")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview tune`."""
    p.add_argument("model", help="path to an .onnx file (never modified)")
    p.add_argument("-o", "--output", required=True, help="where to write the tuned model")
    p.add_argument("--provider", choices=PROVIDERS, default="auto", help="where it runs (default auto)")
    p.add_argument("--threads", type=int, default=0,
                   help="onnxruntime intra-op threads (default 0: what onnxruntime would use)")
    p.add_argument("--ort-opt", choices=ORT_LEVELS, default="all",
                   help="onnxruntime's graph optimization level it deploys with (default all, its default)")
    p.add_argument("--dim", action="append", default=[], metavar="NAME=VALUE",
                   help="an input dim's value (default batch-like 1, sequence-like 128, others 1; a KV-cache"
                   " decoder: its decode step, 1 new token over 256 cached, capped by its position table)")
    p.add_argument("--inputs", metavar="FILE.npz", help="time and validate on these inputs")
    p.add_argument("--budget", type=float, default=120.0, metavar="SECONDS",
                   help="time for the search; it stops early with the best set so far (default 120)")
    p.add_argument("--runs", type=int, default=30, help="timed runs per model per batch of sessions (30)")
    p.add_argument("--sessions", type=int, default=3, help="onnxruntime sessions per model per batch (3)")
    p.add_argument("--threshold", type=float, default=0.02,
                   help="smallest speed-up (fraction) called faster or slower (default 0.02: 2%%)")
    p.add_argument("--atol", type=float, help="absolute tolerance (default 0.0001; float16 models 0.01)")
    p.add_argument("--rtol", type=float, help="relative tolerance (default 0.001; float16 models 0.01)")
    p.add_argument("--float16", action="store_true",
                   help="tune the model's float16 conversion (I/O types kept): the precision GPUs run it at")
    p.add_argument("--seeds", type=int, default=3, help="sets of generated inputs to validate on (3)")
    p.add_argument("--keep-neutral", action="store_true",
                   help="also keep candidates outside accept-all (conflicts) that show no difference"
                   " (accept-all's own are always kept unless measured slower)")
    p.add_argument("--no-write-unchanged", action="store_true",
                   help="when no fusion helps, write no model (default: write the original unchanged)")
    p.add_argument("--ort-optimizer", choices=("auto", "off", "bert", "gpt2"), default="auto",
                   help="also time onnxruntime.transformers.optimizer's model (auto: when the type is known)")
    p.add_argument("--json", metavar="REPORT",
                   help="write the report (kind fuseview.tune, schema 2); - prints it, not the summary")
    p.add_argument("--save-plan", metavar="PLAN.json", help="save the decisions as a plan (fuse --plan)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--target", default="local", metavar="local|ray:ADDRESS", help=TARGET_HELP)


class _Progress:
    """One stderr line per step (redrawn in place on a terminal)."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.t0 = time.monotonic()

    def __call__(self, message: str, fraction: float) -> None:
        line = f"[{time.monotonic() - self.t0:5.0f} s] {message}"
        if self.tty:
            print(f"\r{line[:110]:<110}", end="", file=sys.stderr, flush=True)
        else:
            print(line, file=sys.stderr, flush=True)

    def done(self) -> None:
        """End the redrawn line."""
        if self.tty:
            print(file=sys.stderr, flush=True)


def _checks(args: argparse.Namespace) -> None:
    src, out = Path(args.model), Path(args.output)
    if not src.is_file():
        raise FuseviewError(f"{src}: no such model file")
    if out.exists() and out.resolve() == src.resolve():
        raise FuseviewError(f"{out}: refusing to overwrite the source model; choose another -o")
    for label, value in (("-o", args.output), ("--json", args.json), ("--save-plan", args.save_plan)):
        if value and value != "-" and not Path(value).resolve().parent.is_dir():
            raise FuseviewError(f"{label} {value}: folder does not exist")
    if args.inputs is not None and not Path(args.inputs).is_file():
        raise FuseviewError(f"--inputs {args.inputs}: file not found")


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def group_rows(groups) -> list[list[str]]:
    """One row per rule: its top-down and its added groups (two measurements) on one row."""
    by_rule: dict[str, list] = {}
    for g in groups:
        by_rule.setdefault(g.rule, []).append(g)
    rows = []
    for rule, gs in by_rule.items():
        tested = {c for g in gs for c in g.tested}
        outcomes = list(dict.fromkeys(g.outcome for g in gs if g.outcome != "not tested")) or ["not tested"]
        effects = [f"{g.effect.text()}" + (f" ({g.effect.against})" if len(gs) > 1 else "")
                   for g in gs if g.effect]
        rows.append([rule, f"{len(tested)} of {len(gs[0].candidates)}",
                     outcomes[0] if len(outcomes) == 1 else "mixed", "; ".join(effects) or "-"])
    return rows


def decision_groups(decisions) -> list[tuple[str, str, list[str]]]:
    """(decision, reason, candidates): each reason said once, with every candidate it decided."""
    out: dict[tuple[str, str], list[str]] = {}
    for d in decisions:
        out.setdefault((d.decision, d.reason), []).append(d.candidate)
    return [(dec, why, ids) for (dec, why), ids in out.items()]


def print_summary(rep, out=None) -> None:
    """The readable summary of a tune report: accept-all, groups, decisions, the final check."""
    from fuseview.reports.tune import Effect
    from fuseview.texttable import table_lines

    w = lambda s="": print(s, file=out or sys.stdout)  # noqa: E731
    c = rep.config
    dims = ", ".join(f"{k}={v}" for k, v in c["dims"].items()) or "defaults"
    w(f"model      {rep.model}")
    w(f"settings   {c.get('provider_used') or c['provider']}, onnxruntime optimization {c['ort_opt']},"
      f" threads {c['threads'] or 'onnxruntime default'}, dims {dims}, budget {c['budget_s']:g} s")
    b = rep.baseline
    if b.get("accept_all") and b["accept_all"].get("effect"):
        e = Effect.from_json(b["accept_all"]["effect"], "baseline.accept_all.effect")
        w(f"accept-all {b['accept_all']['accepted']} fusions: original/accept-all p50 {e.text()}")
    if b.get("over_tolerance"):
        w(f"accuracy   over tolerance (found by bisection): {', '.join(b['over_tolerance'])}")
    if rep.groups:
        w("groups     (time without / time with: >1 is faster with the group)")
        for line in table_lines(group_rows(rep.groups), "lr"):
            w(line)
    w(f"decisions  {len(rep.accepted())} of {len(rep.decisions)} accepted")
    for decision, reason, ids in decision_groups(rep.decisions):
        final = reason == rep.final.reason
        w(f"  {decision} {len(ids)}: " + ("by the final check (below)" if final else reason))
        for line in textwrap.wrap(", ".join(ids), 106, break_on_hyphens=False):
            w(f"    {line}")
    f = rep.final
    w(f"final      chosen {f.chosen.replace('_', '-')}: {f.accepted} fusions, {f.nodes} nodes;"
      f" verdict {f.verdict}")
    w(f"  {f.summary()}")
    if f.reason:
        w(f"  {f.reason}")
    for label, e, note in (("original", f.against_original, ""),
                           ("accept-all", f.against_accept_all, f.accept_all_note),
                           ("ORT optimizer", f.against_ort_optimizer, f.ort_optimizer_note)):
        if e is not None:
            w(f"  {label}/chosen p50 {e.text()} ({e.runs_text()})")
        elif note:
            w(f"  {label}: {note}")
    if f.max_abs is not None:
        w(f"validate   max |diff| {f.max_abs:.2g}, max rel {f.max_rel:.2g}"
          f" (atol {c['atol']:g}, rtol {c['rtol']:g}{', float16 conversion' if c.get('float16') else ''})")
    for n in rep.notes:
        w(f"note       {n}")
    stopped = f" (stopped: {rep.stopped})" if rep.stopped else ""
    w(f"tune took  {c['seconds']:.1f} s, {_count(rep.measurements, 'measurement')},"
      f" {_count(c.get('validations', 0), 'validation')}{stopped}")


def run(args: argparse.Namespace) -> int:
    """Tune, print the summary, write the model, plan and report; exit 130 after Ctrl+C (best so far kept)."""
    # here, not at the top: `fuseview --help` and the other commands start without onnx
    from fuseview.dims import parse_dim_args
    from fuseview.tuning.settings import TuneSettings
    from fuseview.workflows.tune import tune

    _checks(args)
    settings = TuneSettings(
        provider=args.provider, threads=args.threads, ort_opt=args.ort_opt, dims=parse_dim_args(args.dim),
        inputs=args.inputs, budget_s=args.budget, runs=args.runs, sessions=args.sessions,
        threshold=args.threshold, atol=args.atol, rtol=args.rtol, seeds=args.seeds,
        keep_neutral=args.keep_neutral, ort_optimizer=args.ort_optimizer, float16=args.float16)
    settings.check()
    cancel = threading.Event()
    progress = None if args.quiet else _Progress()

    def on_sigint(_signum, _frame) -> None:
        if cancel.is_set():  # a second Ctrl+C stops at once
            raise KeyboardInterrupt
        cancel.set()
        print("\nfuseview: stopping: keeping the best set so far (Ctrl+C again to abort)", file=sys.stderr)

    in_main = threading.current_thread() is threading.main_thread()  # signals go to the main thread only
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main else None
    try:
        result = tune(args.model, settings, args.target, progress, cancel)  # every A/B runs on the target
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
        if progress:
            progress.done()
    rep = result.report
    write = not (result.unchanged and args.no_write_unchanged)
    rep.output = args.output if write else None
    rep.plan = args.save_plan
    to_stdout = args.json == "-"  # as profile/trace --json -: the report on stdout instead of the summary
    if not to_stdout:
        print_summary(rep)
    written = []
    with all_or_none():  # the model, plan and report are renamed into place together, or none is
        if write:
            result.save_model(args.output)
            unchanged = " (the original, unchanged)" if result.unchanged else ""
            written.append(f"wrote      {args.output}{unchanged}")
        else:
            written.append("wrote      nothing: no fusion helps (--no-write-unchanged)")
        if args.save_plan:
            result.plan.save(args.save_plan)
            written.append(f"plan       {args.save_plan}")
        if args.json and not to_stdout:
            rep.save(args.json)
            written.append(f"report     {args.json}")
    if to_stdout:
        print(json.dumps(rep.to_json(), indent=1, allow_nan=False))
    else:
        print("\n".join(written))
    return 130 if rep.stopped == "cancelled" else 0
