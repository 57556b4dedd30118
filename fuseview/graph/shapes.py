"""Fast concrete shape propagation with the small integer values exporters compute shapes from.

onnx's own inference (C++) stops at TorchScript's Shape -> Gather -> Unsqueeze -> Concat -> Reshape chains
and onnxruntime's symbolic inference follows them but costs ~0.7 s on a 48-layer GPT-2. With every input dim
set to a number, a single forward pass over the common ops gives concrete shapes for ~all tensors in a few
tens of milliseconds; whatever it does not know falls back to onnx's inference.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx

from fuseview.graph.seeds import MAX_VALUE as _MAX_VALUE
from fuseview.graph.table import NodeTable

Shape = list[int]

_UNARY = {
    "Cast",
    "Sqrt",
    "Erf",
    "Tanh",
    "Relu",
    "Sigmoid",
    "Neg",
    "Exp",
    "Log",
    "Reciprocal",
    "Softmax",
    "Identity",
    "Abs",
    "Not",
    "Clip",
    "Gelu",
    "FastGelu",
    "LeakyRelu",
    "Floor",
    "Ceil",
    "IsNaN",
    "LogSoftmax",
    "QuickGelu",
    "HardSigmoid",
    "Softplus",
    "Round",
    "Sign",
    "Elu",
    "Selu",
    "CastLike",
    "Dropout",
    "LayerNormalization",
    "SimplifiedLayerNormalization",
    "RMSNormalization",
    "BiasGelu",
    "Trilu",
    "CumSum",
    "Mish",
    "Cos",
    "Sin",
    "Tan",
    "Acos",
    "Asin",
    "Atan",
    "Cosh",
    "Sinh",
    "Softsign",
    "HardSwish",
    "Celu",
    "ThresholdedRelu",
    "Shrink",
    "IsInf",
    "BitwiseNot",
    "Swish",
}
_BINARY = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Equal",
    "And",
    "Or",
    "Xor",
    "Max",
    "Min",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Where",
    "Mod",
    "PRelu",
    "BitwiseAnd",
    "Sum",
    "Mean",
}


_LIST_FIELDS = {onnx.AttributeProto.FLOATS: "floats", onnx.AttributeProto.INTS: "ints",
                onnx.AttributeProto.STRINGS: "strings"}


def attribute_value(a: onnx.AttributeProto) -> Any:
    """onnx.helper.get_attribute_value, its number and string lists read by slice (upb's repeated fields
    have no iterator: a list() of one ends in a formatted IndexError, and the scan reads thousands)."""
    field = _LIST_FIELDS.get(a.type)
    if field is None or a.ref_attr_name:
        return onnx.helper.get_attribute_value(a)
    return getattr(a, field)[:]


def _attr(node: onnx.NodeProto, name: str, default=None):
    for a in node.attribute[:]:
        if a.name == name:
            return attribute_value(a)
    return default


def _known(value: np.ndarray | None) -> np.ndarray:
    """A value the caller checked is known (the checks are in the branch's condition)."""
    if value is None:
        raise ValueError("a value checked to be known is not")
    return value


def _bcast(shapes: list[Shape]) -> Shape | None:
    try:
        return list(np.broadcast_shapes(*[tuple(s) for s in shapes]))
    except ValueError:
        return None


class _Prop:
    def __init__(self, shapes: dict[str, Shape], values: dict[str, np.ndarray]) -> None:
        self.s = shapes
        self.v = values
        self._row: list[onnx.AttributeProto] = []  # the attributes of the node being run
        self._memo: dict[tuple, tuple[list[tuple[Shape | None, np.ndarray | None]], list[int | None]]] = {}
        self._tokens: dict[str, int] = {}  # a tensor's content number, given when a node first reads it
        self._contents: dict[tuple, int] = {}

    def _a(self, name: str, default: Any = None) -> Any:
        """An attribute of the node being run, from its table row (read once per graph, not per node run)."""
        for a in self._row:
            if a.name == name:
                return attribute_value(a)
        return default

    def _axes(self, ins: list[str], vals: list) -> tuple[Any, bool]:
        """(axes, unknown): the attribute's axes, else the axes input's value (unknown when not constant)."""
        axes = self._a("axes")
        if axes is None and len(ins) > 1 and ins[1]:
            if vals[1] is None:
                return None, True
            axes = [int(a) for a in np.ravel(vals[1])]
        return axes, False

    def value(self, name: str) -> np.ndarray | None:
        return self.v.get(name)

    def run(self, n: onnx.NodeProto, op: str, ins: list[str], outs: list[str],
            attrs: list[onnx.AttributeProto]) -> None:
        """Shapes and small values of n's outputs (op, ins, outs, attrs: its fields, read once by the
        caller; a tensor attribute is read from n)."""
        part = _PART_OF_OP.get(op)
        key = None
        if part is not None:
            # a model's layers repeat the same shape arithmetic on the same shapes and values: an op of the
            # table is a function of its attributes and its inputs' presence, shapes and small values
            key = (op, len(outs), tuple([a.SerializeToString() for a in attrs]) if attrs else (),
                   tuple([self._token(i) for i in ins]))
            hit = self._memo.get(key)
            if hit is not None:
                self._apply(outs, *hit)
                return
        self._row = attrs
        shp = [self.s.get(i) if i else None for i in ins]
        vals = [self.v.get(i) if i else None for i in ins]
        out: list[Shape | None] = [None] * len(outs)
        outv: list[np.ndarray | None] = [None] * len(outs)
        if part is None or not part(self, n, op, ins, shp, vals, out, outv):
            if shp and shp[0] is not None:
                _contrib_shapes(n, shp, out)
        stored = _stored(out, outv)
        tokens: list[int | None] = [None] * len(outs)  # the outputs' content numbers, shared by the hits
        if key is not None:
            self._memo[key] = (stored, tokens)
        self._apply(outs, stored, tokens)

    def _token(self, name: str) -> int:
        """A number per distinct (shape, small value) of a tensor read (-1: an absent optional input)."""
        got = self._tokens.get(name)
        if got is None:
            if not name:
                return -1
            got = self._tokens[name] = self._content(self.s.get(name), self.v.get(name))
        return got

    def _content(self, shape: Shape | None, value: np.ndarray | None) -> int:
        content = (None if shape is None else tuple(shape),
                   None if value is None else (value.dtype.str, value.shape, value.tobytes()))
        return self._contents.setdefault(content, len(self._contents))

    def _apply(self, outs: list[str], stored: list[tuple[Shape | None, np.ndarray | None]],
               tokens: list[int | None]) -> None:
        for k, (o, (dims, v)) in enumerate(zip(outs, stored, strict=False)):
            if not o:
                continue
            if dims is not None:
                self.s[o] = dims[:]  # a list per tensor: the caller gets the shapes to keep
            if v is not None:
                self.v[o] = v
            if dims is None or (v is None and o in self.v):  # onnx's shape may fill it: numbered when read
                self._tokens.pop(o, None)  # (read before it was made, in a graph out of order: read again)
                continue
            token = tokens[k]
            if token is None:
                token = tokens[k] = self._content(dims, v)
            self._tokens[o] = token

    def fill(self, outs: list[str], known: dict[str, Shape]) -> None:
        """Outputs this run left without a shape take onnx's, when it has one."""
        for o in outs:
            if o and o not in self.s and o in known:
                self.s[o] = known[o]
                self._tokens.pop(o, None)

    def _elementwise(self, n: onnx.NodeProto, op: str, ins: list[str], shp: list, vals: list, out: list,
                     outv: list) -> bool:
        """Unary, binary (values folded), Shape, Size and the Gathers. True when one applied."""
        if op in _UNARY and shp and shp[0] is not None:
            out[0] = shp[0]
            if op == "Cast" and vals[0] is not None:
                outv[0] = vals[0].astype(onnx.helper.tensor_dtype_to_np_dtype(self._a("to")))
            elif op == "Identity" and vals[0] is not None:
                outv[0] = vals[0]
            return True
        if op in _BINARY and ins and all(s is not None for s, i in zip(shp, ins, strict=False) if i):
            out[0] = _bcast([s for s, i in zip(shp, ins, strict=False) if i and s is not None])
            if all(v is not None for v, i in zip(vals, ins, strict=False) if i):
                operands = [v for v, i in zip(vals, ins, strict=False) if i and v is not None]
                outv[0] = _eval_binary(op, operands)
            return True
        if op == "Shape" and shp[0] is not None:
            start, end = self._a("start", 0), self._a("end", None)
            dims = shp[0][start:end] if end is not None else shp[0][start:]
            outv[0] = np.array(dims, dtype=np.int64)
            out[0] = [len(dims)]
            return True
        if op == "Size" and shp[0] is not None:
            outv[0] = np.array(int(np.prod(shp[0])), dtype=np.int64)
            out[0] = []
            return True
        if op == "Gather" and shp[0] is not None and shp[1] is not None:
            axis = self._a("axis", 0) % max(1, len(shp[0]))
            out[0] = shp[0][:axis] + shp[1] + shp[0][axis + 1 :]
            if vals[0] is not None and vals[1] is not None:
                outv[0] = np.take(vals[0], vals[1], axis=axis)
            return True
        if op == "GatherElements" and shp[1] is not None:
            out[0] = list(shp[1])
            return True
        if op == "GatherND" and shp[0] is not None and shp[1] is not None and shp[1]:
            b = self._a("batch_dims", 0)
            out[0] = list(shp[1][:-1]) + list(shp[0][b + shp[1][-1] :])
            return True
        return False

    def _reshaping(self, n: onnx.NodeProto, op: str, ins: list[str], shp: list, vals: list, out: list,
                   outv: list) -> bool:
        """Unsqueeze, Squeeze, Concat, Reshape, Flatten and Transpose. True when one applied."""
        if op in ("Unsqueeze", "Squeeze") and shp[0] is not None:
            axes, unknown = self._axes(ins, vals)
            if unknown:
                return True
            s = list(shp[0])
            if op == "Unsqueeze":
                r = len(s) + len(axes)
                for a in sorted(a % r for a in axes):
                    s.insert(a, 1)
            else:
                if axes is None:
                    s = [d for d in s if d != 1]
                else:
                    drop = {a % len(s) for a in axes}
                    s = [d for i, d in enumerate(s) if i not in drop]
            out[0] = s
            if vals[0] is not None:
                outv[0] = np.reshape(vals[0], s)
            return True
        if op == "Concat" and shp and all(x is not None for x in shp):
            shapes = [x for x in shp if x is not None]
            axis = self._a("axis", 0) % max(1, len(shapes[0]))
            s = list(shapes[0])
            s[axis] = sum(x[axis] for x in shapes)
            out[0] = s
            parts = [v for v in vals if v is not None]
            if len(parts) == len(vals):
                outv[0] = np.concatenate(parts, axis=axis)
            return True
        if op == "Reshape" and shp[0] is not None and vals[1] is not None:
            target = [int(d) for d in np.ravel(vals[1])]
            allowzero = self._a("allowzero", 0)
            s = [shp[0][i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
            if s.count(-1) == 1:
                known = math.prod(int(d) for d in s if d != -1)
                total = math.prod(int(d) for d in shp[0])
                s[s.index(-1)] = total // known if known else 0
            out[0] = s
            if vals[0] is not None:
                outv[0] = np.reshape(vals[0], s)
            return True
        if op == "Flatten" and shp[0] is not None:
            axis = self._a("axis", 1) % (len(shp[0]) + 1) if shp[0] else 0
            out[0] = [math.prod(int(d) for d in shp[0][:axis]), math.prod(int(d) for d in shp[0][axis:])]
            return True
        if op == "Transpose" and shp[0] is not None:
            perm = self._a("perm") or list(range(len(shp[0])))[::-1]
            out[0] = [shp[0][p] for p in perm]
            return True
        return False

    def _linear_and_reduce(self, n: onnx.NodeProto, op: str, ins: list[str], shp: list, vals: list, out: list,
                           outv: list) -> bool:
        """MatMul, FusedMatMul, Gemm, the reductions and Split. True when one applied."""
        if op in ("MatMul", "FusedMatMul") and shp[0] is not None and shp[1] is not None:
            a, b = list(shp[0]), list(shp[1])
            if op == "FusedMatMul":
                if self._a("transA", 0) and len(a) >= 2:
                    a[-2], a[-1] = a[-1], a[-2]
                if self._a("transB", 0) and len(b) >= 2:
                    b[-2], b[-1] = b[-1], b[-2]
            if len(a) >= 2 and len(b) >= 2:
                batch = _bcast([a[:-2], b[:-2]])
                out[0] = None if batch is None else batch + [a[-2], b[-1]]
            elif len(a) == 1 and len(b) >= 2:
                out[0] = b[:-2] + [b[-1]]
            elif len(b) == 1 and len(a) >= 2:
                out[0] = a[:-1]
            return True
        if op == "Gemm" and shp[0] is not None and shp[1] is not None:
            m = shp[0][1] if self._a("transA", 0) else shp[0][0]
            k = shp[1][0] if self._a("transB", 0) else shp[1][1]
            out[0] = [m, k]
            return True
        if (
            op in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2")
            and shp[0] is not None
        ):
            axes, unknown = self._axes(ins, vals)
            if unknown:
                return True
            r = len(shp[0])
            red = set(range(r)) if not axes else {a % r for a in axes}
            keep = self._a("keepdims", 1)
            out[0] = (
                [1 if i in red else d for i, d in enumerate(shp[0])]
                if keep
                else [d for i, d in enumerate(shp[0]) if i not in red]
            )
            return True
        if op == "Split" and shp[0] is not None:
            axis = self._a("axis", 0) % len(shp[0])
            split = self._a("split")
            if split is None and len(ins) > 1 and ins[1]:
                split = None if vals[1] is None else [int(x) for x in np.ravel(vals[1])]
            if split is None:
                k = len(n.output)
                split = [shp[0][axis] // k] * k
            for j, sz in enumerate(split[: len(n.output)]):
                s = list(shp[0])
                s[axis] = sz
                out[j] = s
            return True
        return False

    def _slices_and_makers(self, n: onnx.NodeProto, op: str, ins: list[str], shp: list, vals: list, out: list,
                           outv: list) -> bool:
        """Slice, ConstantOfShape, Expand, Range, Conv and BatchNormalization. True when one applied."""
        if op == "Slice" and shp[0] is not None and all(v is not None for v in vals[1:]):
            s = list(shp[0])
            starts, ends = np.ravel(_known(vals[1])), np.ravel(_known(vals[2]))
            axes = np.ravel(vals[3]) if len(vals) > 3 and vals[3] is not None else np.arange(len(starts))
            steps = np.ravel(vals[4]) if len(vals) > 4 and vals[4] is not None else np.ones(len(starts), int)
            sl = [slice(None)] * len(s)
            for st, en, ax, sp in zip(starts, ends, axes, steps, strict=False):
                ax = int(ax) % len(s)
                sl[ax] = slice(int(st), int(en), int(sp))
                s[ax] = len(range(*sl[ax].indices(s[ax])))
            out[0] = s
            if vals[0] is not None:
                outv[0] = vals[0][tuple(sl)]
            return True
        if (
            op in ("ConstantOfShape", "Expand", "Range") and all(
            v is not None for v in vals[1 if op == "Expand" else 0 :]
        )
        ):
            if op == "ConstantOfShape":
                dims = [int(d) for d in np.ravel(_known(vals[0]))]
                out[0] = dims
                t = _attr(n, "value")  # the copy's (stripped) tensor, as before
                if int(np.prod(dims)) <= _MAX_VALUE:
                    fill = onnx.numpy_helper.to_array(t) if t is not None else np.zeros(1, np.float32)
                    outv[0] = np.full(dims, np.ravel(fill)[0], dtype=fill.dtype)
            elif op == "Expand" and shp[0] is not None:
                out[0] = _bcast([shp[0], [int(d) for d in np.ravel(_known(vals[1]))]])
                if vals[0] is not None and out[0] is not None and int(np.prod(out[0])) <= _MAX_VALUE:
                    outv[0] = np.broadcast_to(vals[0], out[0]).copy()
            elif op == "Range":
                start, limit, delta = (np.ravel(_known(v))[0] for v in vals[:3])
                rng = np.arange(start, limit, delta)
                out[0] = [len(rng)]
                if len(rng) <= _MAX_VALUE:
                    outv[0] = rng
            return True
        if op in ("Conv", "FusedConv") and shp[0] is not None and shp[1] is not None:
            out[0] = _conv_shape(n, shp[0], shp[1])
            return True
        if op == "BatchNormalization" and shp[0] is not None:
            out[0] = shp[0]
            return True
        return False



def _stored(out: list, outv: list) -> list[tuple[Shape | None, np.ndarray | None]]:
    """Per output: the dims to store (non-negative ints, else None) and the value to keep (a small integer
    or boolean one, else None)."""
    stored: list[tuple[Shape | None, np.ndarray | None]] = []
    for s, v in zip(out, outv, strict=True):
        dims = None
        if s is not None:
            try:
                dims = [int(d) for d in s]
            except (TypeError, ValueError):
                dims = None
            if dims is not None and min(dims, default=0) < 0:
                dims = None
        keep = v is not None and v.size <= _MAX_VALUE and v.dtype.kind in "iub"
        stored.append((dims, v if keep else None))
    return stored


# the one _Prop method that models each op (the ops of the four are disjoint: a node goes straight to its own)
_PART_OF_OP = {
    **dict.fromkeys(_UNARY | _BINARY | {"Shape", "Size", "Gather", "GatherElements", "GatherND"},
                    _Prop._elementwise),
    **dict.fromkeys(("Unsqueeze", "Squeeze", "Concat", "Reshape", "Flatten", "Transpose"), _Prop._reshaping),
    **dict.fromkeys(("MatMul", "FusedMatMul", "Gemm", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
                     "ReduceProd", "ReduceL2", "Split"), _Prop._linear_and_reduce),
    **dict.fromkeys(("Slice", "ConstantOfShape", "Expand", "Range", "Conv", "FusedConv",
                     "BatchNormalization"), _Prop._slices_and_makers),
}


def _contrib_shapes(n: onnx.NodeProto, shp: list[Shape | None], out: list[Shape | None]) -> None:
    """Output shapes of onnxruntime's fused ops (com.microsoft) a fused model holds, by their definitions."""
    op, x = n.op_type, shp[0]
    assert x is not None
    heads = _attr(n, "num_heads", 0)
    if op in ("SkipLayerNormalization", "SkipSimplifiedLayerNormalization"):
        out[0] = list(x)
        if len(out) > 3:
            out[3] = list(x)  # input + skip (+ bias)
    elif op == "EmbedLayerNormalization" and len(shp) > 2 and shp[2] is not None:
        out[0] = list(x) + [shp[2][-1]]
        if len(out) > 1:
            out[1] = [x[0]]
    elif op in ("RotaryEmbedding", "BiasSplitGelu", "BiasAdd"):
        out[0] = list(x)
    elif op == "Attention" and n.domain == "com.microsoft" and len(shp) > 1 and shp[1] is not None:
        sizes = _attr(n, "qkv_hidden_sizes") or [shp[1][1] // 3] * 3
        out[0] = [x[0], x[1], int(sizes[2])]
        past = shp[4] if len(shp) > 4 else None
        if len(out) > 1 and past is not None and heads:
            out[1] = [2, x[0], heads, past[3] + x[1], int(sizes[0]) // heads]
    elif op == "MultiHeadAttention" and len(x) == 3 and heads:
        k, v = (shp[i] if len(shp) > i else None for i in (1, 2))
        if v is None:
            return
        hv = v[-1] if len(v) == 4 else v[2] // heads
        out[0] = [x[0], x[1], heads * hv]
        past = shp[6] if len(shp) > 6 else None
        if len(out) > 1 and k is not None and len(k) == 3:
            t = k[1] + (past[2] if past is not None else 0)
            out[1] = [x[0], heads, t, x[2] // heads]
            if len(out) > 2:
                out[2] = [x[0], heads, t, hv]
    elif op == "GroupQueryAttention" and len(x) == 3 and heads:
        kv_heads = _attr(n, "kv_num_heads", heads)
        packed = len(n.input) < 2 or not n.input[1]  # no key input: Q|K|V packed in the query
        h = x[2] // (heads + 2 * kv_heads) if packed else x[2] // heads
        out[0] = [x[0], x[1], heads * h]
        past = shp[3] if len(shp) > 3 else None
        if len(out) > 2:
            t = (past[2] if past is not None else 0) + x[1]
            out[1] = out[2] = [x[0], kv_heads, t, h]


def _conv_shape(n, x: Shape, w: Shape) -> Shape | None:
    if _attr(n, "auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        return None
    k = len(x) - 2
    kernel = _attr(n, "kernel_shape") or w[2:]
    strides = _attr(n, "strides") or [1] * k
    dil = _attr(n, "dilations") or [1] * k
    pads = _attr(n, "pads") or [0] * (2 * k)
    sp = [
        (x[2 + i] + pads[i] + pads[i + k] - dil[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(k)
    ]
    return [x[0], w[0]] + sp


def _eval_binary(op: str, vs: list[np.ndarray]) -> np.ndarray | None:
    a, b = vs[0], vs[-1]
    try:
        if op == "Add":
            return a + b
        if op == "Sub":
            return a - b
        if op == "Mul":
            return a * b
        if op == "Div":
            return a // b if a.dtype.kind in "iu" else a / b
        if op == "Equal":
            return np.equal(a, b)
        if op == "Where" and len(vs) == 3:
            return np.where(vs[0], vs[1], vs[2])
        if op == "Max":
            return np.maximum(a, b)
        if op == "Min":
            return np.minimum(a, b)
    except Exception:  # noqa: BLE001 - unknown values stay unknown
        return None
    return None


def propagate(
    graph: onnx.GraphProto,
    input_shapes: dict[str, Shape],
    const_values: dict[str, np.ndarray],
    known: dict[str, Shape],
    table: NodeTable | None = None,
) -> dict[str, Shape]:
    """Concrete shapes of the graph's tensors; ``known`` (onnx inference results) fills the gaps. table:
    the NodeTable of the graph (or of the one it is a copy of) when the caller has it."""
    shapes: dict[str, Shape] = dict(input_shapes)
    values: dict[str, np.ndarray] = {}
    for name, v in const_values.items():
        shapes[name] = list(v.shape)
        if v.size <= _MAX_VALUE and v.dtype.kind in "iub":
            values[name] = v
    prop = _Prop(shapes, values)
    nodes = graph.node[:]
    t = table if table is not None and len(table) == len(nodes) else NodeTable(nodes)
    for n, op, ins, outs, attrs in zip(nodes, t.op_types, t.inputs, t.outputs, t.attributes, strict=True):
        if op == "Constant":
            continue
        try:
            prop.run(n, op, ins, outs, attrs)
        except Exception:  # noqa: BLE001 - an op we model wrongly must not break the scan
            pass
        prop.fill(outs, known)
    return shapes
