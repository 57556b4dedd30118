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
from fuseview.fusion.validate import DEFAULT_SEEDS, Validation, validate
from fuseview.graph.lazy_weights import has_disk_weights, materialized
from fuseview.naming import unique_node_names
from fuseview.precision import TOLERANCES, precision, tolerances  # noqa: F401 - re-exported
from fuseview.progress import Progress, steps_of

# progress(stage, fraction of the whole pipeline)

# onnxruntime's CPU EP has no float16 kernel for many ops and runs those nodes in float32 between Casts
CPU_CANNOT = "not validated: the float16 original does not run on onnxruntime's CPU EP here"
CPU_FLOAT16 = ("float16 on the CPU EP: onnxruntime runs the nodes it has no float16 kernel for in float32"
               " (Casts inserted), so this checks the rewrite, not a GPU's float16 kernels")


@dataclass
class FuseOptions:
    """How to build and prove a fused model; the CLI fills it from its flags, the window from its state."""

    dims: dict[str, int] = field(default_factory=dict)
    inputs: str | None = None  # an .npz file of real inputs instead of generated ones
    seeds: int = DEFAULT_SEEDS
    seed: int = 0
    atol: float | None = None  # None: the model's precision's (TOLERANCES)
    rtol: float | None = None
    validate: bool = True
    strict: bool = True  # raise FuseviewError on the first problem (CLI); else keep it as a note (window)
    # leave the fused model's weights where the source keeps them (the CLI streams them into its output);
    # otherwise the fused model holds them in memory, as a model the window can hand anywhere
    weights_on_disk: bool = False
    target_opset: int | None = None  # None keeps the source's ONNX opset (--target-opset N converts)
    provider: str | None = None  # 'cpu' / 'cuda': offer only fused ops with a kernel there (None: any)
    float16: bool = False  # convert to float16 (I/O types kept) before scanning, as GPUs run it


@dataclass
class FuseOutcome:
    """What the pipeline built: the applied result, its notes and its validation (None when skipped)."""

    result: ApplyResult
    validation: Validation | None
    notes: list[str]
    # with --float16: the float16 original against the float32 original on the same inputs (its own
    # difference, the noise floor the fused model's difference is read against); None otherwise
    floor: Validation | None = None

    @property
    def model(self) -> onnx.ModelProto:
        """The fused model."""
        return self.result.model

    def figures(self) -> str:
        """The validation's one line of figures, or why there is none."""
        if self.validation is not None:
            return self.validation.headline()
        return "not validated"

    def floor_line(self) -> str | None:
        """'the float16 original vs the float32 original: max |diff| …' (its noise floor), or None."""
        if self.floor is None:
            return None
        return f"float16 original vs the float32 original (its own noise floor): {self.floor.figures(False)}"


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


def prepare(model: onnx.ModelProto, options: FuseOptions, base_dir: str | os.PathLike | None = None
            ) -> tuple[onnx.ModelProto, onnx.ModelProto | None]:
    """(the model to scan and fuse, the float32 original it was converted from or None): with
    options.float16 the float16 conversion (I/O types kept), else the model itself."""
    if not options.float16:
        return model, None
    from fuseview.fusion.float16 import to_float16

    if precision(model) == "float16":
        raise FuseviewError("--float16: the model is float16 already; fuse it without --float16")
    return to_float16(model, base_dir), model


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
    reference: onnx.ModelProto | None = None,
) -> FuseOutcome:
    """Apply the accepted candidates, check the result (onnx checker, onnxruntime load) and validate it
    at the model's precision's tolerances; reference: the float32 original of a float16 conversion (its
    difference from the conversion is measured beside, as the conversion's noise floor)."""
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
    validation = floor = None
    if options.validate:
        report("validating", 0.4)
        validation, floor = _validated(model, result, options, notes, base_dir, report, reference)
    elif not result.reference_only_ops:
        _check_loads(result.model, options, notes, base_dir)
    if not options.weights_on_disk:
        report("reading weights", 0.75)
        result.model = with_weights(result.model, base_dir)
    return FuseOutcome(result, validation, notes, floor)


def _validated(model: onnx.ModelProto, result: ApplyResult, options: FuseOptions, notes: list[str],
               base_dir: str | os.PathLike | None, report: Progress, reference: onnx.ModelProto | None
               ) -> tuple[Validation | None, Validation | None]:
    """(the fused model against the original, the float16 original against its float32 one or None)."""
    from fuseview.fusion.validate import OriginalFails

    kind, atol, rtol = tolerances(model, options.atol, options.rtol)

    def check(a: onnx.ModelProto, b: onnx.ModelProto, reference_only: bool, step: float) -> Validation:
        return validate(a, b, reference_only, options.dims, seed=options.seed, seeds=options.seeds,
                        inputs=options.inputs, atol=atol, rtol=rtol, base_dir=base_dir,
                        progress=steps_of(report, "", step, 0.15))

    try:
        validation = check(model, result.model, bool(result.reference_only_ops), 0.4)
    except OriginalFails as exc:
        if kind != "float16" and options.strict:
            raise
        # a float16 model onnxruntime's CPU EP cannot run: said in one line, never called validated
        notes.append(f"{CPU_CANNOT} ({str(exc).split('; set the input dims')[0]})")
        return None, None
    except FuseviewError as exc:
        if options.strict:
            raise
        notes.append(f"not validated: {exc}")
        return None, None
    validation.precision = kind
    if kind == "float16":
        notes.append(CPU_FLOAT16)
    floor = None
    if reference is not None:
        try:
            floor = check(reference, model, False, 0.55)
            floor.precision = kind
            if not validation.ok:
                notes += _judged_by_floor(validation, floor, check(reference, result.model, False, 0.7), atol)
        except FuseviewError as exc:
            notes.append(f"the float16 conversion's own difference was not measured: {exc}")
    return validation, floor


def _judged_by_floor(validation: Validation, floor: Validation, to_reference: Validation, atol: float
                     ) -> list[str]:
    """Accept a float16 output outside tolerance of the float16 original when the fused model is no farther
    from the float32 original than twice the float16 original's own distance (plus atol); the notes say so."""
    # both float16 models approximate the float32 original: each may sit a noise floor away on either side
    own = {o.name: o.max_abs for o in floor.outputs}
    fused = {o.name: o.max_abs for o in to_reference.outputs}
    notes = []
    for out in validation.outputs:
        if out.ok or out.name not in own or out.name not in fused:
            continue
        if fused[out.name] <= 2 * own[out.name] + atol:
            out.ok = True
            notes.append(f"{out.name}: {out.max_abs:.2g} from the float16 original, beyond float16's"
                         f" tolerance, but {fused[out.name]:.2g} from the float32 original against the"
                         f" float16 original's own {own[out.name]:.2g}: within its noise floor (ok)")
    return notes


def _check_loads(
    model: onnx.ModelProto, options: FuseOptions, notes: list[str], base_dir: str | os.PathLike | None
) -> None:
    """Without validation, at least prove onnxruntime accepts the fused graph."""
    from fuseview.runtime.sessions import create_session

    try:
        create_session(model, "cpu", "disabled", base_dir=base_dir)
    except FuseviewError as exc:
        _problem(options, notes, f"fused model does not load in onnxruntime: {exc}")
