"""Big models without their weights in memory: read an .onnx file leaving each large embedded weight on disk,
and write a model whose weights live on disk by streaming them.

A weight left on disk is an ordinary external-data tensor that points into the model file itself
(`location` = the file's own name, `offset`/`length` = where its raw bytes sit, `basepath` = its folder), so
every reader of external data (numpy_helper.to_array with base_dir, onnx.load_external_data_for_model, the
Inspector's "external data, not read") handles it as it handles a side file. Only the protobuf wire format
of ModelProto -> graph -> initializer is walked; everything else is copied byte for byte and parsed by
protobuf itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx

from fuseview.errors import FuseviewError

# Files from this size up are read lazily (smaller ones parse in well under a second either way).
LAZY_FILE_BYTES = 32 << 20
# Embedded weights from this size up stay on disk; smaller ones (shape constants, biases) stay in memory.
LAZY_TENSOR_BYTES = 1 << 20
_CHUNK = 16 << 20
_GRAPH, _INITIALIZER, _RAW_DATA = 7, 5, 9  # field numbers in onnx.proto (ModelProto, GraphProto, TensorProto)


class _Unusual(Exception):
    """The file is not plain wire format we can walk: let protobuf parse (and judge) it whole."""


def _varint(f: BinaryIO) -> int:
    shift = result = 0
    while True:
        b = f.read(1)
        if not b:
            raise _Unusual("truncated varint")
        result |= (b[0] & 0x7F) << shift
        if not b[0] & 0x80:
            return result
        shift += 7
        if shift > 63:
            raise _Unusual("varint too long")


def _encode_varint(n: int) -> bytes:
    if n < 0:  # shifting a negative number right never reaches 0: refuse rather than loop
        raise ValueError(f"cannot encode the negative size {n}")
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _encode_varint(field << 3 | wire)


def _fields(f: BinaryIO, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field, wire type, start of the field's key, start of its payload) up to `end`; leaves f after it."""
    while f.tell() < end:
        start = f.tell()
        tag = _varint(f)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            _varint(f)
        elif wire == 1:
            f.seek(8, os.SEEK_CUR)
        elif wire == 5:
            f.seek(4, os.SEEK_CUR)
        elif wire == 2:
            length = _varint(f)
            payload = f.tell()
            if payload + length > end:
                raise _Unusual("field runs past its message")
            f.seek(payload + length)
            yield field, wire, start, payload
            f.seek(payload + length)  # the caller may have read inside the field
            continue
        else:
            raise _Unusual("group or unknown wire type")
        stop = f.tell()
        yield field, wire, start, stop
        f.seek(stop)
    if f.tell() != end:
        raise _Unusual("message ends inside a field")


def _span(f: BinaryIO, start: int, end: int) -> bytes:
    here = f.tell()
    f.seek(start)
    data = f.read(end - start)
    f.seek(here)
    return data


def _initializer(f: BinaryIO, payload: int, end: int, path: Path, min_tensor: int) -> bytes:
    """One initializer's bytes, its raw_data replaced by a pointer into the file when it is large."""
    kept = bytearray()
    raw: tuple[int, int] | None = None
    f.seek(payload)
    for field, wire, start, at in _fields(f, end):
        stop = f.tell()
        if field == _RAW_DATA and wire == 2 and stop - at >= min_tensor:
            raw = (at, stop - at)  # the last raw_data wins, as in protobuf
            continue
        kept += _span(f, start, stop)
    if raw is None:
        return _span(f, payload, end)
    t = onnx.TensorProto.FromString(bytes(kept))
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    del t.external_data[:]
    for k, v in (("location", path.name), ("offset", str(raw[0])), ("length", str(raw[1])),
                 ("basepath", str(path.parent))):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t.SerializeToString()


