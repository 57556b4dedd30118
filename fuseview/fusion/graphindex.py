"""A read-only index over a model's top-level graph: producers, consumers, constants and inferred shapes."""

from __future__ import annotations

import hashlib
import os
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Iterable
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from fuseview.dims import default_dim, dim_kind, resolve_dims
from fuseview.graph.inference import shared_inference, substitute
from fuseview.graph.lazy_weights import mapped_weight
from fuseview.graph.seeds import raw_array
from fuseview.graph.shapes import attribute_value
from fuseview.graph.table import NodeTable

_GRAPH_TYPES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
# A body's outer reads by its bytes' digest: every inner graph is scanned as its own model (a copy), so
# without it each nesting level walked all the levels below it again (nested Ifs: depth x size).
_free_cache: OrderedDict[bytes, frozenset[str]] = OrderedDict()
_FREE_CACHE_SIZE = 4096
_free_lock = threading.Lock()  # scans run in the window's worker threads


def subgraph_inputs(node: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read from the outer scope (they count as that node's inputs)."""
    if not any(a.type in _GRAPH_TYPES for a in node.attribute):
        return set()
    key = hashlib.blake2b(node.SerializeToString(deterministic=True), digest_size=20).digest()
    with _free_lock:
        hit = _free_cache.get(key)
        if hit is not None:
            _free_cache.move_to_end(key)
    if hit is None:
        hit = frozenset(_outer_reads(node))
        with _free_lock:
            _free_cache[key] = hit
            while len(_free_cache) > _FREE_CACHE_SIZE:
                _free_cache.popitem(last=False)
    return set(hit)


def _outer_reads(node: onnx.NodeProto) -> set[str]:
    names: set[str] = set()
    for a in node.attribute:
        if a.type not in _GRAPH_TYPES:
            continue
        graphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in graphs:
            local = {i.name for i in g.input} | {t.name for t in g.initializer}
            for n in g.node:
                local.update(n.output)
            for n in g.node:
                names.update(i for i in n.input if i and i not in local)
                names.update(subgraph_inputs(n) - local)
    return names


def has_subgraph(node: onnx.NodeProto) -> bool:
    """True for nodes with graph attributes (If/Loop/Scan and custom ops that carry bodies)."""
    return _has_subgraph(node.op_type, node.domain, node.attribute)


def _has_subgraph(op_type: str, domain: str, attributes: Iterable[onnx.AttributeProto]) -> bool:
    if op_type in ("If", "Loop", "Scan", "SequenceMap"):
        return True
    return bool(domain) and any(a.type in _GRAPH_TYPES for a in attributes)


class GraphIndex:
    """Producers, consumers, constant values and shapes of a model's main graph (never modifies it)."""

    def __init__(
        self,
        model: onnx.ModelProto,
        dims: dict[str, int] | None = None,
        base_dir: str | os.PathLike | None = None,
        infer: bool = True,
        typed: onnx.GraphProto | None = None,
        table: NodeTable | None = None,
    ) -> None:
        self.model = model
        # the main graph as onnx inferred it, bodies whole: an inner graph's index gets its part from here
        self.typed_graph: onnx.GraphProto | None = typed
        self.graph = model.graph
        self.base_dir = os.fspath(base_dir) if base_dir else None
        # each node's fields read from the proto once (table: the reader's, when it made one): a upb field
        # read costs a dict lookup's several times over, and rules read the same few fields thousands of times
        t = NodeTable.of(self.graph) if table is None else table
        self.table = t
        self.nodes: list[onnx.NodeProto] = t.nodes
        self._pos = {id(n): i for i, n in enumerate(self.nodes)}
        self._names = t.unique_names()
        self.producer: dict[str, tuple[onnx.NodeProto, int]] = {}
        self.consumers: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        self.by_op: dict[str, list[onnx.NodeProto]] = defaultdict(list)
        self._inputs: dict[int, list[str]] = {}
        self._outputs: dict[int, list[str]] = {}
        self._attrs: dict[int, dict[str, Any]] = {}
        self._link(t)
        self.graph_outputs = {o.name for o in self.graph.output}
        self.graph_inputs = {i.name for i in self.graph.input}
        self.initializers = {t.name: t for t in self.graph.initializer}
        self.opsets = {(o.domain or ""): o.version for o in model.opset_import}
        self._const_cache: dict[str, np.ndarray | None] = {}
        self._seeds: dict[str, np.ndarray] = {}  # the small integer constants propagation was seeded with
        self._producer_ops: dict[int, list[str | None]] = {}
        self.dims_used: dict[str, int] = {}
        self.notes: list[str] = []
        self._shapes: dict[str, tuple[list | None, int]] = {}
        self._nbytes: dict[str, int | None] = {}
        self._is_const: dict[str, bool] = {}
        self._static: dict[str, tuple[list | None, int]] = {}
        self._dims = dict(dims or {})
        if infer:
            self._infer_shapes()

    def _link(self, t: NodeTable) -> None:
        """Producers, consumers (each reading node once, in its inputs' order, then its bodies' outer reads
        sorted), nodes by op, and each node's inputs and outputs, from the table's columns."""
        by_op, producer, consumers = self.by_op, self.producer, self.consumers
        inputs_of, outputs_of = self._inputs, self._outputs
        rows = zip(self.nodes, t.op_types, t.domains, t.inputs, t.outputs, t.attributes, strict=True)
        for n, op, domain, ins, outs, attrs in rows:
            key = id(n)
            by_op[op].append(n)
            outputs_of[key] = outs
            for i, o in enumerate(outs):
                if o:
                    producer[o] = (n, i)
            reads = ins + sorted(subgraph_inputs(n)) if _has_subgraph(op, domain, attrs) else ins
            for i in reads if len(reads) < 2 else dict.fromkeys(reads):  # a name read twice: one consumer
                if i:
                    consumers[i].append(n)
            if ins and not ins[-1]:
                ins = ins[:]  # the table's list stays as the proto has it
                while ins and not ins[-1]:
                    ins.pop()
            inputs_of[key] = ins

    # --------------------------------------------------------------------------------------- structure
    def position(self, node: onnx.NodeProto) -> int:
        """Index of a node in the graph's node list."""
        return self._pos[id(node)]

    def name(self, node: onnx.NodeProto) -> str:
        """The node's name as the viewer and the profiler call it (fuseview.naming)."""
        return self._names[self._pos[id(node)]]

    def inputs(self, node: onnx.NodeProto) -> list[str]:
        """The node's inputs without trailing empty ones (read once: the matcher reads them per pattern; a
        caller never changes the list)."""
        got = self._inputs.get(id(node))
        if got is None:  # not a node of this graph
            got = node.input[:]
            while got and not got[-1]:
                got.pop()
        return got

    def outputs(self, node: onnx.NodeProto) -> list[str]:
        """The node's outputs, empty names included (read once; a caller never changes the list)."""
        got = self._outputs.get(id(node))
        return node.output[:] if got is None else got

    def producer_ops(self, node: onnx.NodeProto) -> list[str | None]:
        """The op type of each input's producer (None: a graph input, initializer or empty name)."""
        got = self._producer_ops.get(id(node))
        if got is None:
            got = [self.producer[i][0].op_type if i in self.producer else None for i in node.input]
            self._producer_ops[id(node)] = got
        return got

    def attr(self, node: onnx.NodeProto, name: str, default: Any = None) -> Any:
        """Python value of a node attribute (a list is the caller's own copy)."""
        key = id(node)
        got = self._attrs.get(key)
        if got is None:
            pos = self._pos.get(key)
            if pos is None:  # not a node of this graph: read, never kept
                return next((attribute_value(a) for a in node.attribute[:] if a.name == name), default)
            got = self._attrs[key] = {}
            for a in self.table.attributes[pos]:
                got.setdefault(a.name, a)
        value = got.get(name)
        if value is None:
            return default
        if type(value) is onnx.AttributeProto:  # decoded on first read
            value = got[name] = attribute_value(value)
        return list(value) if type(value) is list else value

    def is_const(self, tensor: str) -> bool:
        """True for initializers (not overridable inputs) and Constant-node outputs."""
        got = self._is_const.get(tensor)
        if got is None:  # asked some 16,000 times a scan of a 48-layer GPT-2, of some 4,000 tensors
            got = self._is_const[tensor] = self._constant(tensor)
        return got

    def _constant(self, tensor: str) -> bool:
        if tensor in self.initializers and (tensor not in self.graph_inputs or self.model.ir_version < 4):
            return True  # before IR 4 every initializer had to be listed as an input too
        p = self.producer.get(tensor)
        if p is None or p[0].domain not in ("", "ai.onnx"):
            return False
        if p[0].op_type == "Constant":
            return True
        if p[0].op_type == "Identity":  # TorchScript deduplicates equal weights through Identity nodes
            return self.is_const(p[0].input[0])
        # ConstantOfShape of a constant shape: how light test models and some exporters write weights.
        return p[0].op_type == "ConstantOfShape" and bool(p[0].input) and self.is_const(p[0].input[0])

    def read_once(self, tensor: str) -> np.ndarray | None:
        """const_value, not kept in the index's cache: a big weight read once, when a fusion is applied."""
        kept = tensor in self._const_cache
        value = self.const_value(tensor)
        if not kept:
            self._const_cache.pop(tensor, None)
        return value

    def const_value(self, tensor: str) -> np.ndarray | None:
        """Value of a constant tensor (weights are read on demand), None if not constant."""
        if tensor in self._const_cache:
            return self._const_cache[tensor]
        value = None
        if self.is_const(tensor):
            seeded = self._seeds.get(tensor)
            # read already, from the same bytes, when propagation was seeded (a name with one source only)
            if seeded is not None and (tensor in self.initializers) != (tensor in self.producer):
                value = seeded
            elif tensor in self.initializers:
                value = self._tensor_value(self.initializers[tensor])
            elif self.producer[tensor][0].op_type == "Identity":
                value = self.const_value(self.producer[tensor][0].input[0])
            elif self.producer[tensor][0].op_type == "ConstantOfShape":
                node = self.producer[tensor][0]
                shape = self.const_value(node.input[0])
                fill = self.attr(node, "value")
                fill = numpy_helper.to_array(fill) if fill is not None else np.zeros(1, np.float32)
                if shape is not None and int(np.prod(shape)) <= 1 << 26:
                    value = np.full([int(d) for d in np.ravel(shape)], np.ravel(fill)[0], dtype=fill.dtype)
            else:
                node = self.producer[tensor][0]
                for a in node.attribute:
                    if a.name == "value":
                        value = self._tensor_value(a.t)
                    elif a.name in ("value_float", "value_int"):
                        value = np.array(
                            onnx.helper.get_attribute_value(a),
                            dtype=np.float32 if a.name == "value_float" else np.int64,
                        )
                    elif a.name in ("value_floats", "value_ints"):
                        value = np.array(
                            onnx.helper.get_attribute_value(a),
                            dtype=np.float32 if a.name == "value_floats" else np.int64,
                        )
        self._const_cache[tensor] = value
        return value

    def _tensor_value(self, t: onnx.TensorProto) -> np.ndarray | None:
        if _declared_bytes(t) > CONST_READ_LIMIT:
            return None  # rules read small constants; a huge weight stays on disk (or in the proto) unread
        try:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                mapped = mapped_weight(t, self.base_dir)
                if mapped is not None:
                    return mapped
                return numpy_helper.to_array(t, base_dir=self.base_dir or "")
            return raw_array(t)
        except Exception:  # noqa: BLE001 - unreadable weights just make a rule not apply
            return None

    def const_dtype(self, tensor: str) -> int | None:
        """ONNX element type of a tensor if known."""
        if tensor in self._shapes and self._shapes[tensor][1]:
            return self._shapes[tensor][1]
        if tensor in self.initializers:
            return self.initializers[tensor].data_type or None
        # Weights held in Constant nodes (PaddlePaddle exports) may carry no inferred type: read the value.
        v = self.const_value(tensor) if self.is_const(tensor) else None
        return None if v is None else onnx.helper.np_dtype_to_tensor_dtype(v.dtype)

    # ------------------------------------------------------------------------------------------ shapes
    def _dim_value(self, key: str, used: dict[str, int]) -> int:
        v = used[key] if key in used else default_dim(key)
        if key not in self._dims and dim_kind(key) in ("other", "unnamed") and v == default_dim(key):
            self.notes.append(f"symbolic dim {key!r} set to {v} (use --dim {key}=VALUE)")
        self.dims_used[key] = v
        return v

    def _infer_shapes(self) -> None:
        """Shapes under the chosen dims: the model's one shared inference (fuseview.graph.inference, on a
        weightless copy) with its input symbols set to the dims' values, then fuseview's concrete
        propagation (shapes.py) over what onnx left symbolic."""
        used = resolve_dims(self.model, self._dims)  # an unknown --dim name is an error here too
        for key in used:
            self._dim_value(key, used)
        inference = shared_inference(self.model, self.typed_graph, self.table)
        if self.typed_graph is None:
            self.typed_graph = inference.model.graph
        self.notes.extend(inference.notes)
        self._static = inference.shapes
        known: dict[str, list[int]] = {}  # the concrete shapes, for propagation
        # values of one type share their dims (inference.py): each distinct dims substituted once
        done: dict[int, tuple[list | None, bool]] = {}
        for name, (dims, elem) in inference.shapes.items():
            got = done.get(id(dims))
            if got is None:
                sub = substitute(dims, used)
                got = done[id(dims)] = (sub, sub is not None and all(isinstance(d, int) for d in sub))
            sub = None if got[0] is None else got[0][:]  # a list per tensor: shape() hands it out
            self._shapes[name] = (sub, elem)
            if got[1]:
                known[name] = sub  # type: ignore[assignment]
        for t in self.graph.initializer:
            if t.name not in self._shapes:
                init_dims = t.dims[:]
                self._shapes[t.name] = (init_dims, t.data_type)
                known[t.name] = init_dims
        self._propagate(inference.model.graph, known)

    def _propagate(self, mg: onnx.GraphProto, known: dict[str, list[int]]) -> None:
        """Fill shapes onnx inference left unknown with fuseview's concrete propagation (shapes.py); known:
        the concrete ones."""
        from fuseview.graph.seeds import constant_seeds
        from fuseview.graph.shapes import propagate

        inputs = {vi.name: known[vi.name] for vi in mg.input if vi.name in known}
        seeded, small = constant_seeds(mg, self.table, weightless=True)  # mg: inference's weightless copy
        self._seeds = small
        inputs.update(seeded)
        shapes = propagate(mg, inputs, small, known, self.table)  # mg: a copy of this graph's nodes
        for name, s in shapes.items():
            if name not in known:  # onnx left it unknown or symbolic
                old = self._shapes.get(name)
                self._shapes[name] = (s, old[1] if old else 0)

    def static_dim(self, tensor: str, i: int) -> int | None:
        """Dim i of a tensor when onnx's inference, run with every input dim symbolic, found a number: a
        size whatever the inputs' dims (None when it depends on them, or is unknown)."""
        dims = self._static.get(tensor, (None, 0))[0]
        if dims is None or not 0 <= i < len(dims):
            return None
        d = dims[i]
        return d if isinstance(d, int) and not isinstance(d, bool) and d >= 0 else None

    def elem_type(self, tensor: str) -> int | None:
        """The onnx element type of a tensor, None when inference did not give one."""
        s = self._shapes.get(tensor)
        return None if s is None else s[1]

    def shape(self, tensor: str) -> list | None:
        """Inferred shape of a tensor (ints, or None/names for unknown dims), None if unknown rank."""
        s = self._shapes.get(tensor)
        if s is None:
            v = self.const_value(tensor) if self.is_const(tensor) else None
            return None if v is None else list(v.shape)
        return s[0]

    def nbytes(self, tensor: str) -> int | None:
        """Bytes of a tensor under the chosen dims, None if its shape or type is unknown."""
        if tensor in self._nbytes:  # several rules' candidates remove the same tensors
            return self._nbytes[tensor]
        n = self._nbytes[tensor] = self._count_bytes(tensor)
        return n

    def _count_bytes(self, tensor: str) -> int | None:
        s = self._shapes.get(tensor)
        if s is None or s[0] is None:
            return None
        size = _ITEMSIZE.get(s[1])
        if size is None:
            try:
                size = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(s[1])).itemsize
            except Exception:  # noqa: BLE001
                return None
            _ITEMSIZE[s[1]] = size
        n = 1
        for d in s[0]:
            if not isinstance(d, int):
                return None
            n *= d
        return n * size


_ITEMSIZE: dict[int, int] = {}
# Largest constant a rule may read while scanning (bigger weights never leave the disk).
CONST_READ_LIMIT = 64 << 20


def _declared_bytes(t: onnx.TensorProto) -> int:
    n = 1
    for d in t.dims[:]:
        n *= max(int(d), 0)
    try:
        size = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
    except Exception:  # noqa: BLE001 - an unknown type: count one byte per element
        size = 1
    return n * size
