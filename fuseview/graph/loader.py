"""Load an ONNX file into a ModelDocument without reading its weights."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING

import onnx
from google.protobuf.message import DecodeError

from fuseview.errors import FuseviewError
from fuseview.graph.cycles import check_acyclic
from fuseview.graph.external_data import check_external_data
from fuseview.graph.inference import shared_inference
from fuseview.graph.lazy_weights import LAZY_FILE_BYTES, read_lazily, record_folder
from fuseview.graph.shapes import attribute_value
from fuseview.graph.table import NodeTable
from fuseview.graph.wire import decode_error_text, pytorch_file_text
from fuseview.progress import Progress
from fuseview.safe_io import check_regular, read_bytes
from fuseview.textsafe import note_model_names, noting_model_names

if TYPE_CHECKING:  # the document side (dataclasses, dim naming) is imported when a document is built:
    # reading and checking a file (the scan's way) needs none of it
    from fuseview.graph.document import Dim, Edge, GraphDocument, ModelDocument, Node, Tensor


def load_document(
    path: str | os.PathLike, progress: Progress | None = None, inner_dims: bool = True
) -> ModelDocument:
    """Read an ONNX file (weights left on disk) and build its document; FuseviewError on bad input.

    inner_dims=False: the unknown dims of inner tensors stay unnamed unless a graph output needs them
    (what `fuseview info` shows: its inputs and outputs)."""
    report = progress or (lambda _msg, _frac: None)
    report("reading", 0.0)
    p = Path(path)
    model = read_model(p, check=False)  # document_from_model checks the structure as it builds
    return document_from_model(model, p, progress=report, inner_dims=inner_dims)


def read_model(path: str | os.PathLike, check: bool = True) -> onnx.ModelProto:
    """Parse an ONNX file without its external weights, checking that they exist and (with check) the
    graph's structure (see check_structure); FuseviewError if bad."""
    return read_model_table(path, check)[0]


def read_model_table(path: str | os.PathLike, check: bool = True) -> tuple[onnx.ModelProto, NodeTable]:
    """read_model, and the table of its main graph's nodes its checks read (the scan's index reads it too)."""
    p = Path(path)
    size = check_regular(p, "model", "ONNX model").st_size
    if size == 0:
        raise FuseviewError(f"{p}: file is empty")
    with open(p, "rb") as f:  # a PyTorch checkpoint is told by its first bytes, before any parsing
        torch_file = pytorch_file_text(str(p), f.read(8), by_name=False)
    if torch_file is not None:
        raise FuseviewError(torch_file)
    # a big file's large weights stay on disk (lazy_weights); a file it cannot walk is parsed whole below
    lazy = read_lazily(p) if size >= LAZY_FILE_BYTES else None
    data = b""  # what was parsed whole, for the truncated-file message
    try:
        model = lazy
        if model is None:
            data = read_bytes(p, "model", "ONNX model")
            model = onnx.load_model_from_string(data)
    except DecodeError as exc:
        raise FuseviewError(decode_error_text(data, str(p), str(exc))) from None
    except (OSError, ValueError) as exc:
        raise FuseviewError(f"{p}: cannot read ({exc})") from None
    table = NodeTable.of(model.graph)
    check_external_data(model, p.parent, p, table)
    if check:
        check_structure(model, str(p), table)
    if noting_model_names():  # the command line's streams print them (the window draws them as Qt does)
        note_model_names(_names(model.graph, table))
    return model, table


def read_model_anywhere(path: str | os.PathLike) -> onnx.ModelProto:
    """read_model, with the folder of the weights in side files recorded in each: a proto sessions and
    writers use from any folder (those it leaves in a big model's file carry theirs already)."""
    model = read_model(path)
    record_folder(model, Path(path).parent)
    return model


def _names(g: onnx.GraphProto, table: NodeTable) -> Iterable[str]:
    """Every name of the main graph a command may print: nodes, the tensors they make, the graph's inputs
    and initializers (each tensor once: a node's inputs are those)."""
    for name, outputs in zip(table.names, table.outputs, strict=True):
        yield name
        yield from outputs
    for vi in g.input:
        yield vi.name
    for t in g.initializer:
        yield t.name


