"""fuseview's Python API: the operations of the CLI as functions, for notebooks and CI scripts.

Each function runs the same code as its command (one pipeline, one timer, one report format). They import
onnx/onnxruntime when called, so `import fuseview` stays cheap. Errors are FuseviewError with one line.
Keywords are checked as the CLI checks its flags, and spelled as them (`budget=`, `inputs=`, `dim=`), by
fuseview.options: `fuse(seeds=10**6)` is refused with the line `fuseview fuse --seeds 1000000` prints.

    import fuseview
    result = fuseview.tune("model.onnx", budget=60, threads=4)
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
    from fuseview.reports.profile import ProfileReport
    from fuseview.reports.trace import TraceReport
    from fuseview.tuning.run import TuneResult
    from fuseview.workflows.sweep import SweepSummary

__all__ = ["load", "scan", "fuse", "profile", "costs", "machine_roofline", "trace", "tune", "sweep"]

from fuseview.options import OptionTypeError, api_settings, check_number, check_path

PathLike = str | os.PathLike


def load(path: PathLike) -> onnx.ModelProto:
    """Read an ONNX model with its external weights (bounded, checked); the file is never modified."""
    from fuseview.fusion.pipeline import load_for_fusion

    check_path(path, "model")
    return load_for_fusion(path)


def scan(path: PathLike, dims: dict[str, int] | None = None, **options: Any) -> ScanResult:
    """The fusion candidates and near misses of a model file, as `fuseview scan` lists them."""
    from fuseview.fusion.pipeline import FuseOptions, prepare, scan_for_fusion

    given = api_settings({**options, **({} if dims is None else {"dims": dims})},
                         ["dims", "provider", "float16"])
    model = load(path)
    if given.get("float16"):  # the float16 conversion's candidates (fuse(float16=True) applies them)
        model = prepare(model, FuseOptions(float16=True), os.path.dirname(os.fspath(path)) or ".")[0]
    return scan_for_fusion(model, given.get("dims") or {}, path, given.get("provider"))


def _checked_model(model: object, label: str = "model") -> None:
    """A model given as a file name or a ModelProto, the latter through the loader's structural checks
    (an empty or cyclic graph is refused as it is in a file)."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        from fuseview.graph.loader import check_structure

        check_structure(model, label)
    else:
        check_path(model, label)


def _fields(cls: type) -> list[str]:
    import dataclasses

    return [f.name for f in dataclasses.fields(cls)]


def fuse(path: PathLike, accept: list[str] | None = None, reject: list[str] | None = None,
         plan: PathLike | None = None, **options: Any) -> FuseOutcome:
    """Apply candidates (all by default, or a plan / ids / rules), check and validate, as `fuseview fuse`.

    options are FuseOptions fields (dims, inputs, seeds, atol, rtol, validate, provider, float16: convert to
    float16 first, `.floor` its own difference); `.model` is the fused model.
    """
    from fuseview.fusion.pipeline import FuseOptions, build_fused, dims_for, prepare, scan_for_fusion
    from fuseview.fusion.plan import Plan

    opts = FuseOptions(**api_settings(options, _fields(FuseOptions)))
    if plan is not None:
        check_path(plan, "--plan")
    for label, ids in (("--accept", accept), ("--reject", reject)):
        listed = isinstance(ids, (list, tuple)) and all(isinstance(i, str) for i in ids)
        if ids is not None and not listed:
            raise OptionTypeError(f"{label}: must be a list of candidate ids or rule names")
    model, reference = prepare(load(path), opts, os.path.dirname(os.fspath(path)) or ".")
    found = scan_for_fusion(model, dims_for(model, opts), path, opts.provider)
    decided = Plan.load(plan, found.candidates) if plan else Plan(found.candidates, str(path))
    for r in reject or []:
        decided.reject(r)
    for a in accept or []:
        decided.accept(a)
    if not plan and not accept:
        decided.accept_all()
    return build_fused(model, found, decided.accepted(), opts, os.path.dirname(os.fspath(path)) or ".",
                       reference=reference)


