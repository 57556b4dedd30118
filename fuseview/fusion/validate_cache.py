"""Validate a fused decoder with a KV cache at several cache lengths (past 0, 1, 64 x new tokens 1, 16).

A decoder exported with ``past_key_values`` inputs and ``present`` outputs runs on three kinds of dims: the
cached length (axis 2 of every ``past*`` input), the new tokens (the ids' sequence axis) and the attention
mask's length, which is past + new. ``fuseview.dims.cache_length_dims`` sets each of the model's own dim
keys from those two numbers, and ``validate_cache_lengths`` runs fusion/validate.py's one comparison at
every pair.
"""

from __future__ import annotations

import onnx

from fuseview.dims import cache_length_dims, has_kv_cache
from fuseview.fusion.validate import ATOL, RTOL, Validation, validate

PASTS = (0, 1, 64)
NEWS = (1, 16)


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
            dims = cache_length_dims(original, past, new)
            out.append((past, new, validate(original, fused, False, dims, seeds=seeds, atol=atol, rtol=rtol)))
    return out
