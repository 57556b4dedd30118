"""fuseview's Python API: the operations of the CLI as functions, for notebooks and CI scripts.

Each function runs the same code as its command (one pipeline, one timer, one report format). They import
onnx/onnxruntime when called, so `import fuseview` stays cheap. Errors are FuseviewError with one line.

    import fuseview
    result = fuseview.tune("model.onnx", budget_s=60, threads=4)
    result.save_model("model.tuned.onnx")
    print(result.report.final.against_original.text())
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import onnx

    from fuseview.fusion.pipeline import FuseOutcome
    from fuseview.fusion.scan import ScanResult
    from fuseview.tuning.run import TuneResult

__all__ = ["load", "scan", "fuse", "profile", "trace", "tune"]

PathLike = str | os.PathLike


def load(path: PathLike) -> onnx.ModelProto:
    """Read an ONNX model with its external weights (bounded, checked); the file is never modified."""
    from fuseview.fusion.pipeline import load_for_fusion

    return load_for_fusion(path)


def scan(path: PathLike, dims: dict[str, int] | None = None) -> ScanResult:
    """The fusion candidates and near misses of a model file, as `fuseview scan` lists them."""
    from fuseview.fusion.pipeline import scan_for_fusion

    return scan_for_fusion(load(path), dims or {}, path)


def fuse(path: PathLike, accept: list[str] | None = None, reject: list[str] | None = None,
         plan: PathLike | None = None, **options: Any) -> FuseOutcome:
    """Apply candidates (all by default, or a plan / ids / rules), check and validate, as `fuseview fuse`.

    options are FuseOptions fields (dims, inputs, seeds, atol, rtol, validate); `.model` is the fused model.
    """
    from fuseview.fusion.pipeline import FuseOptions, build_fused, dims_for, scan_for_fusion
    from fuseview.fusion.plan import Plan

    opts = FuseOptions(**options)
    model = load(path)
    found = scan_for_fusion(model, dims_for(model, opts), path)
    decided = Plan.load(plan, found.candidates) if plan else Plan(found.candidates, str(path))
    for r in reject or []:
        decided.reject(r)
    for a in accept or []:
        decided.accept(a)
    if not plan and not accept:
        decided.accept_all()
    return build_fused(model, found, decided.accepted(), opts, os.path.dirname(os.fspath(path)) or ".")


def profile(model: PathLike, against: PathLike | None = None, **settings: Any) -> dict:
    """Profile a model (and A/B it against another), as `fuseview profile`; the report dict (schema 2).

    settings are ProfileRequest fields (provider, runs, dims, ort_opt, threads, sessions, ...).
    """
    from fuseview.runtime.job import ProfileRequest, run_profile

    return run_profile(ProfileRequest(model=model, against=against, **settings))


def trace(before: PathLike, after: PathLike | None = None, steps: int | None = None) -> dict:
    """Summarise a torch.profiler / Chrome trace (and compare with a second one), as `fuseview trace`."""
    from fuseview.traces.report import build_report
    from fuseview.traces.stats import load_trace

    return build_report(load_trace(before, steps), load_trace(after, steps) if after else None)


def tune(model: PathLike | onnx.ModelProto, progress=None, cancel=None, **settings: Any) -> TuneResult:
    """Decide every fusion by measurement at the deployment's settings, as `fuseview tune`.

    model is a file or a ModelProto (with its weights in memory); settings are TuneSettings fields
    (provider, threads, ort_opt, dims, budget_s, keep_neutral, ...); progress(message, fraction) reports,
    and setting the threading.Event `cancel` stops the search with the best set so far.
    """
    import onnx

    from fuseview.tuning.run import decode_step, tune_file, tune_model
    from fuseview.tuning.settings import TuneSettings

    s = TuneSettings(**settings)
    if isinstance(model, onnx.ModelProto):
        from fuseview.fusion.pipeline import FuseOptions, dims_for, scan_for_fusion

        decode = decode_step(model, s)  # a KV-cache decoder is measured at its decode step
        found = scan_for_fusion(model, dims_for(model, FuseOptions(dims=dict(s.dims), inputs=s.inputs)))
        result = tune_model(model, found, s, progress=progress, cancel=cancel)
        if decode:
            result.report.notes.insert(0, decode)
        return result
    return tune_file(model, s, progress, cancel)
