"""Validate a fused decoder with a KV cache at several cache lengths (past 0, 1, 64 x new tokens 1, 16).

A decoder exported with ``past_key_values`` inputs and ``present`` outputs runs on three kinds of dims: the
cached length (axis 2 of every ``past*`` input), the new tokens (the ids' sequence axis) and the attention
mask's length, which is past + new. ``cache_dims`` sets each of the model's own dim keys from those two
numbers, and ``validate_cache_lengths`` runs fusion/validate.py's one comparison at every pair.
"""

from __future__ import annotations

import onnx

from fuseview.dims import cache_dims as cache_relations
from fuseview.dims import dim_kind, dim_slots
from fuseview.errors import FuseviewError
from fuseview.fusion.validate import ATOL, RTOL, Validation, validate

PASTS = (0, 1, 64)
NEWS = (1, 16)


def _is_past(name: str) -> bool:
    return "past" in name.lower()


def has_kv_cache(model: onnx.ModelProto) -> bool:
    """True when some input is a cached key/value (the graph concatenates it with the new tokens' key or
    value, or its name says past) with a non-fixed length."""
    return cache_relations(model) is not None or any(_is_past(s.input) for s in dim_slots(model))


def cache_dims(model: onnx.ModelProto, past: int, new: int) -> dict[str, int]:
    """Every non-fixed input dim for `past` cached and `new` tokens: the past length (whatever its name, as
    the graph ties it: fuseview.dims.cache_dims) = past, past + new where the graph or the mask says so,
    batch-like dims 1, the other dims new; FuseviewError if two share a key."""
    cached = has_kv_cache(model)
    rel = cache_relations(model)
    ranks = {vi.name: len(vi.type.tensor_type.shape.dim) for vi in model.graph.input}
    dims: dict[str, int] = {}
    for s in dim_slots(model):
        if rel is not None and s.key in rel.past:
            want = past
        elif rel is not None and s.key in rel.total:
            want = past + new
        elif _is_past(s.input) and s.axis == ranks[s.input] - 2:
            want = past
        elif "mask" in s.input.lower() and s.axis == ranks[s.input] - 1:
            want = past + new if cached else new
        elif dim_kind(s.key) == "batch" or s.axis == 0:
            want = 1
        else:
            want = new
        if dims.setdefault(s.key, want) != want:
            raise FuseviewError(f"dim {s.key} is both {dims[s.key]} and {want} at past {past}, new {new}")
    return dims


def validate_cache_lengths(
    original: onnx.ModelProto,
    fused: onnx.ModelProto,
    pasts: tuple[int, ...] = PASTS,
    news: tuple[int, ...] = NEWS,
    seeds: int = 1,
    atol: float = ATOL,
    rtol: float = RTOL,
) -> list[tuple[int, int, Validation]]:
    """(past, new, validation) at every pair (only past 0 for a model without a cache), onnxruntime CPU."""
    out = []
    for past in pasts if has_kv_cache(original) else (0,):
        for new in news:
            dims = cache_dims(original, past, new)
            out.append((past, new, validate(original, fused, False, dims, seeds=seeds, atol=atol, rtol=rtol)))
    return out
