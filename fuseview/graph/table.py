"""Each node's fields of one graph read from its protobuf once: a plain-Python table, column by column.

A upb field read costs several dict lookups (a repeated field's slice about a microsecond), and the load
check, the names the command line notes and the scan's index each read the same fields of every node: on a
48-layer GPT-2 (9,869 nodes) those passes read them five times over. One table, made once per graph by the
reader, serves them all. Nothing here changes the graph; the lists are the caller's to read, never to change.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx

from fuseview.naming import unique_names


class NodeTable:
    """The nodes of one graph and, per node in graph order: name, op type, domain, inputs, outputs and
    attributes (the AttributeProto objects)."""

    __slots__ = ("nodes", "names", "op_types", "domains", "inputs", "outputs", "attributes", "_attr_rows",
                 "_unique")

    def __init__(self, nodes: Sequence[onnx.NodeProto]) -> None:
        self.nodes: list[onnx.NodeProto] = list(nodes)
        ns = self.nodes
        # a column at a time: one comprehension per field is the cheapest read protobuf offers
        self.names: list[str] = [n.name for n in ns]
        self.op_types: list[str] = [n.op_type for n in ns]
        self.domains: list[str] = [n.domain for n in ns]
        self.inputs: list[list[str]] = [n.input[:] for n in ns]
        self.outputs: list[list[str]] = [n.output[:] for n in ns]
        self.attributes: list[list[onnx.AttributeProto]] = [n.attribute[:] for n in ns]
        self._attr_rows: list[list[tuple[str, int, list[onnx.GraphProto]]]] | None = None
        self._unique: list[str] | None = None

    def unique_names(self) -> list[str]:
        """naming.unique_names of the nodes, made once (the load check and the scan index both use them)."""
        if self._unique is None:
            self._unique = unique_names(self.names, self.op_types)
        return self._unique

    def attribute_rows(self) -> list[list[tuple[str, int, list[onnx.GraphProto]]]]:
        """Per node, per attribute: its name, type and the graphs it holds (`g` for a GRAPH, else `graphs`,
        whatever the type says, as the load checks walk them), read once for every walk of the bodies."""
        if self._attr_rows is None:
            graph = onnx.AttributeProto.GRAPH
            self._attr_rows = [[(a.name, a.type, [a.g] if a.type == graph else a.graphs[:]) for a in attrs]
                               for attrs in self.attributes]
        return self._attr_rows

    @classmethod
    def of(cls, graph: onnx.GraphProto | onnx.FunctionProto) -> NodeTable:
        """The table of a graph's (or a local function's) nodes."""
        return cls(graph.node[:])

    def __len__(self) -> int:
        return len(self.nodes)
