"""What a layout lays out: the shown items (node, group, input and output boxes with their sizes and
scopes) and the aggregated edges between them, with the layout's options."""

from __future__ import annotations

from dataclasses import dataclass

from fuseview.graph.document import GraphDocument
from fuseview.graph.geometry import BoxKind, group_key, input_key, node_key, output_key
from fuseview.graph.groups import Scope, group_scopes, scope_tree


@dataclass(frozen=True)
class LayoutOptions:
    """Knobs of the layout; every field has a sensible default."""

    fanout_stub_threshold: int = 8  # edges from a source with >= this many consumers are drawn as stubs
    node_height: float = 36.0
    folded_node_height: float = 44.0  # nodes that carry folded weights are a little taller
    group_height: float = 48.0
    io_height: float = 30.0
    char_width: float = 7.0
    padding: float = 24.0
    min_width: float = 80.0
    max_width: float = 360.0
    layer_gap: float = 30.0
    node_gap: float = 18.0
    dummy_width: float = 6.0
    frame_padding: float = 10.0
    stub_length: float = 14.0
    ordering_sweeps: int = 4  # down+up barycenter sweep pairs
    placement_passes: int = 4  # down+up coordinate passes


@dataclass
class LayoutStats:
    """Sizes of a layout's internals (layout_graph fills one when given; the benchmark reads it)."""

    items: int = 0
    dummies: int = 0
    layers: int = 0
    stubs: int = 0


