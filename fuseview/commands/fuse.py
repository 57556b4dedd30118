"""`fuseview fuse MODEL -o OUT`: apply fusion candidates, validate, and write the fused model atomically."""

from __future__ import annotations

import argparse
from pathlib import Path

import onnx

from fuseview.atomic import save_model_atomic
from fuseview.errors import FuseviewError
from fuseview.fusion.apply import apply_candidates, check_fused
from fuseview.fusion.graphindex import parse_dims
from fuseview.fusion.plan import Plan
from fuseview.fusion.scan import load_model, scan_model
from fuseview.fusion.validate import validate

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
        "--dim", action="append", default=[], metavar="NAME=VALUE", help="symbolic input dim value"
    )
    p.add_argument("--no-validate", action="store_true", help="skip running original and fused models")


def run(args: argparse.Namespace) -> int:
    """Fuse, check, validate, write."""
    src, out = Path(args.model), Path(args.output)
    if out.exists() and src.exists() and out.resolve() == src.resolve():
        raise FuseviewError(f"{out}: refusing to overwrite the source model; choose another -o")
    if not out.parent.exists():
        raise FuseviewError(f"{out.parent}: output folder does not exist")
    dims = parse_dims(args.dim)
    model = load_model(src)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        onnx.load_external_data_for_model(model, str(src.parent))
    scan = scan_model(model, dims, base_dir=src.parent, path=str(src))
    plan = Plan.load(args.plan, scan.candidates) if args.plan else Plan(scan.candidates, str(src))
    for r in args.reject:
        plan.reject(r)
    for a in args.accept:
        plan.accept(a)
    if not args.plan and not args.accept:
        plan.accept_all()
    result = apply_candidates(model, scan, plan.accepted())
    notes = check_fused(result.model)
    if not result.reference_only_ops:
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.log_severity_level = 4  # fatal only: errors reach the user as one line
        try:
            ort.InferenceSession(result.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - a rule produced a graph onnxruntime refuses: say which
            raise FuseviewError(
                f"fused model does not load in onnxruntime: {str(exc).splitlines()[0]}"
            ) from None
    print(f"model      {src}")
    print(f"applied    {len(result.applied)} of {len(scan.candidates)} candidates")
    counts: dict[str, int] = {}
    for c in result.applied:
        counts[f"{c.rule} -> {c.domain + ':' if c.domain else ''}{c.fused_op}"] = (
            counts.get(f"{c.rule} -> {c.domain + ':' if c.domain else ''}{c.fused_op}", 0) + 1
        )
    for k, v in counts.items():
        print(f"  {v:>4} x {k}")
    print(f"nodes      {len(model.graph.node)} -> {len(result.model.graph.node)}")
    for n in notes + result.notes:
        print(f"note       {n}")
    if not args.no_validate:
        v = validate(model, result.model, bool(result.reference_only_ops), dims)
        print(f"validate   {v.engine} ({'ok' if v.ok else 'DIFFERS'})")
        for o in v.outputs:
            print(
                f"  {o.name}: max abs {o.max_abs:.3g}, max rel {o.max_rel:.3g}"
                f"{'' if o.ok else '  (beyond tolerance)'}"
            )
        if not v.ok:
            raise FuseviewError("fused model differs from the original beyond tolerance; nothing written")
    save_model_atomic(result.model, out)
    print(f"wrote      {out}")
    if args.save_plan:  # last, with the model: a run that fails writes nothing
        plan.save(args.save_plan)
    return 0
