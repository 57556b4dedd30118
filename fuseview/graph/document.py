"""The graph document: what fuseview shows of an ONNX graph, independent of any drawing."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import onnx

TensorKind = Literal["input", "output", "initializer", "constant", "intermediate"]
Dim = int | str | None


def shape_text(shape: tuple[Dim, ...] | list[Dim] | None, hide_invented: bool = False) -> str:
    """A shape as a person reads it, e.g. `[batch, 128, 768]`, `?` when the rank is unknown.

    hide_invented: shape inference's invented dim names (unk__12) are shown as ? too.
    """
    if shape is None:
        return "?"
    return "[" + ", ".join(
        "?" if d is None or (hide_invented and isinstance(d, str) and d.startswith("unk__")) else str(d)
        for d in shape
    ) + "]"


def op_histogram(nodes: Iterable[Any], separator: str = ":") -> dict[str, int]:
    """Node count per op type, most frequent first; other domains than ONNX's as domain<separator>op."""
    counts: dict[str, int] = {}
    for n in nodes:
        key = n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}{separator}{n.op_type}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@dataclass(frozen=True)
class Tensor:
    """A value in the graph: its type as far as known, who makes it and who reads it."""

    name: str
    dtype: str | None
    shape: tuple[Dim, ...] | None  # None: rank unknown; str: symbolic dim; None inside: unknown dim
    kind: TensorKind
    producer: int | None = None  # node index
    consumers: tuple[int, ...] = ()

    @property
    def shape_text(self) -> str:
        """The shape as a person reads it, e.g. `[batch, 128, 768]` or `?`."""
        return shape_text(self.shape)


@dataclass
class Node:
    """One operator of the graph as shown: a box with its folded weights inside."""

    index: int  # position in the ONNX graph's node list
    name: str  # unique within the graph (synthesised from op type and index when empty or repeated)
    op_type: str
    domain: str
    inputs: tuple[str, ...]  # '' stands for an omitted optional input
    outputs: tuple[str, ...]
    attributes: dict[str, object]
    scope: tuple[str, ...]  # name scope, outermost first: ('transformer', 'h.3', 'attn')
    folded_inputs: tuple[str, ...] = ()  # initializers and single-use constants drawn inside the box
    folded_into: int | None = None  # set on a Constant node drawn inside its only consumer
    subgraphs: dict[str, GraphDocument] = field(default_factory=dict)  # If/Loop/Scan bodies
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def visible(self) -> bool:
        """Whether this node gets its own box (folded constants do not)."""
        return self.folded_into is None


@dataclass(frozen=True)
class Edge:
    """A tensor flowing from one visible node to another."""

    src: int
    dst: int
    tensor: str


@dataclass
class GraphDocument:
    """One graph (main graph, subgraph body or local function) ready to lay out and inspect."""

    name: str
    nodes: list[Node]
    tensors: dict[str, Tensor]
    inputs: list[str]  # graph inputs that are not initializers
    outputs: list[str]
    edges: list[Edge]
    node_by_name: dict[str, int] = field(default_factory=dict)

    def visible_nodes(self) -> list[Node]:
        """Nodes that get a box of their own."""
        return [n for n in self.nodes if n.visible]

    def node_counts(self) -> tuple[int, int]:
        """(the graph's nodes, as `fuseview info` and `fuse` count them; those drawn as boxes)."""
        return self._counts

    @functools.cached_property
    def _counts(self) -> tuple[int, int]:
        # counted once: a graph's nodes are fixed once built, and the window's status line asks at every
        # zoom step (two passes over 50,000 nodes a wheel step)
        return len(self.nodes), sum(1 for n in self.nodes if n.visible)

    def count_text(self, before: GraphDocument | None = None) -> str:
        """e.g. '9,869 nodes (6,177 drawn)', or against `before`: '430 nodes (-9,439; 398 drawn)'."""
        nodes, drawn = self.node_counts()
        delta = f"{nodes - len(before.nodes):+,}; " if before is not None else ""
        return f"{nodes:,} nodes ({delta}{drawn:,} drawn)"

    def node(self, name: str) -> Node:
        """The node with this (unique) name."""
        return self.nodes[self.node_by_name[name]]


@dataclass
class ModelDocument:
    """A loaded model: its main graph, local functions, and model-level facts."""

    path: Path | None
    model: onnx.ModelProto  # as loaded, external weights not read
    graph: GraphDocument
    functions: dict[str, GraphDocument]  # key: "domain:name"
    opsets: dict[str, int]
    ir_version: int
    producer: str
    warnings: list[str] = field(default_factory=list)

    def op_histogram(self) -> dict[str, int]:
        """Op type counts over the main graph, most frequent first."""
        return op_histogram(self.graph.nodes)
