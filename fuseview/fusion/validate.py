"""Run the original and the fused model on the same inputs and measure the difference of every output.

Policy: by default the models run on DEFAULT_SEEDS sets of generated inputs (runtime/inputs.py: ids bounded by
their embedding table, masks all ones, float tensors N(0, 1), one-element float inputs such as a scale or a
speed factor from [0.5, 1.5)); with an .npz file, on exactly those inputs. Every graph output is compared with
the one difference function of the profile's Outputs tab (runtime/compare.tensor_diff), so the same inputs
give the same max abs / max rel everywhere. onnxruntime runs on CPU with its own graph optimizations off.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx

from fuseview.defaults import ATOL, DEFAULT_SEEDS, RTOL  # noqa: F401 - re-exported
from fuseview.dims import RunDims, decode_step, resolve_dims
from fuseview.errors import FuseviewError
from fuseview.fusion.reference_ops import REFERENCE_OPS
from fuseview.graph.lazy_weights import materialized, weight_bytes
from fuseview.progress import StepProgress
from fuseview.runtime.compare import tensor_diffs
from fuseview.runtime.inputs import describe_feeds, dims_of_feeds, load_feeds, make_feeds

# an original output at least this big waits on disk for the fused model's (see _spilled)
SPILL_BYTES = 1 << 22
HINT = (
    "set the input dims with --dim NAME=VALUE (or INPUT:AXIS=VALUE),"
    " or give real inputs with --inputs FILE.npz"
)


@dataclass
class OutputDiff:
    """Max absolute and relative difference of one graph output (the worst over every input set)."""

    name: str
    max_abs: float
    max_rel: float
    ok: bool


@dataclass
class InputSet:
    """One set of inputs the models ran on, and the difference of each output on it (tensor_diff dicts)."""

    label: str  # "seed 0" or the .npz path
    seed: int | None
    feeds: list[dict]  # describe_feeds
    outputs: dict[str, dict]


@dataclass
class Validation:
    """How the fused model compares with the original on one or more input sets."""

    engine: str  # "onnxruntime" or "reference"
    outputs: list[OutputDiff]
    runs: list[InputSet] = field(default_factory=list)
    dims: dict[str, int] = field(default_factory=dict)
    atol: float = ATOL
    rtol: float = RTOL
    note: str = ""  # why the dims differ from those asked for (a decoder that runs only at its decode step)
    precision: str = "float32"  # the float type whose tolerances (fuseview.precision.TOLERANCES) judged it

    @property
    def ok(self) -> bool:
        """True when every output is within tolerance on every input set."""
        return all(o.ok for o in self.outputs)

    @property
    def max_abs(self) -> float:
        """Largest |fused - original| over every output and input set."""
        return max((o.max_abs for o in self.outputs), default=0.0)

    @property
    def max_rel(self) -> float:
        """Largest relative difference over every output and input set."""
        return max((o.max_rel for o in self.outputs), default=0.0)

    def figures(self, verdict: bool = True) -> str:
        """'max |diff| 3e-07, max rel 0.017 over 3 input sets (ok)': the one text of the figures (verdict
        False: without the '(ok)', for a difference measured as information, such as a noise floor)."""
        n = len(self.runs) or 1
        sets = f"{n} input set{'s' if n != 1 else ''}"
        said = f" ({'ok' if self.ok else 'DIFFERS'})" if verdict else ""
        return f"max |diff| {self.max_abs:.2g}, max rel {self.max_rel:.2g} over {sets}{said}"

    def headline(self) -> str:
        """'validated on onnxruntime: max |diff| …' as the CLI, the Apply line and the fused pane show it."""
        note = f" ({self.note})" if self.note else ""
        at = f" at {self.precision} tolerances" if self.precision != "float32" else ""
        return f"validated on {self.engine}{note}{at}: {self.figures()}"

    def to_json(self) -> dict:
        """JSON-ready summary."""
        return {
            "engine": self.engine,
            "ok": self.ok,
            "atol": self.atol,
            "rtol": self.rtol,
            "precision": self.precision,
            "dims": dict(self.dims),
            "note": self.note,
            "outputs": [
                {"name": o.name, "max_abs": o.max_abs, "max_rel": o.max_rel, "ok": o.ok} for o in self.outputs
            ],
            "inputs": [
                {"label": r.label, "seed": r.seed, "feeds": r.feeds, "outputs": r.outputs} for r in self.runs
            ],
        }


class OriginalFails(FuseviewError):
    """The original model does not run on the inputs validation made or was given."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


Runner = Callable[[dict[str, np.ndarray]], list[np.ndarray]]


class ValidationOverBudget(FuseviewError):
    """A validation stopped at its deadline (tune's --budget): nothing is known of the set's accuracy."""


def _over_budget() -> ValidationOverBudget:
    return ValidationOverBudget("validation stopped: the budget is spent")