def _plural(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


# ---------------------------------------------------------------------------------------------------------
# Items: what gets a box, and the edges between boxes


class LayoutItems:
    """The shown items and the aggregated edges between them."""

    def __init__(self, graph: GraphDocument, expanded: frozenset[Scope] | None, opt: LayoutOptions):
        self.graph = graph
        self.opt = opt
        self.keys: list[str] = []
        self.kinds: list[BoxKind] = []
        self.labels: list[str] = []
        self.sublabels: list[str] = []
        self.node_of: list[int | None] = []
        self.scopes: list[Scope] = []
        self.container: list[Scope] = []  # the expanded group whose frame holds the item
        self.widths: list[float] = []
        self.heights: list[float] = []
        self.order_key: list[int] = []  # file order, to break ties and cycles
        self.frames_on = expanded is not None
        item_of_node = [-1] * len(graph.nodes)
        input_item = self._add_inputs()
        self._add_nodes(expanded, item_of_node)
        output_item = self._add_outputs()
        self.n = len(self.keys)
        self.pairs = self._edges(item_of_node, input_item, output_item)

    def _width(self, text_len: int) -> float:
        opt = self.opt
        w = text_len * opt.char_width + opt.padding
        return opt.min_width if w < opt.min_width else (opt.max_width if w > opt.max_width else w)

    def _add_inputs(self) -> dict[str, int]:
        """Graph inputs (and, in subgraph bodies, outer-scope values read here) first; {name: item}."""
        graph, tensors = self.graph, self.graph.tensors
        n_nodes = len(graph.nodes)
        input_names = list(dict.fromkeys(graph.inputs))
        seen_inputs = set(input_names)
        for tensor in tensors.values():
            if (tensor.producer is None and tensor.kind == "input" and tensor.name not in seen_inputs
                    and tensor.consumers):
                input_names.append(tensor.name)
                seen_inputs.add(tensor.name)
        input_item: dict[str, int] = {}
        for k, name in enumerate(input_names):
            t = tensors.get(name)
            input_item[name] = len(self.keys)
            outer = name not in graph.inputs
            self._add(
                input_key(name),
                "input",
                name,
                ("outer scope " if outer else "") + (t.shape_text if t else "?"),
                None,
                (),
                (),
                self._width(len(name)),
                self.opt.io_height,
                -n_nodes - len(input_names) + k,
            )
        return input_item

    def _add_node(self, node, scope: Scope, frame: Scope, item_of_node: list[int]) -> None:
        item_of_node[node.index] = len(self.keys)
        self._add(
            node_key(node.index),
            "node",
            node.op_type,
            node.name,
            node.index,
            scope,
            frame,
            self._width(len(node.op_type)),
            self.opt.folded_node_height if node.folded_inputs else self.opt.node_height,
            node.index,
        )

    def _add_nodes(self, expanded: frozenset[Scope] | None, item_of_node: list[int]) -> None:
        """Every shown node, or the collapsed group box that holds it (item_of_node filled in)."""
        graph = self.graph
        node_scopes = group_scopes(graph)
        if expanded is None:
            for node in graph.nodes:
                if node.folded_into is None:
                    self._add_node(node, node_scopes[node.index], (), item_of_node)
            return
        group_item: dict[Scope, int] = {}
        tree = scope_tree(graph)
        shown_in: dict[Scope, Scope | None] = {}  # node scope -> outermost collapsed prefix (None: shown)
        for node in graph.nodes:
            if node.folded_into is not None:
                continue
            scope = node_scopes[node.index]
            collapsed = shown_in.get(scope, ())
            if collapsed == ():
                collapsed = None
                for k in range(1, len(scope) + 1):
                    if scope[:k] not in expanded:
                        collapsed = scope[:k]
                        break
                shown_in[scope] = collapsed
            if collapsed is None:
                self._add_node(node, scope, scope, item_of_node)
            else:
                gi = group_item.get(collapsed)
                if gi is None:
                    gi = group_item[collapsed] = len(self.keys)
                    label = collapsed[-1]
                    sub = _plural(tree[collapsed].count)
                    self._add(
                        group_key(collapsed),
                        "group",
                        label,
                        sub,
                        None,
                        collapsed,
                        collapsed[:-1],
                        self._width(max(len(label), len(sub))),
                        self.opt.group_height,
                        node.index,
                    )
                item_of_node[node.index] = gi

    def _add_outputs(self) -> dict[str, int]:
        """The graph outputs, last; {name: item}."""
        graph, tensors = self.graph, self.graph.tensors
        n_nodes = len(graph.nodes)
        output_item: dict[str, int] = {}
        for k, name in enumerate(dict.fromkeys(graph.outputs)):
            t = tensors.get(name)
            output_item[name] = len(self.keys)
            self._add(
                output_key(name),
                "output",
                name,
                t.shape_text if t else "?",
                None,
                (),
                (),
                self._width(len(name)),
                self.opt.io_height,
                n_nodes + k,
            )
        return output_item

    def _edges(self, item_of_node: list[int], input_item: dict[str, int], output_item: dict[str, int]
               ) -> dict[tuple[int, int], list[str]]:
        """Edges between items: (src item, dst item) -> tensors in order of first appearance."""
        graph, tensors = self.graph, self.graph.tensors
        pairs: dict[tuple[int, int], list[str]] = {}
        for e in graph.edges:
            a = item_of_node[e.src]
            b = item_of_node[e.dst]
            if a == b or a < 0 or b < 0:
                continue
            lst = pairs.get((a, b))
            if lst is None:
                pairs[(a, b)] = [e.tensor]
            elif e.tensor not in lst:
                lst.append(e.tensor)
        for name, a in input_item.items():
            t = tensors.get(name)
            if t is None:
                continue
            for c in t.consumers:
                b = item_of_node[c]
                if b < 0:
                    continue
                lst = pairs.get((a, b))
                if lst is None:
                    pairs[(a, b)] = [name]
                elif name not in lst:
                    lst.append(name)
        for name, b in output_item.items():
            t = tensors.get(name)
            if t is None:
                continue
            a = item_of_node[t.producer] if t.producer is not None else input_item.get(name, -1)
            if a >= 0 and (a, b) not in pairs:
                pairs[(a, b)] = [name]
        return pairs

    def _add(self, key, kind, label, sublabel, node, scope, container, w, h, order) -> None:
        self.keys.append(key)
        self.kinds.append(kind)
        self.labels.append(label)
        self.sublabels.append(sublabel)
        self.node_of.append(node)
        self.scopes.append(scope)
        self.container.append(container)
        self.widths.append(w)
        self.heights.append(h)
        self.order_key.append(order)