def read_lazily(path: str | os.PathLike, min_tensor: int = LAZY_TENSOR_BYTES) -> onnx.ModelProto | None:
    """The model in `path` with every main-graph weight of min_tensor bytes or more left on disk, or None
    when the file is not wire format this walk understands (the caller then parses it whole)."""
    p = Path(path).resolve()
    out = bytearray()
    try:
        with open(p, "rb", buffering=1 << 16) as f:
            size = os.fstat(f.fileno()).st_size
            for field, wire, start, at in _fields(f, size):
                stop = f.tell()
                if field != _GRAPH or wire != 2:
                    out += _span(f, start, stop)
                    continue
                graph = bytearray()
                f.seek(at)
                for gfield, gwire, gstart, gat in _fields(f, stop):
                    gstop = f.tell()
                    if gfield == _INITIALIZER and gwire == 2:
                        body = _initializer(f, gat, gstop, p, min_tensor)
                        f.seek(gstop)
                        graph += _key(_INITIALIZER, 2) + _encode_varint(len(body)) + body
                    else:
                        graph += _span(f, gstart, gstop)
                out += _key(_GRAPH, 2) + _encode_varint(len(graph)) + graph
        return onnx.ModelProto.FromString(bytes(out))
    except Exception:  # noqa: BLE001 - anything unusual: the whole parse judges the file
        return None


def record_folder(model: onnx.ModelProto, folder: str | os.PathLike) -> None:
    """Write `folder` as the basepath of every main-graph weight kept in a side file that has none, so the
    weights are found from the proto alone (as those read_lazily leaves in the model file are)."""
    for t in model.graph.initializer:
        external = t.data_location == onnx.TensorProto.EXTERNAL
        if external and not any(e.key == "basepath" for e in t.external_data):
            e = t.external_data.add()
            e.key, e.value = "basepath", str(Path(folder).resolve())


def external_location(
    t: onnx.TensorProto, base_dir: str | os.PathLike | None
) -> tuple[Path, int, int | None]:
    """(file, offset, length or None) of an external tensor's bytes; basepath wins over base_dir."""
    info = {e.key: e.value for e in t.external_data}
    base = info.get("basepath") or (str(base_dir) if base_dir is not None else "")
    length = info.get("length")
    offset = int(info.get("offset") or 0)
    return Path(base) / info.get("location", ""), offset, int(length) if length else None


def check_span(t: onnx.TensorProto, location: str, file_size: int, path: Path) -> None:
    """FuseviewError unless the tensor's offset and length are plain non-negative numbers that lie inside
    its data file and fit its shape (a size past the end once encoded a negative length, and the varint
    encoder never ended)."""
    info = {e.key: e.value for e in t.external_data}
    span = {}
    for key in ("offset", "length"):
        text = info.get(key)
        if text is None or (key == "length" and text == ""):
            continue
        if not (text.isascii() and text.isdigit() and len(text) <= 40):
            raise FuseviewError(
                f"{path}: external data {key} {text[:40]!r} of tensor {t.name!r} is not a non-negative"
                " whole number"
            )
        span[key] = int(text)
    offset = span.get("offset", 0)
    length = span.get("length")
    where = f"offset {offset}" if length is None else f"offset {offset}, length {length}"
    if offset > file_size or offset + (length or 0) > file_size:
        raise FuseviewError(
            f"{path}: external data of tensor {t.name!r} ({where}) lies past the end of {location!r}"
            f" ({file_size} bytes)"
        )
    itemsize = _ITEM_BYTES.get(t.data_type)
    if length is not None and itemsize is not None:
        count = 1
        for d in t.dims:
            count *= max(d, 0)
        if length != count * itemsize:
            raise FuseviewError(
                f"{path}: external data of tensor {t.name!r} holds {length} bytes; its shape"
                f" {list(t.dims)} needs {count * itemsize}"
            )


_TP = onnx.TensorProto
# bytes per element of the types stored one element per fixed number of bytes
_ITEM_BYTES: dict[int, int] = {
    _TP.FLOAT: 4, _TP.UINT8: 1, _TP.INT8: 1, _TP.UINT16: 2, _TP.INT16: 2, _TP.INT32: 4, _TP.INT64: 8,
    _TP.BOOL: 1, _TP.FLOAT16: 2, _TP.DOUBLE: 8, _TP.UINT32: 4, _TP.UINT64: 8, _TP.BFLOAT16: 2,
    _TP.COMPLEX64: 8, _TP.COMPLEX128: 16,
}


