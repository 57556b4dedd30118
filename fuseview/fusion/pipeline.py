"""One fuse pipeline for `fuseview fuse` and the window's Apply: load, scan, plan, apply, check, validate.

Both callers get the same dims policy (fuseview.dims), the same external-data handling (weights read into
memory before applying, so the fused model holds them), the same checks and the same validation with the
same tolerances, so the same inputs give the same figures in the CLI and in the window.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from fuseview.errors import FuseviewError
from fuseview.fusion.apply import ApplyResult, apply_candidates, check_fused
from fuseview.fusion.scan import ScanResult, load_model, scan_model
from fuseview.fusion.validate import ATOL, DEFAULT_SEEDS, RTOL, Validation, validate
from fuseview.graph.lazy_weights import has_disk_weights, materialized
from fuseview.naming import unique_node_names
from fuseview.progress import Progress, steps_of

# progress(stage, fraction of the whole pipeline)


@dataclass
class FuseOptions:
    """How to build and prove a fused model; the CLI fills it from its flags, the window from its state."""

    dims: dict[str, int] = field(default_factory=dict)
    inputs: str | None = None  # an .npz file of real inputs instead of generated ones
    seeds: int = DEFAULT_SEEDS
    seed: int = 0
    atol: float = ATOL
    rtol: float = RTOL
    validate: bool = True
    strict: bool = True  # raise FuseviewError on the first problem (CLI); else keep it as a note (window)
    # leave the fused model's weights where the source keeps them (the CLI streams them into its output);
    # otherwise the fused model holds them in memory, as a model the window can hand anywhere
    weights_on_disk: bool = False
    target_opset: int | None = None  # None keeps the source's ONNX opset (--target-opset N converts)
    provider: str | None = None  # 'cpu' / 'cuda': offer only fused ops with a kernel there (None: any)


@dataclass
class FuseOutcome:
    """What the pipeline built: the applied result, its notes and its validation (None when skipped)."""

    result: ApplyResult
    validation: Validation | None
    notes: list[str]

    @property
    def model(self) -> onnx.ModelProto:
        """The fused model."""
        return self.result.model

    def figures(self) -> str:
        """The validation's one line of figures, or why there is none."""
        if self.validation is not None:
            return self.validation.headline()
        return "not validated"


def has_external_data(model: onnx.ModelProto) -> bool:
    """True when some initializer of the main graph keeps its bytes on disk (a side file, or left in the
    model file by the loader)."""
    return has_disk_weights(model)


def with_weights(model: onnx.ModelProto, base_dir: str | os.PathLike | None) -> onnx.ModelProto:
    """The model with its on-disk weights read into memory (a copy; the model itself when it has none)."""
    if not has_external_data(model):
        return model
    try:
        return materialized(model, base_dir)
    except (OSError, ValueError) as exc:
        raise FuseviewError(f"cannot read the model's external weights: {exc}") from None


def load_for_fusion(path: str | os.PathLike) -> onnx.ModelProto:
    """Read an ONNX file for fusion, its big weights left on disk until something must hold them
    (FuseviewError on bad input); build_fused reads them as it needs."""
    return load_model(Path(path))


def dims_for(model: onnx.ModelProto, options: FuseOptions) -> dict[str, int]:
    """The dims to scan with: the --dim values, or those of the --inputs arrays (never both)."""
    if not options.inputs:
        return dict(options.dims)
    if options.dims:
        raise FuseviewError("--dim and --inputs both set the dims: give one of them")
    from fuseview.runtime.inputs import dims_of_feeds, load_feeds

    return dims_of_feeds(model, load_feeds(options.inputs, model))


def scan_for_fusion(
    model: onnx.ModelProto, dims: dict[str, int] | None = None, path: str | os.PathLike | None = None,
    provider: str | None = None,
) -> ScanResult:
    """Scan with the chosen dims (an unknown dim name is an error listing the valid ones), for provider."""
    base = Path(path).parent if path else None
    return scan_model(model, dims, base_dir=base, path=str(path) if path else None, provider=provider)


def keep_stand_in_names(original: onnx.ModelProto, fused: onnx.ModelProto) -> None:
    """Name the fused model's unnamed nodes as they were called in the original (fuseview.naming).

    Positions change when nodes are replaced, so a stand-in such as `Mul_7` would otherwise name another
    node in the fused graph and the two panes, plans and profiles could no longer be joined by name.
    """
    names = unique_node_names(original.graph.node)
    by_output = {n.output[0]: nm for n, nm in zip(original.graph.node, names, strict=True) if n.output}
    taken = {n.name for n in fused.graph.node if n.name}
    for n in fused.graph.node:
        if not n.name and n.output and by_output.get(n.output[0]) not in (None, *taken):
            n.name = by_output[n.output[0]]
            taken.add(n.name)


def _problem(options: FuseOptions, notes: list[str], text: str) -> None:
    if options.strict:
        raise FuseviewError(text)
    notes.append(text)


def build_fused(
    model: onnx.ModelProto,
    scan: ScanResult,
    accepted: Iterable[str],
    options: FuseOptions | None = None,
    base_dir: str | os.PathLike | None = None,
    progress: Progress | None = None,
) -> FuseOutcome:
    """Apply the accepted candidates, check the result (onnx checker, onnxruntime load) and validate it."""
    options = options or FuseOptions()
    report = progress or (lambda _stage, _fraction: None)
    report("applying", 0.05)
    result = apply_candidates(model, scan, list(accepted), options.target_opset)
    keep_stand_in_names(model, result.model)
    notes = list(result.notes)
    report("checking", 0.3)
    try:
        notes += check_fused(result.model, base_dir)
    except Exception as exc:  # noqa: BLE001 - onnx's checker raises several types
        _problem(options, notes, f"fused model fails onnx's checker: {str(exc).strip().splitlines()[0]}")
    validation = None
    if options.validate:
        report("validating", 0.4)
        try:
            validation = validate(
                model, result.model, bool(result.reference_only_ops), options.dims, seed=options.seed,
                seeds=options.seeds, inputs=options.inputs, atol=options.atol, rtol=options.rtol,
                progress=steps_of(report, "", 0.4, 0.3),
                base_dir=base_dir,
            )
        except FuseviewError as exc:
            if options.strict:
                raise
            notes.append(f"not validated: {exc}")
    elif not result.reference_only_ops:
        _check_loads(result.model, options, notes, base_dir)
    if not options.weights_on_disk:
        report("reading weights", 0.75)
        result.model = with_weights(result.model, base_dir)
    return FuseOutcome(result, validation, notes)


def _check_loads(
    model: onnx.ModelProto, options: FuseOptions, notes: list[str], base_dir: str | os.PathLike | None
) -> None:
    """Without validation, at least prove onnxruntime accepts the fused graph."""
    from fuseview.runtime.sessions import create_session

    try:
        create_session(model, "cpu", "disabled", base_dir=base_dir)
    except FuseviewError as exc:
        _problem(options, notes, f"fused model does not load in onnxruntime: {exc}")
