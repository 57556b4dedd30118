"""Inner graphs (If/Loop/Scan bodies, model-local functions) as stand-alone models for scanning and fusing.

A body reads tensors of its enclosing graph by name; its stand-alone model receives the outer constants it
reads as initializers (so weight checks still see them) and every other outer tensor as a graph input typed
from the outer graph's inference. After fusion the body's nodes and new initializers are written back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import onnx
from onnx import numpy_helper

from fuseview.fusion.graphindex import GraphIndex, subgraph_inputs

FUNCTION = "<function>"
BODY_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


@dataclass(frozen=True)
class InnerGraph:
    """Where an inner graph lives: (first output of its node, attribute) or (FUNCTION, 'domain:name')."""

    anchor: str
    attr: str
    label: str


@dataclass
class InnerModel:
    """An inner graph as a model, and the outer constants copied into it (not written back)."""

    where: InnerGraph
    model: onnx.ModelProto
    injected: set[str] = field(default_factory=set)
    typed: onnx.GraphProto | None = None  # the body as the outer model's inference left it (GraphIndex)


def _graph_attrs(node: onnx.NodeProto) -> Iterator[tuple[str, onnx.GraphProto]]:
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            yield a.name, a.g


def _free_names(graph: onnx.GraphProto) -> list[str]:
    """Tensors the graph reads but neither declares nor computes (outer-scope reads), in first-use order."""
    local = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for n in graph.node:
        local.update(n.output)
    seen: dict[str, None] = {}
    for n in graph.node:
        for i in list(n.input) + sorted(subgraph_inputs(n)):
            if i and i not in local:
                seen[i] = None
    return list(seen)


def _wrap(model: onnx.ModelProto, graph: onnx.GraphProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.ir_version = model.ir_version
    out.opset_import.extend(model.opset_import)
    out.functions.extend(model.functions)
    out.graph.CopyFrom(graph)
    return out


def inner_models(model: onnx.ModelProto, index: GraphIndex, functions: bool = True) -> Iterator[InnerModel]:
    """Every If/Loop/Scan body of the main graph (and every model-local function), as a stand-alone model."""
    t = index.table  # op types and domains read once (a upb field read per node costs more)
    for node, op, domain in zip(t.nodes, t.op_types, t.domains, strict=True):
        if op not in BODY_OPS and domain in ("", "ai.onnx"):
            continue  # only If/Loop/Scan (and custom-domain ops) carry graph attributes
        if not node.output or not node.output[0]:
            continue
        for attr, body in _graph_attrs(node):
            m = _wrap(model, body)
            injected: set[str] = set()
            for name in _free_names(body):
                value = index.const_value(name) if index.is_const(name) else None
                if value is not None:
                    m.graph.initializer.append(numpy_helper.from_array(value, name))
                    injected.add(name)
                    continue
                shape = index.shape(name)
                dtype = index.const_dtype(name) or 0
                dims = None if shape is None else [d if isinstance(d, int) else None for d in shape]
                m.graph.input.append(onnx.helper.make_tensor_value_info(name, dtype, dims))
                injected.add(name)
            label = f"{index.name(node)}:{attr}"
            typed = _typed_body(index, node, attr)
            yield InnerModel(InnerGraph(node.output[0], attr, label), m, injected, typed)
    for fn in model.functions if functions else ():
        g = onnx.GraphProto()
        g.name = fn.name
        g.node.extend(fn.node)
        g.input.extend(onnx.helper.make_value_info(i, onnx.TypeProto()) for i in fn.input)
        g.output.extend(onnx.helper.make_value_info(o, onnx.TypeProto()) for o in fn.output)
        m = _wrap(model, g)
        if fn.opset_import:
            del m.opset_import[:]
            m.opset_import.extend(fn.opset_import)
        key = f"{fn.domain}:{fn.name}"
        yield InnerModel(InnerGraph(FUNCTION, key, f"function {key}"), m)


def _typed_body(index: GraphIndex, node: onnx.NodeProto, attr: str) -> onnx.GraphProto | None:
    typed = index.typed_graph
    if typed is None or len(typed.node) != len(index.nodes):
        return None
    found = [a.g for a in typed.node[index.position(node)].attribute
             if a.name == attr and a.type == onnx.AttributeProto.GRAPH]
    return found[0] if found else None


def _merge_opsets(target, source) -> None:  # noqa: ANN001 - ModelProto or FunctionProto
    have = {o.domain: o for o in target.opset_import}
    for o in source.opset_import:
        if o.domain not in have:
            target.opset_import.append(o)
        elif o.version > have[o.domain].version:
            have[o.domain].version = o.version


def write_back(model: onnx.ModelProto, inner: InnerModel, fused: onnx.ModelProto) -> None:
    """Put a fused inner model's nodes and new initializers back where the inner graph came from."""
    w = inner.where
    if w.anchor == FUNCTION:
        fn = next(f for f in model.functions if f"{f.domain}:{f.name}" == w.attr)
        del fn.node[:]
        fn.node.extend(fused.graph.node)
        _merge_opsets(fn, fused)
        for o in fused.opset_import:
            if o.domain and o.domain not in {x.domain for x in model.opset_import}:
                model.opset_import.append(o)
        return
    node = next(n for n in model.graph.node if n.output and n.output[0] == w.anchor)
    attr = next(a for a in node.attribute if a.name == w.attr)
    body = attr.g
    del body.node[:]
    body.node.extend(fused.graph.node)
    inits = [t for t in fused.graph.initializer if t.name not in inner.injected]
    del body.initializer[:]
    body.initializer.extend(inits)
    produced = {o for n in body.node for o in n.output}
    vis = [v for v in body.value_info if v.name in produced]
    del body.value_info[:]
    body.value_info.extend(vis)
    for o in fused.opset_import:
        if o.domain and o.domain not in {x.domain for x in model.opset_import}:
            model.opset_import.append(o)