def _without(msg, skip: set[str]):  # noqa: ANN001, ANN202 - any protobuf message
    """A shallow rebuild of msg without the named fields (a CopyFrom would copy every weight)."""
    out = type(msg)()
    for fd, value in msg.ListFields():
        if fd.name in skip:
            continue
        target = getattr(out, fd.name)
        if fd.is_repeated:
            target.extend(value)
        elif fd.type == fd.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(out, fd.name, value)
    return out


def _tensor_frames(t: onnx.TensorProto, base_dir: str | os.PathLike | None) -> Iterator[bytes]:
    """The serialized tensor in pieces, an external one with its bytes read from disk in chunks."""
    if t.data_location != onnx.TensorProto.EXTERNAL:
        yield t.SerializeToString()
        return
    head = _without(t, {"external_data", "data_location", "raw_data"}).SerializeToString()
    src, offset, length = external_location(t, base_dir)
    with open(src, "rb") as f:
        if length is None:
            length = os.fstat(f.fileno()).st_size - offset
        yield head + _key(_RAW_DATA, 2) + _encode_varint(length)
        f.seek(offset)
        left = length
        while left:
            chunk = f.read(min(_CHUNK, left))
            if not chunk:
                raise OSError(f"external data of {t.name!r} ends early in {src.name}")
            left -= len(chunk)
            yield chunk


def _tensor_size(t: onnx.TensorProto, base_dir: str | os.PathLike | None) -> int:
    if t.data_location != onnx.TensorProto.EXTERNAL:
        return t.ByteSize()
    head = _without(t, {"external_data", "data_location", "raw_data"}).ByteSize()
    src, offset, length = external_location(t, base_dir)
    if length is None:
        length = src.stat().st_size - offset
    return head + len(_key(_RAW_DATA, 2)) + len(_encode_varint(length)) + length


def has_disk_weights(model: onnx.ModelProto) -> bool:
    """True when some main-graph initializer keeps its bytes on disk (external data or left there lazily)."""
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


def weight_bytes(model: onnx.ModelProto, base_dir: str | os.PathLike | None = None) -> int:
    """Bytes of the main graph's weights, those on disk counted, not read (cheaper than stored_size)."""
    return sum(_tensor_size(t, base_dir) for t in model.graph.initializer)


def stored_size(model: onnx.ModelProto, base_dir: str | os.PathLike | None = None) -> int:
    """Bytes the model takes with every weight embedded (those on disk counted, not read)."""
    graph_rest = _without(model.graph, {"initializer"})
    sizes = [_tensor_size(t, base_dir) for t in model.graph.initializer]
    body = graph_rest.ByteSize() + sum(len(_key(_INITIALIZER, 2)) + len(_encode_varint(s)) + s for s in sizes)
    return _without(model, {"graph"}).ByteSize() + len(_key(_GRAPH, 2)) + len(_encode_varint(body)) + body


def write_streaming(model: onnx.ModelProto, path: str | os.PathLike,
                    base_dir: str | os.PathLike | None = None) -> None:
    """Write the model with every weight embedded, streaming those on disk instead of loading them
    (memory: the graph plus one chunk). The caller keeps the file under protobuf's 2 GiB."""
    rest = _without(model, {"graph"})
    graph_rest = _without(model.graph, {"initializer"})
    sizes = [_tensor_size(t, base_dir) for t in model.graph.initializer]
    graph_len = graph_rest.ByteSize() + sum(len(_key(_INITIALIZER, 2)) + len(_encode_varint(s)) + s
                                            for s in sizes)
    with open(path, "wb") as out:
        out.write(rest.SerializeToString())
        out.write(_key(_GRAPH, 2) + _encode_varint(graph_len))
        out.write(graph_rest.SerializeToString())
        for t, s in zip(model.graph.initializer, sizes, strict=True):
            out.write(_key(_INITIALIZER, 2) + _encode_varint(s))
            for piece in _tensor_frames(t, base_dir):
                out.write(piece)


