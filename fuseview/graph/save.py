"""Saving a model through the one writer (`fuseview.atomic`), its on-disk weights streamed, never all held.

It lives in `graph` because it reads the lazily kept weights (`graph.lazy_weights`); `atomic` sits in the
base layer below `graph` and knows files, not models.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from fuseview.atomic import check_output, write_atomic

if TYPE_CHECKING:  # onnx is imported where a model is saved, not when this module is
    import onnx

# Above this, protobuf cannot serialise a model in one piece: weights go to a data file beside it.
_MAX_PROTO_BYTES = 2_000_000_000


def save_model_atomic(
    model: onnx.ModelProto, path: str | os.PathLike, base_dir: str | os.PathLike | None = None
) -> Path:
    """Write a model atomically (its weights to `<name>.data` beside it when it is over 2 GB).

    Weights the model keeps on disk (read lazily, or external data relative to base_dir) are streamed
    into the file, never held in memory all at once."""
    import onnx

    from fuseview.graph.lazy_weights import has_disk_weights, materialized, stored_size, write_streaming

    out = Path(path)
    if has_disk_weights(model):
        if stored_size(model, base_dir) <= _MAX_PROTO_BYTES:
            return write_atomic(out, lambda tmp: write_streaming(model, tmp, base_dir))
        model = materialized(model, base_dir)
    if model.ByteSize() > _MAX_PROTO_BYTES:
        data = out.name + ".data"
        check_output(out.parent / data)
        return write_atomic(
            out, lambda tmp: onnx.save_model(model, tmp, save_as_external_data=True, location=data)
        )
    return write_atomic(out, lambda tmp: onnx.save_model(model, tmp))
