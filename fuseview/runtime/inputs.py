"""Input feeds for a model: generated from its signature (reproducible) or loaded from an .npz file."""

from __future__ import annotations

import math
import os
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from fuseview.dims import RunDims, declared_dim, dim_key, resolve_dims
from fuseview.errors import FuseviewError
from fuseview.graph.document import shape_text
from fuseview.safe_io import check_npz

# Generated inputs above this many bytes in all are refused (FUSEVIEW_MAX_INPUT_BYTES overrides).
MAX_INPUT_BYTES = 1 << 30
# Float inputs of one element (a scale, a speed factor, a temperature) are drawn from this range, not N(0, 1):
# a sign flip or a zero there changes what the model computes, not just the values it computes on.
SCALAR_FLOAT_RANGE = (0.5, 1.5)
# Integer inputs whose embedding table cannot be found draw from [0, SAFE_INT_BOUND).
SAFE_INT_BOUND = 2
# Ops an id tensor may pass through on its way to the embedding Gather.
_ID_PASSTHROUGH = {"Reshape", "Cast", "Unsqueeze", "Squeeze", "Flatten", "Identity", "Expand"}


@dataclass(frozen=True)
class InputSpec:
    """One graph input: name, numpy dtype, and dims (int, symbolic name, or None when unnamed)."""

    name: str
    dtype: np.dtype
    shape: tuple[int | str | None, ...] | None


def input_specs(model: onnx.ModelProto) -> list[InputSpec]:
    """The inputs a caller must feed (graph inputs that are not initializers)."""
    inits = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.elem_type:
            raise FuseviewError(f"input {vi.name!r} is not a tensor with a known element type")
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, ValueError, TypeError):
            raise FuseviewError(
                f"input {vi.name!r} has element type {tt.elem_type}, which onnx does not define"
            ) from None
        shape = None
        if tt.HasField("shape"):
            shape = tuple(declared_dim(d) for d in tt.shape.dim)
        specs.append(InputSpec(vi.name, dtype, shape))
    return specs


def _const_shape(model: onnx.ModelProto, name: str) -> tuple[int, ...] | None:
    for t in model.graph.initializer:
        if t.name == name:
            return tuple(int(d) for d in t.dims)
    for n in model.graph.node:
        if n.op_type == "Constant" and name in n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    return tuple(int(d) for d in a.t.dims)
    return None


def embedding_bound(model: onnx.ModelProto, input_name: str) -> int | None:
    """Rows of the embedding table an integer input indexes, or None when no such table is found.

    Follows the input through Reshape/Cast/Unsqueeze-like nodes to a Gather whose data is a constant.
    """
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for x in n.input:
            consumers.setdefault(x, []).append(n)
    bounds = []
    frontier, seen = [input_name], {input_name}
    while frontier:
        t = frontier.pop()
        for n in consumers.get(t, []):
            if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] == t:
                shape = _const_shape(model, n.input[0])
                if shape:
                    axis = next((a.i for a in n.attribute if a.name == "axis"), 0)
                    bounds.append(shape[axis % len(shape)])
            elif n.op_type in _ID_PASSTHROUGH and n.input and n.input[0] == t:
                for o in n.output:
                    if o and o not in seen:
                        seen.add(o)
                        frontier.append(o)
    return min(bounds) if bounds else None


def _concrete_shape(spec: InputSpec, used: dict[str, int]) -> tuple[int, ...]:
    if spec.shape is None:
        raise FuseviewError(
            f"input {spec.name!r} has no shape in the model; give its values with --inputs FILE.npz"
        )
    return tuple(
        d if isinstance(d, int) else used[dim_key(spec.name, axis, d)] for axis, d in enumerate(spec.shape)
    )


