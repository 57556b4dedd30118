"""The constants shape propagation starts from: a graph's initializers and Constant outputs, their shapes, and
the values of the small integer ones (shape arithmetic: axes, indices, reshape targets)."""

from __future__ import annotations

import math
import sys

import numpy as np
import onnx

from fuseview.graph.table import NodeTable

Shape = list[int]
MAX_VALUE = 64  # track values of small int tensors only (shape arithmetic)


# numpy dtypes of the element types read straight from raw_data (little-endian, as onnx stores them)
_RAW: dict[int, type] = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32,
}


def raw_array(t: onnx.TensorProto) -> np.ndarray:
    """numpy_helper.to_array, with the common inline raw_data case read directly (the same array, read-only,
    without its per-call overhead: a scan reads thousands of small shape constants)."""
    dtype = _RAW.get(t.data_type)
    if dtype is None or not t.HasField("raw_data") or sys.byteorder != "little" or t.HasField("segment"):
        from onnx import numpy_helper

        return numpy_helper.to_array(t)
    return np.frombuffer(t.raw_data, dtype=dtype).reshape(t.dims[:])


def constant_seeds(
    graph: onnx.GraphProto, table: NodeTable | None = None, weightless: bool = False
) -> tuple[dict[str, Shape], dict[str, np.ndarray]]:
    """The one seeding of propagate (the graph index's, the roofline's, the dim names'): the shapes of the
    graph's initializers and Constant outputs, and the values of those short enough to be shape arithmetic
    (integers of at most MAX_VALUE elements whose data the proto holds). table: the graph's NodeTable (or
    that of the graph it copies); weightless: graph is inference's weightless copy, whose tensors are all
    small, so each distinct one is read once, its bytes the key (a 48-layer GPT-2: 4,268 constants, 25
    distinct)."""
    shapes: dict[str, Shape] = {}
    values: dict[str, np.ndarray] = {}
    memo: dict[bytes, tuple[Shape, np.ndarray | None]] = {}

    def read(name: str, t: onnx.TensorProto) -> None:
        if not weightless:
            dims, value = _seed(t)
        else:
            key = t.SerializeToString()
            got = memo.get(key)
            if got is None:
                got = memo[key] = _seed(t)
            dims, value = got[0][:], got[1]
            if value is not None and value.flags.writeable:  # shared only when read-only (raw_array's view)
                value = value.copy()
        shapes[name] = dims
        if value is not None:
            values[name] = value

    for t in graph.initializer:
        read(t.name, t)
    for out, a in _constants(graph, table):  # propagate skips them, so their values go in as constants
        if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
            read(out, a.t)
        elif a.name in ("value_int", "value_ints", "value_float", "value_floats"):
            value = np.array(onnx.helper.get_attribute_value(a))
            shapes[out] = list(value.shape)
            if a.name.startswith("value_int"):
                values[out] = value.astype(np.int64)
    return shapes, values


def _constants(graph: onnx.GraphProto, table: NodeTable | None) -> list[tuple[str, onnx.AttributeProto]]:
    """Each Constant node's first output and first attribute (graph's own), for those that have both."""
    if table is None or len(table) != len(graph.node):
        return [(n.output[0], n.attribute[0]) for n in graph.node
                if n.op_type == "Constant" and n.output and n.attribute]
    nodes = graph.node  # the table's columns say which nodes, and their outputs
    return [(outs[0], nodes[i].attribute[0]) for i, (op, outs, attrs)
            in enumerate(zip(table.op_types, table.outputs, table.attributes, strict=True))
            if op == "Constant" and outs and attrs]


def _seed(t: onnx.TensorProto) -> tuple[Shape, np.ndarray | None]:
    """A constant's dims, and its value when it is small integer data the proto holds (None otherwise)."""
    dims = t.dims[:]
    small = t.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and math.prod(
        dims) <= MAX_VALUE and t.data_location != onnx.TensorProto.EXTERNAL
    try:
        return dims, raw_array(t) if small else None
    except Exception:  # noqa: BLE001 - a constant whose data the weightless copy dropped stays unknown
        return dims, None