def check_structure(model: onnx.ModelProto, where: str = "model", table: NodeTable | None = None) -> None:
    """Refuse a model every command would trip on: no graph or nodes, a cycle, a dangling input, two
    writers of one tensor, an op domain without an opset import, names that are not UTF-8 (FuseviewError).

    The one structural check shared by every command (info, render, open, scan, fuse, profile). table: the
    main graph's NodeTable when the caller has it."""
    try:
        if model.ir_version == 0 and not model.graph.node and not model.opset_import:
            raise FuseviewError(f"{where}: not an ONNX model (no IR version, opsets or graph)")
        if not model.graph.node:
            raise FuseviewError(f"{where}: the graph has no nodes")
        g = model.graph
        table = table or NodeTable.of(g)
        _check_names_and_dims(g, where, table)
        opsets = {_norm_domain(o.domain or "") for o in model.opset_import}
        known = opsets | {_norm_domain(f.domain) for f in model.functions}
        inputs = [vi.name for vi in g.input]
        _check_graph(table, inputs, [vi.name for vi in g.output], {t.name for t in g.initializer},
                     where, known, frozenset())
        for f in model.functions:
            local = known | {_norm_domain(o.domain) for o in f.opset_import}
            _check_graph(NodeTable.of(f), list(f.input), list(f.output), set(), where, local, frozenset())
    except UnicodeDecodeError as exc:
        raise FuseviewError(f"{where}: a name in the model is not valid UTF-8 ({exc.reason})") from None


def _check_names_and_dims(g: onnx.GraphProto, where: str, table: NodeTable | None = None) -> None:
    # protobuf hands back bytes for a string field that is not UTF-8; every later step expects str
    t = table or NodeTable.of(g)
    if not _plain_nodes(t):  # something to refuse or a body to walk: node by node, the first one said
        _check_node_names(t, where)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if not isinstance(vi.name, str):
            raise FuseviewError(f"{where}: a tensor name is not valid UTF-8 ({vi.name[:40]!r})")
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape"):
            for d in tt.shape.dim[:]:
                # -1 is how some exporters (Paddle) write a dynamic dim; nothing writes -5
                if d.HasField("dim_value") and d.dim_value < -1:
                    raise FuseviewError(f"{where}: tensor {vi.name!r} has a negative dim ({d.dim_value})")
                if d.HasField("dim_param") and not isinstance(d.dim_param, str):
                    raise FuseviewError(f"{where}: tensor {vi.name!r} has a dim name that is not valid UTF-8")
    for t in g.initializer:
        if not isinstance(t.name, str):
            raise FuseviewError(f"{where}: an initializer name is not valid UTF-8 ({t.name[:40]!r})")
        _check_tensor_data(t, where)


def _plain_nodes(t: NodeTable) -> bool:
    """Every name, op type, domain, input and output a str (a join refuses the bytes protobuf gives for one
    that is not UTF-8, at C speed), and every attribute named by a str, typed and holding no graph."""
    try:
        for column in (t.names, t.op_types, t.domains):
            "".join(column)
        "".join(chain.from_iterable(t.inputs))
        "".join(chain.from_iterable(t.outputs))
    except TypeError:
        return False
    undefined = onnx.AttributeProto.UNDEFINED
    return all(type(name) is str and kind != undefined and not subs
               for attrs in t.attribute_rows() for name, kind, subs in attrs)


def _check_node_names(t: NodeTable, where: str) -> None:
    rows = zip(t.names, t.op_types, t.domains, t.inputs, t.outputs, t.attribute_rows(), strict=True)
    for i, (name, op_type, domain, ins, outs, attrs) in enumerate(rows):
        for text in (name, op_type, domain, *ins, *outs):
            if not isinstance(text, str):
                raise FuseviewError(f"{where}: node {i} has a name that is not valid UTF-8 ({text[:40]!r})")
        for attr_name, kind, subs in attrs:
            if not isinstance(attr_name, str):
                raise FuseviewError(f"{where}: node {i} has an attribute name that is not valid UTF-8")
            if kind == onnx.AttributeProto.UNDEFINED:
                raise FuseviewError(f"{where}: attribute {attr_name!r} of node {i} ({op_type}) has no type")
            for sub in subs:
                _check_names_and_dims(sub, where)