def profile(model: PathLike, against: PathLike | None = None, target: str = "local", **settings: Any
            ) -> ProfileReport:
    """Profile a model (and A/B it against another), as `fuseview profile`; the typed report (`.to_json()`:
    the report file's dict, schema 3).

    settings are ProfileRequest fields (provider, runs, dims, ort_opt, threads, sessions, budget, ...):
    with against and budget=SECONDS, the A/B runs in batches until the verdict decides or the budget ends;
    target is "local" or "ray:ADDRESS" (environment.target says where it ran). A KV-cache decoder is
    profiled at its decode step (report["inputs"]["note"] says at which dims).
    """
    from fuseview.reports.profile import ProfileReport
    from fuseview.runtime.job import ProfileRequest
    from fuseview.targets import open_profile_target

    _checked_model(model)
    if against is not None:
        _checked_model(against, "--against")
    fields = [f for f in _fields(ProfileRequest) if f not in ("model", "against")]
    req = ProfileRequest(model=model, against=against,
                         **api_settings(settings, fields, {"inputs": "inputs_npz"}))
    return ProfileReport.from_json(open_profile_target(target, req).profile(req))


def costs(model: PathLike | onnx.ModelProto, dims: dict[str, int] | None = None) -> dict:
    """Node name -> NodeCost (FLOPs, bytes, intensity) at the dims a profile would use (fuseview.dims)."""
    import onnx

    from fuseview.dims import resolve_dims
    from fuseview.runtime.roofline import node_costs

    proto = model if isinstance(model, onnx.ModelProto) else load(model)
    return node_costs(proto, resolve_dims(proto, dims))


def machine_roofline(provider: str = "auto", threads: int = 0, refresh: bool = False) -> dict:
    """This machine's peak GFLOP/s and GB/s in onnxruntime (measured once, then from the user cache)."""
    from fuseview.runtime.machine import machine_roofline as roofline

    return roofline(provider, threads, refresh)


def trace(before: PathLike, after: PathLike | None = None, steps: int | None = None,
          provenance: PathLike | None = None, **options: Any) -> TraceReport:
    """Summarise a torch.profiler / Chrome trace (and compare with a second one), or a capture folder
    (eager.json, compiled.json, torch_trace/), as `fuseview trace`: the typed fuseview.trace_compare report
    (`.to_json()`: the report file's dict)."""
    from fuseview.workflows.traces import open_traces

    api_settings(options, [])  # an unknown keyword is one line, as for every call
    check_path(before, "before")
    if after is not None:
        check_path(after, "after")
    if provenance is not None:
        check_path(provenance, "provenance")
    if steps is not None:
        check_number("steps", steps)
    paths = [before] if after is None else [before, after]
    return open_traces(paths, steps, provenance).report


def tune(model: PathLike | onnx.ModelProto, progress=None, cancel=None, target: str = "local",
         **settings: Any) -> TuneResult:
    """Decide every fusion by measurement at the deployment's settings, as `fuseview tune`.

    model is a file or a ModelProto (with its weights in memory); settings are TuneSettings fields
    (provider, threads, ort_opt, dims, budget, keep_neutral, ...); progress(message, fraction) reports,
    and setting the threading.Event `cancel` stops the search with the best set so far. target: "local" or
    "ray:ADDRESS" (every A/B on one node there); report.environment says where it ran. A KV-cache decoder
    is tuned at its decode step (report.notes[0] says at which dims).
    """
    from fuseview.tuning.settings import TuneSettings
    from fuseview.workflows.tune import tune as run_tune

    s = TuneSettings(**api_settings(settings, _fields(TuneSettings)))
    _checked_model(model)
    for name, fn in (("progress", progress), ("cancel", cancel)):
        if fn is not None and not (callable(fn) if name == "progress" else hasattr(fn, "is_set")):
            wanted = "a function" if name == "progress" else "a threading.Event"
            raise OptionTypeError(f"{name}: must be {wanted}")
    return run_tune(model, s, target, progress, cancel)


def sweep(models: list[PathLike], out_dir: PathLike, target: str = "local",
          dims_sets: list[dict[str, int]] | None = None, progress=None, cancel=None,
          **settings: Any) -> SweepSummary:
    """Tune every model at every dims set into out_dir, as `fuseview sweep` (in parallel on a ray: target);
    settings are TuneSettings fields (budget_s per item). Items whose report is in out_dir are skipped."""
    from fuseview.workflows.sweep import sweep as run_sweep

    return run_sweep(models, out_dir, target, dims_sets or [], progress, cancel, **settings)
