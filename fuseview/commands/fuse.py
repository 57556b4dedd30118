"""`fuseview fuse MODEL -o OUT`: apply fusion candidates, validate, and write the fused model atomically."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from fuseview.defaults import ATOL, DEFAULT_SEEDS, RTOL
from fuseview.errors import FuseviewError

if TYPE_CHECKING:
    from fuseview.fusion.pipeline import FuseOutcome
    from fuseview.fusion.plan import Plan
    from fuseview.reports import FuseReport

HELP = "apply fusion candidates (all by default), validate against the original, write the fused model"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview fuse`."""
    p.add_argument("model", help="path to an .onnx file (never modified)")
    p.add_argument("-o", "--output", required=True, help="where to write the fused model")
    p.add_argument(
        "--accept", action="append", default=[], metavar="ID|RULE", help="accept a candidate or rule"
    )
    p.add_argument(
        "--reject", action="append", default=[], metavar="ID|RULE", help="reject a candidate or rule"
    )
    p.add_argument("--plan", help="apply the decisions of a saved plan (JSON)")
    p.add_argument("--save-plan", metavar="PLAN.json", help="save the decisions made as a plan")
    p.add_argument(
        "--dim", action="append", default=[], metavar="NAME=VALUE",
        help="an input dim's value: a named one by name (seq=64), an unnamed one as INPUT:AXIS=VALUE"
        " (default batch-like 1, sequence-like 128, others 1)",
    )
    p.add_argument("--inputs", metavar="FILE.npz", help="validate on these inputs instead of generated ones")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                   help=f"sets of generated inputs to validate on (default {DEFAULT_SEEDS})")
    p.add_argument("--atol", type=float, help=f"absolute tolerance (default {ATOL:g}; float16: 0.01)")
    p.add_argument("--rtol", type=float, help=f"relative tolerance (default {RTOL:g}; float16: 0.01)")
    p.add_argument("--float16", action="store_true",
                   help="convert the model to float16 first (I/O types kept), as GPUs run it; validated"
                   " against that conversion, with its own difference from the original shown beside")
    p.add_argument("--no-validate", action="store_true", help="skip running original and fused models")
    p.add_argument("--emit", nargs=2, metavar=("ort-config", "DIR"),
                   help="also write the decisions as onnxruntime, Optimum and Olive read them, into DIR"
                   " (fusion_options.json, ort_config.json, session_options.json, olive_pass.json,"
                   " decisions.json)")
    p.add_argument("--provider", choices=("auto", "cpu", "cuda"), default="auto",
                   help="fuse only into ops with a kernel there for the model's dtype (default auto: cuda "
                        "when onnxruntime has CUDAExecutionProvider, else cpu)")
    p.add_argument("--target-opset", type=int, metavar="N",
                   help="convert the fused model to ONNX opset N (default: keep the source's opset; fused ops"
                   " the opset lacks are onnxruntime contrib ops); says what the conversion rewrote")


