"""One shape inference per model, on a weightless copy, shared by the loader and the scan's index.

onnx's inference serialises the model it is given: on a 652 MB GPT-2 that was ByteSize + SerializeToString +
infer + ParseFromString over every weight, twice (loader and scan). The copy inferred here carries each
weight's name, dims and element type only (small integer constants keep their values: shapes are computed
from them), and its top-level input dims follow the one dims policy (fuseview.dims): every non-fixed dim is
the symbol of its key, so `?`, `-1`, `0`, an empty name or `unk__N` on two axes are two unknowns, not one.
Concrete shapes for chosen dims are a substitution of those symbols (the scan's GraphIndex does it).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

import onnx

from fuseview.dims import declared_dim, dim_key
from fuseview.graph.table import NodeTable

# Integer constants up to this many elements keep their values in the copy (shape arithmetic reads them).
KEEP_INT_VALUES = 4096
# Longest 1-D integer tensor whose values onnx's data propagation may compute (shapes are far shorter).
MAX_PROP_LENGTH = 4096
_INT_TYPES = {
    onnx.TensorProto.INT64, onnx.TensorProto.INT32, onnx.TensorProto.INT16, onnx.TensorProto.INT8,
    onnx.TensorProto.UINT64, onnx.TensorProto.UINT32, onnx.TensorProto.UINT16, onnx.TensorProto.UINT8,
}
_CACHE_SIZE = 4

Dims = list[int | str | None]


@dataclass
class Inference:
    """The inferred weightless copy of a model and what it says about the main graph's tensors."""

    model: onnx.ModelProto  # the copy, value_info filled where onnx could infer
    # name -> (dims, elem type); read-only: values of one type share one entry
    shapes: dict[str, tuple[Dims | None, int]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _keeps_values(t: onnx.TensorProto) -> bool:
    """Whether the weightless copy keeps this tensor whole (a small integer constant held in the proto)."""
    if t.data_type not in _INT_TYPES or t.data_location == onnx.TensorProto.EXTERNAL:
        return False
    count = 1
    for d in t.dims[:]:
        count *= d
    return count <= KEEP_INT_VALUES


def _weightless_tensor(t: onnx.TensorProto) -> onnx.TensorProto:
    out = onnx.TensorProto()
    if _keeps_values(t):
        out.CopyFrom(t)
        return out
    out.name = t.name
    out.dims.extend(t.dims)
    out.data_type = t.data_type
    return out


def _strip_graph(g: onnx.GraphProto) -> None:
    """Strip the weights of a graph in place: initializers, Constant values, bodies of If/Loop/Scan."""
    inits = [_weightless_tensor(t) for t in g.initializer]
    del g.initializer[:]
    g.initializer.extend(inits)
    _strip_nodes(g.node)


def _strip_nodes(nodes) -> None:  # noqa: ANN001 - a repeated NodeProto field
    for n in nodes:
        for a in n.attribute[:]:
            if a.type == onnx.AttributeProto.TENSOR:
                if not _keeps_values(a.t):  # a shape constant stays (copied onto itself: 2 copies)
                    a.t.CopyFrom(_weightless_tensor(a.t))
            elif a.type == onnx.AttributeProto.GRAPH:
                _strip_graph(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    _strip_graph(sub)


def _strip_by_table(nodes, table: NodeTable) -> None:  # noqa: ANN001 - a repeated NodeProto field
    """_strip_nodes of a copy of the table's nodes: the attribute kinds the load check read pick the few
    attributes to look at (not every node's), and whether a tensor stays whole is read from the source."""
    tensor, graph, graphs = onnx.AttributeProto.TENSOR, onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS
    for i, row in enumerate(table.attribute_rows()):
        for j, (_name, kind, _subs) in enumerate(row):
            if kind == tensor:
                t = table.attributes[i][j].t
                if not _keeps_values(t):
                    nodes[i].attribute[j].t.CopyFrom(_weightless_tensor(t))
            elif kind == graph:
                _strip_graph(nodes[i].attribute[j].g)
            elif kind == graphs:
                for sub in nodes[i].attribute[j].graphs:
                    _strip_graph(sub)


def _stub(typed: onnx.GraphProto) -> onnx.GraphProto:
    out = onnx.GraphProto()
    out.name = typed.name
    out.input.extend(typed.input)
    out.output.extend(typed.output)
    return out


def _stub_bodies(nodes, typed: onnx.GraphProto) -> None:  # noqa: ANN001 - a repeated NodeProto field
    """Replace each body of `nodes` by its inputs and outputs as `typed` (the same graph, inferred before)
    has them: onnx types an If/Loop/Scan from its bodies' outputs, and the nodes inside were inferred then."""
    if len(nodes) != len(typed.node):
        return
    for n, t in zip(nodes, typed.node, strict=True):
        inferred = {a.name: a for a in t.attribute}
        for a in n.attribute:
            ta = inferred.get(a.name)
            if ta is None or ta.type != a.type:
                continue
            if a.type == onnx.AttributeProto.GRAPH:
                a.g.CopyFrom(_stub(ta.g))
            elif a.type == onnx.AttributeProto.GRAPHS and len(a.graphs) == len(ta.graphs):
                for sub, tsub in zip(a.graphs, ta.graphs, strict=True):
                    sub.CopyFrom(_stub(tsub))


def weightless_copy(
    model: onnx.ModelProto, typed: onnx.GraphProto | None = None, table: NodeTable | None = None
) -> onnx.ModelProto:
    """The model without its weights' values (dims and types kept), its input dims named by their keys.

    typed: the main graph as an earlier inference left it (an inner graph of an inferred model): its bodies
    become stubs with the outputs inferred then, so nested bodies are not inferred again at each level.
    table: the NodeTable of the model's main graph, when the caller has it."""
    out = onnx.ModelProto()
    out.ir_version = model.ir_version
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    g = out.graph
    src = model.graph
    g.name = src.name
    g.node.extend(src.node)  # nodes are small; Constant values are stripped below
    if typed is not None:
        _stub_bodies(g.node, typed)
    g.input.extend(src.input)
    g.output.extend(src.output)
    g.value_info.extend(src.value_info)
    g.initializer.extend(_weightless_tensor(t) for t in src.initializer)
    if table is not None and len(table) == len(g.node):
        _strip_by_table(g.node, table)
    else:
        _strip_nodes(g.node)
    inits = {t.name for t in src.initializer}
    for vi in g.input:
        tt = vi.type.tensor_type
        if vi.name in inits or not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            dim = declared_dim(d)
            if not isinstance(dim, int):
                d.dim_param = dim_key(vi.name, axis, dim)  # also clears a -1 or 0 dim_value
    return out


def _declares_long_vector(infos: list[onnx.ValueInfoProto]) -> bool:
    for vi in infos:
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
            continue
        dims = tt.shape.dim
        if len(dims) <= 1 and any(d.HasField("dim_value") and d.dim_value > MAX_PROP_LENGTH for d in dims):
            return True
    return False


def infer_weightless(
    model: onnx.ModelProto, typed: onnx.GraphProto | None = None, table: NodeTable | None = None
) -> Inference:
    """Infer shapes on the model's weightless copy (no cache; see shared_inference; typed, table: see
    weightless_copy)."""
    copy = weightless_copy(model, typed, table)
    g = copy.graph
    notes: list[str] = []
    # onnx's data propagation materialises the values of declared 1-D tensors, integer or float: a 200-byte
    # model declaring two [2^24] inputs cost 3.6 GiB. Past a shape-like length it has nothing to give.
    data_prop = not _declares_long_vector(list(g.input) + list(g.value_info) + list(g.output))
    if not data_prop:
        notes.append(
            f"data propagation skipped: a 1-D tensor is declared longer than {MAX_PROP_LENGTH}"
        )
    try:
        inferred = onnx.shape_inference.infer_shapes(copy, check_type=False, strict_mode=False,
                                                     data_prop=data_prop)
    except Exception as exc:  # noqa: BLE001 - any failure here only costs us shapes
        if typed is not None:  # the stubs are new to onnx: the whole inner graph, as before them
            return infer_weightless(model, table=table)
        notes.append(f"shape inference failed, shapes shown where the file states them: {exc}")
        inferred = copy
    ig = inferred.graph
    shapes = _tensor_types(ig.value_info[:] + ig.input[:] + ig.output[:])
    for t in ig.initializer:
        shapes.setdefault(t.name, (t.dims[:], t.data_type))
    return Inference(inferred, shapes, notes)


def _tensor_types(infos: list[onnx.ValueInfoProto]) -> dict[str, tuple[Dims | None, int]]:
    """(dims, elem type) of each tensor-typed value: each distinct type read from its fields once (a
    48-layer GPT-2 has 10,000 values of 1,300 types; a type's bytes are a cheaper key than its fields).
    Values of one type share one entry: its readers copy (substitute) and never change it."""
    shapes: dict[str, tuple[Dims | None, int]] = {}
    read: dict[bytes, tuple[Dims | None, int] | None] = {}
    for vi in infos:
        ty = vi.type
        key = ty.SerializeToString()
        if key in read:
            got = read[key]
        else:
            got = read[key] = _tensor_type(ty)
        if got is not None:
            shapes[vi.name] = got
    return shapes


def _tensor_type(ty: onnx.TypeProto) -> tuple[Dims | None, int] | None:
    if not ty.HasField("tensor_type"):
        return None
    tt = ty.tensor_type
    if not tt.HasField("shape"):
        return (None, tt.elem_type)
    return ([d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim[:]],
            tt.elem_type)


_cache: list[tuple[onnx.ModelProto, tuple, Inference]] = []


def _fingerprint(model: onnx.ModelProto) -> tuple:
    g = model.graph
    first = tuple(g.node[0].output) if g.node else ()
    last = tuple(g.node[-1].output) if g.node else ()
    opsets = tuple(o.version for o in model.opset_import)
    return (len(g.node), len(g.initializer), len(g.input), first, last, opsets)


def shared_inference(
    model: onnx.ModelProto, typed: onnx.GraphProto | None = None, table: NodeTable | None = None
) -> Inference:
    """The inference of this model object, computed once: the loader and the scan of one model share it.

    Keyed by identity (protobuf messages take no weak references; the last few models are kept), checked
    against a fingerprint of the graph so a model changed in place is inferred again.
    """
    fp = _fingerprint(model)
    for i, (m, f, inf) in enumerate(_cache):
        if m is model and f == fp:
            _cache.insert(0, _cache.pop(i))
            return inf
    inf = infer_weightless(model, typed, table)
    _cache.insert(0, (model, fp, inf))
    del _cache[_CACHE_SIZE:]
    return inf


def substitute(dims: Dims | None, values: dict[str, int]) -> Dims | None:
    """Dims with each symbol (or a sum/difference/product of symbols, as dynamo writes) set from values."""
    if dims is None:
        return None
    out: Dims = []
    for d in dims:
        if isinstance(d, str):
            v = values.get(d)
            out.append(v if v is not None else _evaluate(d, values))
        else:
            out.append(d)
    return out


def _evaluate(expr: str, values: dict[str, int]) -> int | str:
    """'past_sequence + sequence' with both known -> their sum; anything else stays the symbol."""
    if not any(op in expr for op in "+-*"):
        return expr
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return expr

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name) and node.id in values:
            return values[node.id]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            return a * b if isinstance(node.op, ast.Mult) else a // b
        raise ValueError(expr)

    try:
        return ev(tree)
    except (ValueError, ZeroDivisionError):
        return expr