def stage_for_runtime(model: onnx.ModelProto, folder: str | os.PathLike,
                      base_dir: str | os.PathLike | None = None) -> Path:
    """A file in `folder` that a runtime can load with the model's on-disk weights, none of them read here.

    Each weight file is hard-linked into the folder (onnxruntime refuses external data outside the model's
    folder, symlinks included) and the staged graph points into the links; where a link cannot be made
    (another file system), the weights are streamed into one embedded file instead.
    """
    folder = Path(folder)
    staged = _without(model, {"graph"})
    staged.graph.CopyFrom(_without(model.graph, {"initializer"}))
    links: dict[Path, str] = {}
    try:
        for t in model.graph.initializer:
            copy = staged.graph.initializer.add()
            if t.data_location != onnx.TensorProto.EXTERNAL:
                copy.CopyFrom(t)
                continue
            src, offset, length = external_location(t, base_dir)
            src = src.resolve()
            if src not in links:
                links[src] = f"weights{len(links)}.bin"
                os.link(src, folder / links[src])
            copy.CopyFrom(_without(t, {"external_data"}))
            for k, v in (("location", links[src]), ("offset", str(offset)), ("length", str(length or ""))):
                if v:
                    e = copy.external_data.add()
                    e.key, e.value = k, v
    except OSError:
        out = folder / "embedded.onnx"
        write_streaming(model, out, base_dir)
        return out
    out = folder / "staged.onnx"
    with open(out, "wb") as f:
        f.write(staged.SerializeToString())
    return out


def materialized(model: onnx.ModelProto, base_dir: str | os.PathLike | None) -> onnx.ModelProto:
    """The model with its on-disk weights read into memory (a copy; the model itself when it has none)."""
    if not has_disk_weights(model):
        return model
    full = onnx.ModelProto()
    full.CopyFrom(model)
    for t in full.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        src, offset, length = external_location(t, base_dir)
        with open(src, "rb") as f:
            f.seek(offset)
            data = f.read() if length is None else f.read(length)
        if length is not None and len(data) != length:
            raise OSError(f"external data of {t.name!r} ends early in {src.name}")
        t.raw_data = data
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]
    return full


def stage_for_checker(model: onnx.ModelProto, folder: str | os.PathLike) -> Path:
    """A file in `folder` for onnx's checker: the graph, its on-disk weights pointing at one empty file."""
    folder = Path(folder)
    (folder / "weights.bin").write_bytes(b"")
    staged = _without(model, {"graph"})
    staged.graph.CopyFrom(_without(model.graph, {"initializer"}))
    for t in model.graph.initializer:
        copy = staged.graph.initializer.add()
        if t.data_location != onnx.TensorProto.EXTERNAL:
            copy.CopyFrom(t)
            continue
        copy.CopyFrom(_without(t, {"external_data"}))
        e = copy.external_data.add()
        e.key, e.value = "location", "weights.bin"
    out = folder / "staged.onnx"
    out.write_bytes(staged.SerializeToString())
    return out


# Element types whose bytes on disk are a numpy array as they are (little-endian, one element per item).
_MAPPABLE = {getattr(onnx.TensorProto, n) for n in ("FLOAT", "DOUBLE", "FLOAT16", "INT64", "INT32", "INT16",
                                                    "INT8", "UINT8", "UINT16", "UINT32", "UINT64", "BOOL")}


def mapped_weight(t: onnx.TensorProto, base_dir: str | os.PathLike | None) -> np.ndarray | None:
    """A read-only memory map of an on-disk weight (nothing read until a value is used), or None when its
    bytes are not a plain array (another element type, a big-endian host, a length that does not fit)."""
    if t.data_type not in _MAPPABLE or sys.byteorder != "little":
        return None
    src, offset, length = external_location(t, base_dir)
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
    count = 1
    for d in t.dims:
        count *= int(d)
    if length is not None and length != count * dtype.itemsize:
        return None
    if count == 0:
        return np.zeros([int(d) for d in t.dims], dtype)
    try:
        return np.memmap(src, dtype=dtype, mode="r", offset=offset, shape=tuple(int(d) for d in t.dims))
    except (OSError, ValueError):
        return None
