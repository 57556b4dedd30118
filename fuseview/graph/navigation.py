"""Documents for the graphs inside a model: If/Loop/Scan bodies and model-local functions."""

from __future__ import annotations

import dataclasses

import onnx
from onnx import helper

from fuseview.errors import FuseviewError
from fuseview.graph.document import ModelDocument


def _subgraph_proto(node: onnx.NodeProto, key: str) -> onnx.GraphProto:
    # keys are an attribute name ("body") or, for GRAPHS attributes, "name[k]"
    name, _, rest = key.partition("[")
    for a in node.attribute:
        if a.name != name:
            continue
        if a.type == onnx.AttributeProto.GRAPH and not rest:
            return a.g
        if a.type == onnx.AttributeProto.GRAPHS and rest:
            return a.graphs[int(rest.rstrip("]"))]
    raise FuseviewError(f"node {node.name!r} has no subgraph {key!r}")


def _with_graph(doc: ModelDocument, graph_proto: onnx.GraphProto) -> onnx.ModelProto:
    model = onnx.ModelProto()
    model.ir_version = doc.model.ir_version
    model.opset_import.extend(doc.model.opset_import)
    model.graph.CopyFrom(graph_proto)
    return model


def subgraph_document(doc: ModelDocument, node_index: int, key: str) -> ModelDocument:
    """The document of one body of node `node_index` of doc's graph (e.g. a Loop's 'body')."""
    node = doc.graph.nodes[node_index]
    if key not in node.subgraphs:
        raise FuseviewError(f"node {node.name!r} has no subgraph {key!r}")
    proto = _subgraph_proto(doc.model.graph.node[node_index], key)
    return dataclasses.replace(doc, model=_with_graph(doc, proto), graph=node.subgraphs[key], warnings=[])


def function_document(doc: ModelDocument, key: str) -> ModelDocument:
    """The document of the model-local function `domain:name`."""
    if key not in doc.functions:
        raise FuseviewError(f"the model has no local function {key!r}")
    domain, _, name = key.partition(":")
    f = next(f for f in doc.model.functions if f.domain == domain and f.name == name)
    g = helper.make_graph(
        list(f.node),
        f.name,
        [helper.make_value_info(i, onnx.TypeProto()) for i in f.input],
        [helper.make_value_info(o, onnx.TypeProto()) for o in f.output],
    )
    return dataclasses.replace(doc, model=_with_graph(doc, g), graph=doc.functions[key], warnings=[])


def function_key(doc: ModelDocument, node_index: int) -> str | None:
    """`domain:name` when node `node_index` calls a model-local function, else None."""
    n = doc.graph.nodes[node_index]
    key = f"{n.domain}:{n.op_type}"
    return key if key in doc.functions else None


def inner_graphs(doc: ModelDocument, node_index: int) -> list[tuple[str, str]]:
    """What a node opens into: [(label, key)] with keys 'sub:<attr>' or 'fn:<domain:name>'."""
    n = doc.graph.nodes[node_index]
    found = [(f"{n.name} ▸ {k}", f"sub:{k}") for k in n.subgraphs]
    fk = function_key(doc, node_index)
    if fk is not None:
        found.append((f"{n.name} ▸ function {fk}", f"fn:{fk}"))
    return found


def open_inner(doc: ModelDocument, node_index: int | None, key: str) -> ModelDocument:
    """Resolve a key from inner_graphs (or 'fn:<domain:name>' with node_index None) to a document."""
    kind, _, rest = key.partition(":")
    if kind == "fn":
        return function_document(doc, rest)
    if kind == "sub" and node_index is not None:
        return subgraph_document(doc, node_index, rest)
    raise FuseviewError(f"cannot open {key!r}")
