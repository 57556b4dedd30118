"""Writing files so that nobody ever sees half of one: a temp file beside the target, then a rename."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import onnx

from fuseview.errors import FuseviewError

# Above this, protobuf cannot serialise a model in one piece: weights go to a data file beside it.
_MAX_PROTO_BYTES = 2_000_000_000


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def write_atomic(path: str | os.PathLike, write: Callable[[str], None], allow_empty: bool = True) -> Path:
    """Call write(tmp) on a temp file beside path, then rename it over path; on failure nothing is left."""
    out = Path(path)
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise FuseviewError(f"{out}: folder {folder} does not exist")
    # the temp name keeps the suffix: image writers pick their format from it
    fd, tmp = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=out.suffix or ".tmp", dir=folder)
    os.close(fd)
    try:
        write(tmp)
        if not allow_empty and os.path.getsize(tmp) == 0:
            raise FuseviewError(f"{out}: nothing was written")
        os.chmod(tmp, _new_file_mode())  # mkstemp makes 0600; the result is as readable as any new file
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return out


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write text (UTF-8) atomically."""
    return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def save_model_atomic(model: onnx.ModelProto, path: str | os.PathLike) -> Path:
    """Write a model atomically (its weights to `<name>.data` beside it when it is over 2 GB)."""
    out = Path(path)
    if model.ByteSize() > _MAX_PROTO_BYTES:
        data = out.name + ".data"
        return write_atomic(
            out, lambda tmp: onnx.save_model(model, tmp, save_as_external_data=True, location=data)
        )
    return write_atomic(out, lambda tmp: onnx.save_model(model, tmp))