# The typed field that holds each element type's values when raw_data is not used (onnx.proto).
_TYPED_FIELD: dict[int, str] = {
    onnx.TensorProto.FLOAT: "float_data", onnx.TensorProto.DOUBLE: "double_data",
    onnx.TensorProto.INT64: "int64_data", onnx.TensorProto.UINT64: "uint64_data",
    onnx.TensorProto.INT32: "int32_data", onnx.TensorProto.INT16: "int32_data",
    onnx.TensorProto.INT8: "int32_data", onnx.TensorProto.UINT8: "int32_data",
    onnx.TensorProto.UINT16: "int32_data", onnx.TensorProto.BOOL: "int32_data",
    onnx.TensorProto.FLOAT16: "int32_data", onnx.TensorProto.BFLOAT16: "int32_data",
}


def _check_tensor_data(t: onnx.TensorProto, where: str) -> None:
    """Refuse a weight whose stored data cannot be its declared type and shape (every reader would fail)."""
    dims = t.dims[:]
    if any(d < 0 for d in dims):
        raise FuseviewError(f"{where}: initializer {t.name!r} has a negative dim")
    data_type = t.data_type
    if data_type not in _DATA_TYPES or data_type == onnx.TensorProto.UNDEFINED:
        raise FuseviewError(f"{where}: initializer {t.name!r} has no valid element type ({data_type})")
    if t.data_location == onnx.TensorProto.EXTERNAL or data_type == onnx.TensorProto.STRING:
        return
    count = 1
    for d in dims:
        count *= d
    if t.HasField("raw_data"):
        itemsize = _itemsize(data_type)
        if itemsize is None:
            return
        if itemsize and t.data_type not in _SUB_BYTE and len(t.raw_data) != count * itemsize:
            raise FuseviewError(
                f"{where}: initializer {t.name!r} holds {len(t.raw_data)} bytes, but "
                f"{dtype_name(t.data_type)}{list(t.dims)} needs {count * itemsize}"
            )
        return
    field = _TYPED_FIELD.get(t.data_type)
    if field is not None:
        n = len(getattr(t, field))
        if n != count:
            raise FuseviewError(
                f"{where}: initializer {t.name!r} holds {n} values, but shape {list(t.dims)} needs {count}"
            )


_DATA_TYPES = frozenset(onnx.TensorProto.DataType.values())  # the enum's list is made anew per call