def _bounded(run: Callable[..., list], deadline: float | None,
             options: Callable[[], object] | None) -> Runner:
    """run(feeds[, run_options]) that stops at `deadline` (time.monotonic()): onnxruntime's run is
    terminated where it is (RunOptions.terminate, set by a timer); another engine is checked before it
    starts."""
    if deadline is None:
        return lambda feeds: run(feeds)

    def bounded(feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _over_budget()
        if options is None:
            return run(feeds)
        opts = options()
        timer = threading.Timer(left, lambda: setattr(opts, "terminate", True))
        timer.daemon = True
        timer.start()
        try:
            return run(feeds, opts)
        except Exception:
            if getattr(opts, "terminate", False):
                raise _over_budget() from None
            raise
        finally:
            timer.cancel()

    return bounded


def model_runner(
    model: onnx.ModelProto, reference: bool, base_dir: str | os.PathLike | None = None,
    deadline: float | None = None,
) -> Runner:
    """One engine for a model, reused for every input set: onnxruntime CPU with its graph optimizations off
    (one session), or the reference evaluator (weights read into memory for it). With a deadline
    (time.monotonic()), a run past it raises ValidationOverBudget."""
    if reference:
        from onnx.reference import ReferenceEvaluator

        evaluator = ReferenceEvaluator(materialized(model, base_dir), new_ops=REFERENCE_OPS)
        return _bounded(lambda feeds: [np.asarray(x) for x in evaluator.run(None, feeds)], deadline, None)
    import onnxruntime as ort

    from fuseview.runtime.sessions import create_session

    ort.set_default_logger_severity(4)  # fatal only: onnxruntime's own lines would print raw and coloured
    # Validation is not timed, so it runs lean: no CPU arena (it keeps the high-water mark of every run's
    # temporaries, e.g. a 154 MB transposed embedding in GPT-2's dynamo export) and no packed copies of the
    # weights (MatMul kernels' pre-packing): fuse peak RSS, README "Real size"
    sess, _choice = create_session(model, "cpu", "disabled", base_dir=base_dir, cpu_mem_arena=False,
                                   prepack=False)
    return _bounded(lambda feeds, opts=None: [np.asarray(x) for x in sess.run(None, feeds, opts)], deadline,
                    ort.RunOptions)


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray], reference: bool) -> list[np.ndarray]:
    """Outputs of a model on one input set (model_runner for several)."""
    return model_runner(model, reference)(feeds)


def input_sets(
    model: onnx.ModelProto,
    dims: dict[str, int] | RunDims | None = None,
    seeds: int = DEFAULT_SEEDS,
    inputs: str | None = None,
    first_seed: int = 0,
) -> list[tuple[str, int | None, dict[str, np.ndarray]]]:
    """(label, seed, feeds) of each input set: the .npz file's, or `seeds` generated ones."""
    if inputs:
        return [(str(inputs), None, load_feeds(inputs, model, validating=True))]
    if seeds < 1:
        raise FuseviewError("--seeds must be at least 1")
    return [(f"seed {s}", s, make_feeds(model, dims, seed=s)) for s in range(first_seed, first_seed + seeds)]


def _worst(names: list[str], runs: list[InputSet]) -> list[OutputDiff]:
    out = []
    for name in names:
        diffs = [r.outputs[name] for r in runs]
        inf = float("inf")
        max_abs = max(inf if d["max_abs"] is None else d["max_abs"] for d in diffs)
        max_rel = max(inf if d["max_rel"] is None else d["max_rel"] for d in diffs)
        if all(d["passed"] for d in diffs) and all(d["max_abs"] is None for d in diffs):
            max_abs = max_rel = 0.0  # equal non-numeric outputs
        out.append(OutputDiff(name, float(max_abs), float(max_rel), all(d["passed"] for d in diffs)))
    return out


def validate(
    original: onnx.ModelProto,
    fused: onnx.ModelProto,
    reference_only: bool,
    dims: dict[str, int] | RunDims | None = None,
    seed: int = 0,
    seeds: int = DEFAULT_SEEDS,
    inputs: str | None = None,
    atol: float = ATOL,
    rtol: float = RTOL,
    progress: StepProgress | None = None,
    original_outputs: dict[str, list[np.ndarray]] | None = None,
    base_dir: str | os.PathLike | None = None,
    deadline: float | None = None,
) -> Validation:
    """Run both models on the same input sets; FuseviewError with the --dim/--inputs hint if they cannot.

    One engine per model, reused for every input set; the original's engine is released before the fused
    one is made, so a big model's weights are held by one session at a time. original_outputs, when given,
    keeps the original's outputs per input set across calls (tune validates many fused variants of one
    model on the same inputs).

    A KV-cache decoder that does not run on the default number of new tokens (an export traced at one new
    token, as a decode step is, may run only there) is validated at one new token, with a note saying so.
    With a deadline (time.monotonic()), a run past it stops and ValidationOverBudget is raised. Dims given as
    a RunDims were resolved once by the caller (its decode step decided): they are used as they are."""
    args = (atol, rtol, progress, original_outputs, base_dir, deadline)
    try:
        return _validate_at(original, fused, reference_only, dims, seed, seeds, inputs, *args)
    except OriginalFails:
        if inputs or isinstance(dims, RunDims):
            raise
        decode = decode_step(original, dims)
        if decode is None:
            raise
    try:
        v = _validate_at(original, fused, reference_only, decode, seed, seeds, inputs, *args)
    except OriginalFails:
        used = ", ".join(f"{k}={n}" for k, n in resolve_dims(original, dims).items())
        raise OriginalFails(f"the original model does not run on generated inputs (dims {used}) nor at one"
                            f" new token; {HINT}") from None
    new = next(k for k in decode if k not in (dims or {}))
    v.note = f"at {new}=1: the original runs only on one new token"
    return v