def max_input_bytes() -> int:
    """The size limit of generated inputs: FUSEVIEW_MAX_INPUT_BYTES when set, else 1 GiB."""
    text = os.environ.get("FUSEVIEW_MAX_INPUT_BYTES", "").strip()
    if not text:
        return MAX_INPUT_BYTES
    try:
        value = int(float(text))
    except ValueError:
        raise FuseviewError(f"FUSEVIEW_MAX_INPUT_BYTES={text!r}: expected a number of bytes") from None
    if value < 1:
        raise FuseviewError(f"FUSEVIEW_MAX_INPUT_BYTES={text!r}: must be at least 1")
    return value


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB" if n >= 1 << 20 else f"{n} bytes"


def check_feed_size(
    model: onnx.ModelProto, used: dict[str, int], limit: int | None = None
) -> dict[str, tuple[int, ...]]:
    """The concrete shape of each input; FuseviewError when together they would exceed the limit."""
    limit = max_input_bytes() if limit is None else limit
    shapes = {spec.name: _concrete_shape(spec, used) for spec in input_specs(model)}
    sizes = {
        spec.name: math.prod(shapes[spec.name]) * spec.dtype.itemsize for spec in input_specs(model)
    }
    total = sum(sizes.values())
    if total > limit:
        biggest = max(sizes, key=lambda k: sizes[k])
        dims = ", ".join(f"{k}={v}" for k, v in used.items()) or "none"
        raise FuseviewError(
            f"generated inputs would take {_gib(total)} (limit {_gib(limit)}; {biggest!r} alone"
            f" {_gib(sizes[biggest])}) with dims {dims}: choose smaller ones with --dim NAME=VALUE"
            " (or raise FUSEVIEW_MAX_INPUT_BYTES)"
        )
    return shapes


def is_scalar_like(spec: InputSpec) -> bool:
    """A declared one-element input: rank 0, or every dim the fixed number 1 (not a symbol set to 1)."""
    return spec.shape is not None and all(d == 1 for d in spec.shape)


def make_feeds(
    model: onnx.ModelProto,
    dims: dict[str, int] | RunDims | None = None,
    seed: int = 0,
    max_bytes: int | None = None,
) -> dict[str, np.ndarray]:
    """Reproducible inputs for the model's signature: ids bounded by their embedding table, masks all ones.

    Float tensors are drawn from N(0, 1); one-element float inputs from SCALAR_FLOAT_RANGE. Dims given as a
    RunDims are used as resolved (dims.run_dims); others are resolved here.
    """
    used = dims.values if isinstance(dims, RunDims) else resolve_dims(model, dims)
    shapes = check_feed_size(model, used, max_bytes)
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for spec in input_specs(model):
        shape = shapes[spec.name]
        low = spec.name.lower()
        if spec.dtype == np.bool_:
            arr = np.ones(shape, np.bool_) if "mask" in low else rng.integers(0, 2, shape).astype(np.bool_)
        elif np.issubdtype(spec.dtype, np.integer):
            if "mask" in low:
                arr = np.ones(shape, spec.dtype)
            elif "token_type" in low or "segment" in low:
                arr = np.zeros(shape, spec.dtype)
            elif "position" in low and shape:
                arr = np.broadcast_to(np.arange(shape[-1]), shape).astype(spec.dtype)
            else:
                bound = embedding_bound(model, spec.name) or SAFE_INT_BOUND
                if np.iinfo(spec.dtype).max < bound - 1:
                    bound = int(np.iinfo(spec.dtype).max) + 1
                arr = rng.integers(0, bound, shape).astype(spec.dtype)
        elif np.issubdtype(spec.dtype, np.floating) and is_scalar_like(spec):
            arr = rng.uniform(*SCALAR_FLOAT_RANGE, shape).astype(spec.dtype)
        elif np.issubdtype(spec.dtype, np.floating):
            arr = rng.standard_normal(shape).astype(spec.dtype)
        else:
            raise FuseviewError(
                f"input {spec.name!r} has dtype {spec.dtype}, which fuseview cannot generate;"
                " use --inputs FILE.npz"
            )
        feeds[spec.name] = np.asarray(arr, order="C")  # ascontiguousarray would make a scalar 1-D
    return feeds


