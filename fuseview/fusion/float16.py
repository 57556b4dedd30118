"""A model converted to float16 as GPU deployments run it: onnxruntime's own converter, inputs and outputs
kept in their types (Casts at the edges), so the same feeds run the float32 original and its conversion.

`fuse --float16`, `tune --float16` (and the API's `float16=True`) convert before they scan, so the
float16-only fusions (GroupQueryAttention with rotary on CUDA, for one) are offered where the provider has
the kernel.
"""

from __future__ import annotations

import logging
import os
import warnings

import onnx

from fuseview.errors import FuseviewError


def to_float16(model: onnx.ModelProto, base_dir: str | os.PathLike | None = None,
               keep_float32: tuple[str, ...] = ()) -> onnx.ModelProto:
    """The model with its float32 weights and compute in float16, I/O types kept (a new model; FuseviewError
    when the converter refuses it); keep_float32: op types left in float32 between Casts besides the
    converter's own list. Weights kept on disk are read into memory first."""
    from onnxruntime.transformers.float16 import DEFAULT_OP_BLOCK_LIST, convert_float_to_float16

    from fuseview.graph.lazy_weights import has_disk_weights, materialized

    source = materialized(model, base_dir) if has_disk_weights(model) else model
    if source is model:  # the converter changes the model it is given: never the caller's
        source = onnx.ModelProto()
        source.CopyFrom(model)
    quiet = logging.getLogger("onnxruntime.transformers.float16")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # it warns per value it clamps to float16's range
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = convert_float_to_float16(source, keep_io_types=True,
                                                 op_block_list=[*DEFAULT_OP_BLOCK_LIST, *keep_float32])
    except Exception as exc:  # noqa: BLE001 - the converter raises what onnx and numpy raise
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise FuseviewError(f"cannot convert the model to float16: {first}") from None
    finally:
        quiet.setLevel(level)
    converted.ir_version = model.ir_version  # keep the source's IR version (the runtime reads it)
    # the converter leaves its own shape inference behind (symbols such as unk__12 where the scan's
    # inference knows the dims): the scan infers afresh
    del converted.graph.value_info[:]
    # and appends the Casts it adds (graph inputs', blocked ops') after their readers: put them in order
    from fuseview.fusion.apply import stable_toposort

    ordered = stable_toposort(list(converted.graph.node), set())
    del converted.graph.node[:]
    converted.graph.node.extend(ordered)
    return converted
