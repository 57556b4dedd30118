"""The one tune recipe behind `fuseview tune`, `fuseview.tune`, Session.tune and a sweep item (here or on a
Ray node): open the target, read the model, resolve its dims once (a KV-cache decoder at its decode step,
fuseview.dims.decode_step), scan (or reuse a scan made at those dims), search, and stamp where it ran."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fuseview.dims import RunDims, run_dims
from fuseview.targets.stamp import stamp_tune

if TYPE_CHECKING:
    from typing import TypeAlias

    import onnx

    from fuseview.fusion.scan import ScanResult
    from fuseview.runtime.profiling import Cancel
    from fuseview.targets.base import Target
    from fuseview.tuning.run import TuneResult
    from fuseview.tuning.search import Progress
    from fuseview.tuning.settings import TuneSettings

    ModelInput: TypeAlias = str | os.PathLike[str] | onnx.ModelProto


def tune_dims(model: onnx.ModelProto, settings: TuneSettings) -> RunDims:
    """The dims a tune measures at, resolved once: the --inputs arrays' own, else the user's dims with a
    KV-cache decoder at its decode step (the report's first note says so)."""
    if settings.inputs:
        from fuseview.fusion.pipeline import FuseOptions, dims_for

        return RunDims(dims_for(model, FuseOptions(dims=dict(settings.dims), inputs=settings.inputs)))
    return run_dims(model, settings.dims)


def at_precision(model: onnx.ModelProto, settings: TuneSettings, where: Path | None, scan: ScanResult | None
                 ) -> tuple[onnx.ModelProto, TuneSettings, ScanResult | None]:
    """The model tuned (its float16 conversion with settings.float16: the deployment precision), the settings
    with the tolerances of its precision (fuseview.precision) unless set, and a scan still valid."""
    from fuseview.fusion.pipeline import FuseOptions, prepare, tolerances

    if settings.float16:
        model = prepare(model, FuseOptions(float16=True), where.parent if where else None)[0]
        scan = None  # a scan of the float32 model names other candidates
    _kind, atol, rtol = tolerances(model, settings.atol, settings.rtol)
    return model, dataclasses.replace(settings, atol=atol, rtol=rtol), scan


def tune(model: ModelInput, settings: TuneSettings, target: str | Target | None = "local",
         progress: Progress | None = None, cancel: Cancel = None, *,
         path: str | os.PathLike[str] | None = None, scan: ScanResult | None = None, rules: Any = None
         ) -> TuneResult:
    """Tune a model file (or a ModelProto; `path`: the file it was read from, whose weights it may point
    into) on `target`: a --target value ("local", "ray:ADDRESS"), an opened Target, or None (here, with no
    target opened, as a sweep item is).

    `scan` is reused when it was made at the tune's dims (the window's); `rules` replaces the rule
    catalogue."""
    from fuseview.fusion.pipeline import load_for_fusion, scan_for_fusion
    from fuseview.fusion.scan import scan_model
    from fuseview.tuning.run import scan_provider, tune_model

    s = settings
    if isinstance(target, str):
        from fuseview.targets import open_target

        target = open_target(target, s.provider, s.budget_s)  # a Ray cluster is reached here
    if isinstance(model, (str, os.PathLike)):
        path = model
        from fuseview.runtime.ir_check import check_ir_version

        check_ir_version(Path(path))  # said as itself, not as "does not run on generated inputs; set --dim"
        proto = load_for_fusion(Path(path))
    else:
        proto = model
    where = Path(path) if path is not None else None
    proto, s, scan = at_precision(proto, s, where, scan)
    dims = tune_dims(proto, s)
    if not s.inputs:  # every later step (feeds, validation, the final build) at these dims
        s = dataclasses.replace(s, dims=dict(dims.values))
    if scan is None or dict(scan.index.dims_used) != dims.values or rules is not None:
        scan = (scan_for_fusion(proto, dims.values, where, scan_provider(s.provider)) if rules is None else
                scan_model(proto, dims.values, rules, base_dir=where.parent if where else None,
                           path=str(where) if where else None))
    result = tune_model(proto, scan, s, str(where) if where else None, where.parent if where else None,
                        progress, cancel, None if target is None else target.time_models, dims)
    if dims.note:
        result.report.notes.insert(0, dims.note)
    if target is not None:  # the machine the target measured on, and the target
        stamp_tune(result.report, target.environment())
    return result


def tune_item(model: ModelInput, fields: dict[str, Any], folder: str | os.PathLike[str], name: str
              ) -> dict[str, Any]:
    """A sweep item (a Target's tune_many runs it, here or on a Ray node): tune with these TuneSettings
    fields here and write `<name>.onnx` into folder; {"report": the report's JSON, "unchanged": no fusion
    kept}."""
    from fuseview.tuning.settings import TuneSettings

    result = tune(model, TuneSettings(**fields), None)
    result.save_model(Path(folder) / f"{name}.onnx")
    return {"report": result.report.to_json(), "unchanged": result.unchanged}