def _validate_at(original: onnx.ModelProto, fused: onnx.ModelProto, reference_only: bool,
                 dims: dict[str, int] | RunDims | None, seed: int, seeds: int, inputs: str | None,
                 atol: float, rtol: float, progress, original_outputs: dict | None, base_dir,
                 deadline: float | None = None) -> Validation:
    sets = input_sets(original, dims, seeds, inputs, first_seed=seed)
    used = (dims_of_feeds(original, sets[0][2]) if inputs else
            dims.values if isinstance(dims, RunDims) else resolve_dims(original, dims))
    engine_key = "reference" if reference_only else "onnxruntime"
    at = ",".join(f"{k}={n}" for k, n in sorted(used.items()))
    keys = [f"{label}|{engine_key}|{at}" for label, _s, _f in sets]
    cache = original_outputs if original_outputs is not None else {}
    # without a caller's cache the original's outputs wait on disk while the fused model runs: a real
    # decoder's logits are 16-26 MB per input set (README "Real size")
    if original_outputs is not None:
        return _validate(original, fused, reference_only, sets, used, bool(inputs), keys, cache, None,
                         atol, rtol, progress, base_dir, deadline)
    from fuseview.atomic import private_temp_folder

    with private_temp_folder("fuseview-expected-") as spill:  # one a SIGKILL left is removed by the next
        return _validate(original, fused, reference_only, sets, used, bool(inputs), keys, cache, spill,
                         atol, rtol, progress, base_dir, deadline)


def _spilled(outputs: list[np.ndarray], folder: str, key: int) -> list[np.ndarray]:
    """Big numeric outputs written to `folder` and given back memory-mapped (read again when compared)."""
    kept = []
    for i, x in enumerate(outputs):
        if x.nbytes >= SPILL_BYTES and x.dtype.kind in "biuf":
            path = os.path.join(folder, f"{key}-{i}.npy")
            np.save(path, x)
            x = np.load(path, mmap_mode="r")
        kept.append(x)
    return kept


def _validate(original: onnx.ModelProto, fused: onnx.ModelProto, reference_only: bool, sets: list,
              used: dict[str, int], given: bool, keys: list[str], cache: dict, spill: str | None,
              atol: float, rtol: float, progress, base_dir, deadline: float | None = None) -> Validation:
    names = [o.name for o in original.graph.output]
    dims_text = ", ".join(f"{k}={v}" for k, v in used.items()) or "none"
    expected: list[list[np.ndarray]] = []
    run = None
    try:
        for key, (_label, _s, feeds) in zip(keys, sets, strict=True):
            cached = cache.get(key)
            if cached is None:
                if run is None:
                    run = model_runner(original, reference_only, base_dir, deadline)
                cached = run(feeds)
                if spill is None:
                    cache[key] = cached
                else:
                    cached = _spilled(cached, spill, len(expected))
            expected.append(cached)
            if progress:
                progress("validating", len(expected), 2 * len(sets))
    except ValidationOverBudget:
        raise
    except Exception as exc:  # noqa: BLE001 - any engine error on these inputs is the user's to act on
        label = sets[len(expected)][0] if len(expected) < len(sets) else sets[0][0]
        where = f"the inputs of {label}" if given else f"generated inputs (dims {dims_text})"
        raise OriginalFails(
            f"the original model does not run on {where}: {_first_line(exc)}; {HINT}"
        ) from None
    finally:
        run = None  # release the original's session before the fused one is made
        from fuseview.runtime.sessions import release_freed_memory  # onnxruntime: imported when used

        release_freed_memory(weight_bytes(original, base_dir))
    runs: list[InputSet] = []
    label = sets[0][0]
    try:
        run = model_runner(fused, reference_only, base_dir, deadline)
        for k, (label, s, feeds) in enumerate(sets):
            b = run(feeds)
            runs.append(InputSet(label, s, describe_feeds(feeds),
                                 tensor_diffs(names, expected[k], b, atol, rtol)))
            if spill is not None:
                expected[k] = []  # unmap what was compared
            if progress:
                progress("validating", len(sets) + len(runs), 2 * len(sets))
    except ValidationOverBudget:
        raise
    except Exception as exc:  # noqa: BLE001
        raise FuseviewError(
            f"the fused model fails on inputs the original runs on ({label}): {_first_line(exc)}"
        ) from None
    engine = "reference" if reference_only else "onnxruntime"
    return Validation(engine, _worst(names, runs), runs, dict(used), atol, rtol)