def load_feeds(path: str | os.PathLike, model: onnx.ModelProto, validating: bool = False
               ) -> dict[str, np.ndarray]:
    """Inputs from an .npz file, checked against the model's signature (names, dtypes, fixed dims); when
    validating, an empty input or an all-NaN float input is refused (any comparison on it would pass)."""
    feeds = _load_feeds(path, model)
    if validating:
        for name, arr in feeds.items():
            if arr.size == 0:
                raise FuseviewError(f"{path}: input {name!r} has shape {list(arr.shape)}, no elements:"
                                    " nothing to validate on")
            if arr.dtype.kind in "fc" and bool(np.isnan(arr).all()):
                raise FuseviewError(f"{path}: input {name!r} is NaN everywhere: nothing to validate on")
    return feeds


def _load_feeds(path: str | os.PathLike, model: onnx.ModelProto) -> dict[str, np.ndarray]:
    if os.path.lexists(path):
        check_npz(path)  # regular file; uncompressed sizes from the zip directory within the limit
    try:
        with np.load(path, allow_pickle=False) as z:
            loaded = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise FuseviewError(f"{path}: inputs file not found") from None
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise FuseviewError(f"{path}: not a readable .npz file ({exc})") from None
    specs = {s.name: s for s in input_specs(model)}
    missing = [n for n in specs if n not in loaded]
    extra = [n for n in loaded if n not in specs]
    if missing or extra:
        parts = []
        if missing:
            parts.append("missing " + ", ".join(missing))
        if extra:
            parts.append("not model inputs: " + ", ".join(extra))
        raise FuseviewError(f"{path}: {'; '.join(parts)} (model inputs: {', '.join(specs)})")
    bound: dict[str, int] = {}
    for name, spec in specs.items():
        arr = loaded[name]
        if arr.dtype != spec.dtype:
            raise FuseviewError(f"{path}: input {name!r} is {arr.dtype}, the model expects {spec.dtype}")
        if spec.shape is None:
            continue
        if arr.ndim != len(spec.shape):
            raise FuseviewError(
                f"{path}: input {name!r} has shape {list(arr.shape)}, the model expects"
                f" rank {len(spec.shape)} {shape_text(spec.shape)}"
            )
        for axis, (d, got) in enumerate(zip(spec.shape, arr.shape, strict=False)):
            if isinstance(d, int) and d != got:
                raise FuseviewError(
                    f"{path}: input {name!r} has shape {list(arr.shape)},"
                    f" the model expects {shape_text(spec.shape)}"
                )
            if isinstance(d, str) and d:
                if d in bound and bound[d] != got:
                    raise FuseviewError(
                        f"{path}: input {name!r} axis {axis} is {got} but dim {d!r} is {bound[d]} elsewhere"
                    )
                bound[d] = got
    return {n: np.asarray(loaded[n], order="C") for n in specs}


def dims_of_feeds(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, int]:
    """The symbolic dims as the given feeds set them."""
    out: dict[str, int] = {}
    for spec in input_specs(model):
        arr = feeds.get(spec.name)
        if arr is None or spec.shape is None:
            continue
        for axis, (d, got) in enumerate(zip(spec.shape, arr.shape, strict=False)):
            if not isinstance(d, int):
                out.setdefault(dim_key(spec.name, axis, d), int(got))
    return out


def describe_feeds(feeds: dict[str, np.ndarray]) -> list[dict]:
    """Name, dtype, shape and value range of each feed, JSON-ready."""
    out = []
    for name, arr in feeds.items():
        item: dict[str, object] = {
            "name": name, "dtype": str(arr.dtype), "shape": [int(x) for x in arr.shape]
        }
        if arr.size and (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
            item["min"] = _num(arr.min())
            item["max"] = _num(arr.max())
        out.append(item)
    return out


def _num(x: Any) -> float | int | bool:
    v = x.item() if hasattr(x, "item") else x
    return v if isinstance(v, (int, bool)) else float(v)



