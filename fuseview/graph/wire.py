"""Where a protobuf that fails to parse goes wrong: tell a truncated ONNX file from bytes that never were one.

protobuf's own error ("Wire format was corrupt") says the same for both. Walking the wire format along
onnx's message descriptors finds whether the bytes read as a ModelProto up to a field that runs past the end
of the file, and names that field (``graph.initializer.raw_data``).
"""

from __future__ import annotations

from dataclasses import dataclass

# wire types of the protobuf encoding
_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
# descriptor field types that are length-delimited in the wire format
_LEN_TYPES = frozenset({9, 11, 12})  # TYPE_STRING, TYPE_MESSAGE, TYPE_BYTES
_FIXED64_TYPES = frozenset({1, 6, 16})  # double, fixed64, sfixed64
_FIXED32_TYPES = frozenset({2, 7, 15})  # float, fixed32, sfixed32
_MAX_DEPTH = 32


@dataclass(frozen=True)
class WireFault:
    """How the bytes failed: `truncated` (they end inside `field`) or not, and after how many bytes."""

    truncated: bool
    field: str
    offset: int


class _Stop(Exception):
    def __init__(self, fault: WireFault):
        super().__init__(fault.field)
        self.fault = fault


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int] | None:
    value = shift = 0
    while pos < end:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            return None
    return None


def _wire_type(field) -> int:
    if field.type in _LEN_TYPES:
        return _LEN
    if field.type in _FIXED64_TYPES:
        return _FIXED64
    if field.type in _FIXED32_TYPES:
        return _FIXED32
    return _VARINT


def _walk(data: bytes, pos: int, end: int, desc, path: str, depth: int, file_end: int) -> None:
    while pos < end:
        start = pos
        tag = _varint(data, pos, end)
        if tag is None:
            raise _Stop(WireFault(end == file_end, path or "(top level)", start))
        key, pos = tag
        number, wire = key >> 3, key & 7
        field = desc.fields_by_number.get(number)
        # a repeated scalar may come packed (length-delimited) as well as one by one
        if field is None or wire not in (_wire_type(field), _LEN):
            raise _Stop(WireFault(False, path or "(top level)", start))
        name = f"{path}.{field.name}" if path else field.name
        if wire == _VARINT:
            got = _varint(data, pos, end)
            if got is None:
                raise _Stop(WireFault(end == file_end, name, start))
            pos = got[1]
        elif wire in (_FIXED64, _FIXED32):
            pos += 8 if wire == _FIXED64 else 4
            if pos > end:
                raise _Stop(WireFault(end == file_end, name, start))
        else:
            got = _varint(data, pos, end)
            if got is None:
                raise _Stop(WireFault(end == file_end, name, start))
            length, pos = got
            stop = pos + length
            inner = field.message_type if field.type == 11 and depth < _MAX_DEPTH else None
            if stop > end:
                if end != file_end:  # a field longer than the message that holds it: corrupt, not cut
                    raise _Stop(WireFault(False, name, start))
                if inner is not None:  # name the deepest field the cut falls in
                    _walk(data, pos, end, inner, name, depth + 1, file_end)
                raise _Stop(WireFault(True, name, start))
            if inner is not None:
                _walk(data, pos, stop, inner, name, depth + 1, file_end)
            pos = stop


def locate_fault(data: bytes) -> WireFault | None:
    """Where bytes that protobuf refused stop reading as an onnx ModelProto (None: nowhere found)."""
    from onnx import ModelProto

    try:
        _walk(data, 0, len(data), ModelProto.DESCRIPTOR, "", 0, len(data))
    except _Stop as stop:
        return stop.fault
    return None


TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl")
EXPORT_HINT = ("export it to ONNX first: torch.onnx.export(model, (example_input,), \"model.onnx\","
               " dynamo=True), then open model.onnx")


def pytorch_file_text(where: str, head: bytes, by_name: bool = True) -> str | None:
    """The message for a PyTorch checkpoint given as a model (torch.save writes a zip, older ones a pickle;
    with by_name also .pt/.pth/.bin by name alone: for a file protobuf refused), else None. An ONNX file
    never starts like either (its first byte is a protobuf field tag)."""
    is_zip = head.startswith(b"PK\x03\x04")
    is_pickle = len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5
    if not (is_zip or is_pickle or (by_name and where.lower().endswith(TORCH_SUFFIXES))):
        return None
    kind = "a zip archive" if is_zip else "a pickle" if is_pickle else "named like one"
    return f"{where}: a PyTorch file ({kind}), not an ONNX model; {EXPORT_HINT}"


def decode_error_text(data: bytes, where: str, detail: str) -> str:
    """The message for a model protobuf refused: 'truncated or corrupt ONNX file (…)' when it was cut."""
    torch_file = pytorch_file_text(where, data[:8])
    if torch_file is not None:
        return torch_file
    fault = locate_fault(data)
    if fault is not None and fault.truncated and fault.offset > 0:
        return (f"{where}: truncated or corrupt ONNX file ({len(data):,} bytes, ended inside field"
                f" {fault.field})")
    return f"{where}: not an ONNX model (protobuf parse failed: {detail})"
