"""onnxruntime.transformers.optimizer's model where it supports the type: the rival of a tuned model."""

from __future__ import annotations

import logging
import warnings

import onnx

from fuseview.errors import FuseviewError

# node-name prefixes of the exporters' module paths -> the optimizer's model type
_TYPE_HINTS = (("/bert/", "bert"), ("/roberta/", "bert"), ("/distilbert/", "bert"),
               ("/transformer/h.", "gpt2"))
MODEL_TYPES = ("bert", "gpt2")


def guess_model_type(model: onnx.ModelProto) -> str | None:
    """'bert' or 'gpt2' when the node names carry that architecture's module paths, else None."""
    for n in model.graph.node[:2000]:
        for prefix, kind in _TYPE_HINTS:
            if n.name.startswith(prefix) or f"{prefix}" in n.name[:200]:
                return kind
    return None


def ort_optimized(model: onnx.ModelProto, model_type: str, owned: bool = False) -> onnx.ModelProto:
    """The model as onnxruntime.transformers.optimizer fuses it (opt_level 0: its fusions only).

    The optimizer changes the model it is given: a copy, unless `owned` (the caller's own copy, which it
    gives up: a real model's weights are not held twice)."""
    if model_type not in MODEL_TYPES:
        raise FuseviewError(f"onnxruntime's optimizer model type {model_type!r}: use one of {MODEL_TYPES}")
    try:
        from onnxruntime.transformers.optimizer import optimize_model
    except ImportError as exc:  # its symbolic shape inference needs sympy
        raise FuseviewError(f"onnxruntime.transformers.optimizer is not usable here: {exc}") from None
    if owned:
        copy = model
    else:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
    # its modules log under top-level names (it puts its folder on sys.path): silence all warnings a moment
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            opt = optimize_model(copy, model_type=model_type, num_heads=0, hidden_size=0, opt_level=0)
    except Exception as exc:  # noqa: BLE001 - the optimizer raises anything on a model it cannot read
        raise FuseviewError(f"onnxruntime's optimizer failed: {type(exc).__name__}: {exc}") from None
    finally:
        logging.disable(logging.NOTSET)
    return opt.model