def _same_path(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them not there yet: compare where they would be
        return os.path.realpath(a) == os.path.realpath(b)


def _decide(args: argparse.Namespace, scan, src: Path) -> Plan:
    from fuseview.fusion.plan import Plan

    plan = Plan.load(args.plan, scan.candidates) if args.plan else Plan(scan.candidates, str(src))
    for r in args.reject:
        plan.reject(r)
    for a in args.accept:
        plan.accept(a)
    if not args.plan and not args.accept:
        plan.accept_all()
    return plan


def run(args: argparse.Namespace) -> int:
    """Fuse, check, validate, write."""
    # imported here, not at the top: `fuseview --help` and other commands start without numpy/onnx
    from fuseview.atomic import all_or_none
    from fuseview.dims import parse_dim_args
    from fuseview.fusion.pipeline import (
        FuseOptions,
        build_fused,
        dims_for,
        load_for_fusion,
        prepare,
        scan_for_fusion,
    )
    from fuseview.graph.save import save_model_atomic
    from fuseview.reports import FuseReport

    src, out = Path(args.model), Path(args.output)
    _check_arguments(args, src, out)
    options = FuseOptions(
        dims=parse_dim_args(args.dim), inputs=args.inputs, seeds=args.seeds, atol=args.atol, rtol=args.rtol,
        validate=not args.no_validate, strict=True, weights_on_disk=True, target_opset=args.target_opset,
        provider=_provider(args.provider), float16=args.float16,
    )
    from fuseview.runtime.ir_check import check_ir_version

    check_ir_version(src)  # before the scan: a model onnxruntime cannot read is not "the fused model fails"
    model, reference = prepare(load_for_fusion(src), options, src.parent)
    scan = scan_for_fusion(model, dims_for(model, options), src, options.provider)
    plan = _decide(args, scan, src)
    outcome = build_fused(model, scan, plan.accepted(), options, src.parent, reference=reference)
    result = outcome.result
    report = FuseReport.of(model, scan, outcome, src)
    _print_outcome(args, src, report, outcome)
    emitted = []
    with all_or_none():  # the model, the plan and the emitted configs are renamed into place together
        save_model_atomic(result.model, out, src.parent)  # weights streamed from the source, not held
        if args.save_plan:
            plan.save(args.save_plan)
        if args.emit:
            from fuseview.fusion.ort_config import decisions, write_ort_config

            made = decisions(scan.candidates, set(plan.accepted()), set(args.reject))
            emitted = write_ort_config(args.emit[1], made, str(src))
    print(f"wrote      {out}")
    for path in emitted:
        print(f"wrote      {path}")
    return 0


def _check_arguments(args: argparse.Namespace, src: Path, out: Path) -> None:
    """FuseviewError for an argument that would fail or lose a file, before anything is read or written."""
    if out.exists() and src.exists() and out.resolve() == src.resolve():
        raise FuseviewError(f"{out}: refusing to overwrite the source model; choose another -o")
    if not out.parent.exists():
        raise FuseviewError(f"{out.parent}: output folder does not exist")
    if args.inputs is not None and not Path(args.inputs).is_file():
        raise FuseviewError(f"--inputs {args.inputs}: file not found")
    if args.seeds < 1:
        raise FuseviewError("--seeds must be at least 1")
    if args.target_opset is not None and not 1 <= args.target_opset <= 99:
        raise FuseviewError(f"--target-opset {args.target_opset}: not an ONNX opset")
    if (args.atol is not None and args.atol < 0) or (args.rtol is not None and args.rtol < 0):
        raise FuseviewError("--atol and --rtol must be 0 or more")
    if args.emit and (args.emit[0] != "ort-config" or not Path(args.emit[1]).is_dir()):
        raise FuseviewError(f"--emit {args.emit[0]} {args.emit[1]}: expected --emit ort-config DIR, DIR an"
                            " existing folder")
    if args.emit:  # refused before anything is written (a link, a folder, an input of this run)
        from fuseview.atomic import check_output
        from fuseview.fusion.ort_config import FILES

        others = [(flag, v) for flag, v in (("-o", args.output), ("--save-plan", args.save_plan)) if v]
        for name in FILES:
            emitted_path = check_output(Path(args.emit[1]) / name)
            for flag, value in others:  # one output replacing another would be a silent loss
                if _same_path(emitted_path, Path(value)):
                    raise FuseviewError(f"{flag} {value}: the same file as --emit's {emitted_path}; give two"
                                        " paths")


def _print_outcome(args: argparse.Namespace, src: Path, report: FuseReport, outcome: FuseOutcome) -> None:
    """What was applied and how the fused model validated; FuseviewError when it differs (nothing written)."""
    print(f"model      {src}" + (" (its float16 conversion, I/O types kept)" if args.float16 else ""))
    print(f"applied    {report.fusions} of {report.candidates} candidates")
    for key, n_applied in report.applied.items():
        print(f"  {n_applied:>4} x {key}")
    print(f"nodes      {report.nodes_before} -> {report.nodes_after}")
    for note in report.notes:
        print(f"note       {note}")
    v = outcome.validation
    if v is not None:
        print(f"validate   {v.engine} ({'ok' if v.ok else 'DIFFERS'})")
        print(f"  {v.headline()}")
        inputs = args.inputs or "generated, " + ", ".join(r.label for r in v.runs)
        dims = ", ".join(f"{k}={x}" for k, x in v.dims.items()) or "none"
        print(f"  inputs {inputs}; dims {dims}; atol {v.atol:g}, rtol {v.rtol:g} ({v.precision} tolerances)")
        if outcome.floor_line():
            print(f"  {outcome.floor_line()}")
        for o in v.outputs:
            print(
                f"  {o.name}: max abs {o.max_abs:.3g}, max rel {o.max_rel:.3g}"
                f"{'' if o.ok else '  (beyond tolerance)'}"
            )
        if not v.ok:
            raise FuseviewError("fused model differs from the original beyond tolerance; nothing written")

def _provider(asked: str) -> str:
    """The target provider, said on one line (auto: cuda when onnxruntime has CUDAExecutionProvider)."""
    from fuseview.fusion.kernels import default_provider

    provider, why = (asked, "asked") if asked != "auto" else default_provider()
    print(f"provider {provider} ({why}; a fused op with no kernel there is left out, see scan --near-misses)")
    return provider