@functools.lru_cache(maxsize=64)
def _itemsize(data_type: int) -> int | None:
    """Bytes per element of an element type (None: one numpy has no dtype for)."""
    try:
        return onnx.helper.tensor_dtype_to_np_dtype(data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None


_SUB_BYTE = {getattr(onnx.TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
             if hasattr(onnx.TensorProto, n)}


def _check_graph(
    table: NodeTable,
    inputs: list[str],
    outputs: list[str],
    init_names: set[str],
    where: str,
    known_domains: set[str],
    outer: frozenset[str],
    deep: bool = True,
) -> tuple[list[str], dict[str, int], dict[str, list[int]]]:
    """Node names, producer and consumers of one graph (and, deep, its subgraphs checked too) after
    refusing what makes it no graph at all. Consumers only when not deep (the document's graphs): the
    deep check of a file reads none."""
    names = table.unique_names()
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = {}
    reads = table.inputs
    for i, (domain, outs, ins) in enumerate(zip(table.domains, table.outputs, reads, strict=True)):
        dom = _norm_domain(domain)
        if dom not in known_domains:
            raise FuseviewError(
                f"{where}: node {names[i]!r} ({table.op_types[i]}) uses op domain {dom or 'ai.onnx'!r}, "
                "which the model declares no opset for"
            )
        for o in outs:
            if o:
                if o in producer:
                    raise FuseviewError(f"{where}: tensor {o!r} is produced by two nodes")
                producer[o] = i
        if not deep:
            for inp in ins:
                if inp:
                    consumers.setdefault(inp, []).append(i)
    defined = set(producer) | set(inputs) | init_names
    in_order = True  # every input made by an earlier node: no cycle, the sort below is not needed
    for i, ins in enumerate(reads):
        for inp in ins:
            if inp and inp not in defined and inp not in outer:
                raise FuseviewError(
                    f"{where}: node {names[i]!r} reads tensor {inp!r}, "
                    "which nothing produces (dangling input)"
                )
            if in_order and producer.get(inp, -1) >= i:
                in_order = False
    for o in outputs:
        if o not in defined and o not in outer:
            raise FuseviewError(f"{where}: graph output {o!r} is produced by no node")
    if not in_order:
        check_acyclic(table.nodes, producer, names, where)
    inner = frozenset(defined | outer)
    for attrs in table.attribute_rows() if deep else ():
        for _name, _kind, subs in attrs:
            for sub in subs:
                _check_graph(NodeTable.of(sub), [vi.name for vi in sub.input], [vi.name for vi in sub.output],
                             {t.name for t in sub.initializer}, where, known_domains, inner)
    return names, producer, consumers


def document_from_model(
    model: onnx.ModelProto, path: Path | None = None, progress: Progress | None = None,
    types_from: GraphDocument | None = None, inner_dims: bool = True,
) -> ModelDocument:
    """Build the document of an in-memory model (shape inference where it succeeds).

    types_from: the graph a fused model was made from; its tensors' types fill those of the same name.
    inner_dims: as load_document's.
    """
    report = progress or (lambda _msg, _frac: None)
    where = str(path) if path else "model"
    if model.ir_version == 0 and not model.graph.node and not model.opset_import:
        raise FuseviewError(f"{where}: not an ONNX model (no IR version, opsets or graph)")
    if not model.graph.node:
        raise FuseviewError(f"{where}: the graph has no nodes")
    try:
        _check_names_and_dims(model.graph, where)  # the rest of check_structure runs in _assemble
    except UnicodeDecodeError as exc:
        raise FuseviewError(f"{where}: a name in the model is not valid UTF-8 ({exc.reason})") from None
    warnings: list[str] = []
    report("inferring shapes", 0.2)
    inference = shared_inference(model)  # weightless, shared with the scan of this model
    warnings.extend(inference.notes)
    opsets = {o.domain or "": o.version for o in model.opset_import}
    known_domains = {_norm_domain(d) for d in opsets} | {_norm_domain(f.domain) for f in model.functions}
    report("building graph", 0.5)
    # inputs as the file declares them (the inferred copy names each unknown dim by its --dim key)
    declared = {vi.name: _type_info(vi.type) for vi in model.graph.input}
    graph = _build_graph(inference.model.graph, where, known_domains, outer=frozenset(), declared=declared,
                         types_from=types_from, inner_dims=inner_dims)
    functions = {}
    for f in model.functions:
        functions[f"{f.domain}:{f.name}"] = _build_function(f, where, known_domains)
    report("done", 1.0)
    from fuseview.graph.document import ModelDocument

    doc = ModelDocument(
        path=path,
        model=model,
        graph=graph,
        functions=functions,
        opsets=opsets,
        ir_version=model.ir_version,
        producer=" ".join(s for s in (model.producer_name, model.producer_version) if s),
        warnings=warnings,
    )
    return doc


@functools.lru_cache(maxsize=256)  # asked once per tensor: numpy's dtype naming was 12 % of a load
def dtype_name(elem_type: int) -> str:
    """numpy-style name of an ONNX element type: float32, int64, bfloat16, ..."""
    try:
        return str(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError, TypeError):
        pass
    try:
        return onnx.TensorProto.DataType.Name(elem_type).lower()
    except ValueError:  # a number onnx does not define (a hostile or future model)
        return f"undefined type {elem_type}"


def _norm_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


def _type_info(t: onnx.TypeProto) -> tuple[str | None, tuple[Dim, ...] | None]:
    which = t.WhichOneof("value")
    if which != "tensor_type" and which != "sparse_tensor_type":
        return (which or None), None
    tt = t.tensor_type if which == "tensor_type" else t.sparse_tensor_type
    dtype = dtype_name(tt.elem_type) if tt.elem_type else None
    if not tt.HasField("shape"):
        return dtype, None
    dims: list[Dim] = []
    for d in tt.shape.dim[:]:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dtype, tuple(dims)


def _attribute_value(attr: onnx.AttributeProto) -> object:
    if attr.type == onnx.AttributeProto.TENSOR:
        t = attr.t
        dtype = dtype_name(t.data_type)
        return f"tensor {dtype}[{', '.join(str(d) for d in t.dims[:])}]"
    if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
        return "<graph>"
    value = attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", errors="replace") for v in value]
    return value


def _build_graph(
    g: onnx.GraphProto, where: str, known_domains: set[str], outer: frozenset[str],
    declared: dict[str, tuple[str | None, tuple[Dim, ...] | None]] | None = None,
    types_from: GraphDocument | None = None, inner_dims: bool = True,
) -> GraphDocument:
    from fuseview.graph.dim_names import borrow_types, carry_dtypes, name_dims, unknown_shape

    types: dict[str, tuple[str | None, tuple[Dim, ...] | None]] = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        types[vi.name] = _type_info(vi.type)
    types.update(declared or {})
    init_names = {t.name for t in g.initializer}
    for t in g.initializer:
        types[t.name] = (dtype_name(t.data_type), tuple(int(d) for d in t.dims[:]))
    if types_from is not None:
        borrow_types(g, types, {t.name: (t.dtype, t.shape) for t in types_from.tensors.values()})
    outputs = [vi.name for vi in g.output]
    try:
        # name_dims changes only tensors whose shape is unknown: when no graph output is, skipping it
        # leaves the inputs and outputs as they would be (its two propagations were a third of `info`)
        if inner_dims or any(unknown_shape(types.get(o, (None, None))[1]) for o in outputs):
            name_dims(g, types)
        carry_dtypes(g, types)
    except Exception:  # noqa: BLE001 - a shape we cannot name stays as onnx left it; the model still opens
        pass
    inputs = [vi.name for vi in g.input if vi.name not in init_names]
    return _assemble(
        g.name or "main",
        list(g.node),
        inputs,
        outputs,
        init_names,
        types,
        where,
        known_domains,
        outer,
    )


def _build_function(f: onnx.FunctionProto, where: str, known_domains: set[str]) -> GraphDocument:
    local = known_domains | {_norm_domain(o.domain) for o in f.opset_import}
    return _assemble(
        f.name, list(f.node), list(f.input), list(f.output), set(), {}, where, local, frozenset()
    )


def _assemble(
    name: str,
    protos: list[onnx.NodeProto],
    inputs: list[str],
    outputs: list[str],
    init_names: set[str],
    types: dict[str, tuple[str | None, tuple[Dim, ...] | None]],
    where: str,
    known_domains: set[str],
    outer: frozenset[str],
) -> GraphDocument:
    from fuseview.graph.document import GraphDocument, Node
    from fuseview.graph.scopes import node_scope

    names, producer, consumers = _check_graph(
        NodeTable(protos), inputs, outputs, init_names, where, known_domains, outer, deep=False
    )
    folded_into = _folded_constants(protos, consumers, set(outputs))
    inner_known = frozenset(set(producer) | set(inputs) | init_names | set(outer))
    nodes: list[Node] = []
    for i, n in enumerate(protos):
        folded = tuple(
            x for x in n.input[:] if x and (x in init_names or (x in producer and producer[x] in folded_into))
        )
        subgraphs, attrs = _node_attributes(n, where, known_domains, inner_known)
        nodes.append(
            Node(
                index=i,
                name=names[i],
                op_type=n.op_type,
                domain=n.domain or "",
                inputs=tuple(n.input[:]),
                outputs=tuple(n.output[:]),
                attributes=attrs,
                scope=node_scope(n),
                folded_inputs=folded,
                folded_into=folded_into.get(i),
                subgraphs=subgraphs,
                metadata={p.key: p.value for p in n.metadata_props[:]},
            )
        )
    return GraphDocument(
        name=name,
        nodes=nodes,
        tensors=_tensors(protos, inputs, outputs, init_names, types, producer, consumers),
        inputs=inputs,
        outputs=outputs,
        edges=_edges(protos, producer, folded_into),
        node_by_name={nd.name: nd.index for nd in nodes},
    )


def _folded_constants(
    protos: list[onnx.NodeProto], consumers: dict[str, list[int]], output_set: set[str]
) -> dict[int, int]:
    """Each Constant node used by one node only (and not a graph output) -> the node it folds into."""
    folded_into: dict[int, int] = {}
    for i, n in enumerate(protos):
        if n.op_type == "Constant" and (n.domain or "") in ("", "ai.onnx") and len(n.output) == 1:
            users = consumers.get(n.output[0], [])
            if len(users) == 1 and n.output[0] not in output_set:
                folded_into[i] = users[0]
    return folded_into


def _node_attributes(
    n: onnx.NodeProto, where: str, known_domains: set[str], inner_known: frozenset[str]
) -> tuple[dict[str, GraphDocument], dict[str, object]]:
    """A node's inner graphs, built (by attribute name, `name[k]` for GRAPHS), and its attribute values."""
    subgraphs: dict[str, GraphDocument] = {}
    attrs: dict[str, object] = {}
    for a in n.attribute[:]:
        attrs[a.name] = _attribute_value(a)
        if a.type == onnx.AttributeProto.GRAPH:
            subgraphs[a.name] = _build_graph(a.g, where, known_domains, inner_known)
        elif a.type == onnx.AttributeProto.GRAPHS:
            for k, sub in enumerate(a.graphs):
                subgraphs[f"{a.name}[{k}]"] = _build_graph(sub, where, known_domains, inner_known)
    return subgraphs, attrs


def _tensors(
    protos: list[onnx.NodeProto], inputs: list[str], outputs: list[str], init_names: set[str],
    types: dict[str, tuple[str | None, tuple[Dim, ...] | None]],
    producer: dict[str, int], consumers: dict[str, list[int]],
) -> dict[str, Tensor]:
    """Every tensor the graph names, with its kind, dtype, shape, producer and consumers."""
    from fuseview.graph.document import Tensor

    defined = set(producer) | set(inputs) | init_names
    input_set, output_set = set(inputs), set(outputs)
    tensors: dict[str, Tensor] = {}
    for t in list(inputs) + sorted(init_names) + list(producer) + [x for x in consumers if x not in defined]:
        if t in tensors:
            continue
        prod = producer.get(t)
        if t in init_names:
            kind = "initializer"
        elif t in input_set or prod is None:
            kind = "input"
        elif t in output_set:
            kind = "output"
        elif protos[prod].op_type == "Constant":
            kind = "constant"
        else:
            kind = "intermediate"
        dtype, shape = types.get(t, (None, None))
        tensors[t] = Tensor(t, dtype, shape, kind, prod, tuple(consumers.get(t, ())))  # type: ignore[arg-type]
    return tensors


def _edges(protos: list[onnx.NodeProto], producer: dict[str, int], folded_into: dict[int, int]) -> list[Edge]:
    """The edges between nodes, leaving out the constants folded into their one user."""
    from fuseview.graph.document import Edge

    edges: list[Edge] = []
    for dst, n in enumerate(protos):
        if dst in folded_into:
            continue
        for inp in n.input[:]:
            src = producer.get(inp) if inp else None
            if src is not None and src not in folded_into:
                edges.append(Edge(src, dst, inp))
    return edges
