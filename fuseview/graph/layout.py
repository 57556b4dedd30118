"""Layered (Sugiyama-style) layout of a GraphDocument into boxes, edge routes and group frames.

Steps: choose the shown items (nodes, collapsed groups, graph inputs/outputs), layer them top to bottom
with every node pulled down to just above its first consumer, replace long edges by one chain of dummy
vertices per source, order each layer by barycenter sweeps, place boxes by repeated weighted averaging
of neighbour positions (isotonic regression keeps the order and the gaps), and route edges through the
dummy positions. High fan-out sources are drawn as stubs next to their consumers.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from fuseview.graph.document import GraphDocument
from fuseview.graph.geometry import (
    Box,
    Frame,
    Layout,
    Route,
    group_key,
    input_key,
    node_key,
    output_key,
)
from fuseview.graph.groups import Scope, ScopeGroup, group_scopes, initial_expansion, scope_tree

__all__ = [
    "LayoutOptions",
    "LayoutStats",
    "ScopeGroup",
    "group_scopes",
    "initial_expansion",
    "layout_graph",
    "scope_tree",
]


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
    group_gap: float = 14.0  # extra horizontal gap between items of different groups (room for frames)
    frame_padding: float = 10.0
    frame_label_height: float = 16.0
    stub_length: float = 14.0
    ordering_sweeps: int = 4  # down+up barycenter sweep pairs
    placement_passes: int = 4  # down+up coordinate passes


@dataclass
class LayoutStats:
    """Sizes of the last layout's internals (for the benchmark)."""

    items: int = 0
    dummies: int = 0
    layers: int = 0
    stubs: int = 0


last_stats = LayoutStats()


def _plural(n: int) -> str:
    return f"{n} node" if n == 1 else f"{n} nodes"


def layout_graph(
    graph: GraphDocument,
    expanded: frozenset[tuple[str, ...]] | None = None,
    options: LayoutOptions | None = None,
) -> Layout:
    """Lay out the graph: flat when expanded is None, else with every scope not in expanded collapsed."""
    opt = options or LayoutOptions()
    items = _Items(graph, expanded, opt)
    return _Engine(items, opt).run()


# ---------------------------------------------------------------------------------------------------------
# Items: what gets a box, and the edges between boxes


class _Items:
    """The shown items and the aggregated edges between them."""

    def __init__(self, graph: GraphDocument, expanded: frozenset[Scope] | None, opt: LayoutOptions):
        self.graph = graph
        self.keys: list[str] = []
        self.kinds: list[str] = []
        self.labels: list[str] = []
        self.sublabels: list[str] = []
        self.node_of: list[int | None] = []
        self.scopes: list[Scope] = []
        self.container: list[Scope] = []  # the expanded group whose frame holds the item
        self.widths: list[float] = []
        self.heights: list[float] = []
        self.order_key: list[int] = []  # file order, to break ties and cycles
        self.frames_on = expanded is not None

        nodes = graph.nodes
        n_nodes = len(nodes)
        item_of_node = [-1] * n_nodes
        cw, pad, mn, mx = opt.char_width, opt.padding, opt.min_width, opt.max_width

        def width_for(text_len: int) -> float:
            w = text_len * cw + pad
            return mn if w < mn else (mx if w > mx else w)

        # graph inputs (and, in subgraph bodies, outer-scope values read here) come first
        tensors = graph.tensors
        input_names = list(dict.fromkeys(graph.inputs))
        seen_inputs = set(input_names)
        for t in tensors.values():
            if t.producer is None and t.kind == "input" and t.name not in seen_inputs and t.consumers:
                input_names.append(t.name)
                seen_inputs.add(t.name)
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
                width_for(len(name)),
                opt.io_height,
                -n_nodes - len(input_names) + k,
            )

        group_item: dict[Scope, int] = {}
        node_scopes = group_scopes(graph)
        if expanded is None:
            for node in nodes:
                if node.folded_into is not None:
                    continue
                item_of_node[node.index] = len(self.keys)
                self._add(
                    node_key(node.index),
                    "node",
                    node.op_type,
                    node.name,
                    node.index,
                    node_scopes[node.index],
                    (),
                    width_for(len(node.op_type)),
                    opt.folded_node_height if node.folded_inputs else opt.node_height,
                    node.index,
                )
        else:
            tree = scope_tree(graph)
            shown_in: dict[Scope, Scope | None] = {}  # node scope -> outermost collapsed prefix (None: shown)
            for node in nodes:
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
                    item_of_node[node.index] = len(self.keys)
                    self._add(
                        node_key(node.index),
                        "node",
                        node.op_type,
                        node.name,
                        node.index,
                        scope,
                        scope,
                        width_for(len(node.op_type)),
                        opt.folded_node_height if node.folded_inputs else opt.node_height,
                        node.index,
                    )
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
                            width_for(max(len(label), len(sub))),
                            opt.group_height,
                            node.index,
                        )
                    item_of_node[node.index] = gi

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
                width_for(len(name)),
                opt.io_height,
                n_nodes + k,
            )
        self.n = len(self.keys)

        # edges between items: (src item, dst item) -> tensors in order of first appearance
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
        self.pairs = pairs

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


def _common_prefix(a: Scope, b: Scope) -> Scope:
    if a is b or a == b:
        return a
    k = 0
    m = min(len(a), len(b))
    while k < m and a[k] == b[k]:
        k += 1
    return a[:k]


# ---------------------------------------------------------------------------------------------------------
# Engine: layering, dummies, ordering, placement, routing


class _Engine:
    def __init__(self, items: _Items, opt: LayoutOptions):
        self.it = items
        self.opt = opt

    def run(self) -> Layout:
        it, opt = self.it, self.opt
        n = it.n
        succ: list[list[int]] = [[] for _ in range(n)]
        for a, b in it.pairs:
            succ[a].append(b)

        # --- topological order; edges closing a cycle (possible between collapsed groups) become stubs
        order_key = it.order_key
        indeg = [0] * n
        for a in range(n):
            for b in succ[a]:
                indeg[b] += 1
        heap = [(order_key[v], v) for v in range(n) if indeg[v] == 0]
        heapq.heapify(heap)
        by_key = sorted(range(n), key=order_key.__getitem__)
        ptr = 0
        done = [False] * n
        pos = [0] * n
        topo: list[int] = []
        while len(topo) < n:
            if not heap:
                while done[by_key[ptr]]:
                    ptr += 1
                v = by_key[ptr]
                heap.append((order_key[v], v))
            _, v = heapq.heappop(heap)
            if done[v]:
                continue
            done[v] = True
            pos[v] = len(topo)
            topo.append(v)
            for b in succ[v]:
                indeg[b] -= 1
                if indeg[b] == 0 and not done[b]:
                    heapq.heappush(heap, (order_key[b], b))

        fwd: list[list[int]] = [[] for _ in range(n)]
        pred: list[list[int]] = [[] for _ in range(n)]
        back: set[tuple[int, int]] = set()
        for a in range(n):
            pa = pos[a]
            for b in succ[a]:
                if pos[b] > pa:
                    fwd[a].append(b)
                    pred[b].append(a)
                else:
                    back.add((a, b))

        # --- layering: longest path from the top, then pull every node down to just above its first consumer
        layer = [0] * n
        for v in topo:
            lv = layer[v]
            for b in fwd[v]:
                if layer[b] <= lv:
                    layer[b] = lv + 1
        # with frames, graph inputs stay on top and outputs go to the bottom, outside every frame
        kinds = it.kinds
        keep_top = it.frames_on
        for v in reversed(topo):
            f = fwd[v]
            if f and not (keep_top and kinds[v] == "input"):
                m = min([layer[b] for b in f]) - 1
                if m > layer[v]:
                    layer[v] = m
        if keep_top and n:
            bottom = max([layer[v] for v in range(n) if kinds[v] != "output"], default=-1) + 1
            for v in range(n):
                if kinds[v] == "output":
                    layer[v] = bottom
        n_layers = (max(layer) + 1) if n else 0

        # --- which edges are stubs: high fan-out sources, except the hops to the very next layer
        threshold = opt.fanout_stub_threshold
        stub_pairs: list[tuple[int, int]] = sorted(back, key=lambda p: (pos[p[1]], pos[p[0]]))
        # per source: consumers reached by a routed edge
        routed: list[list[int]] = [[] for _ in range(n)]
        for a in range(n):
            f = fwd[a]
            if not f:
                continue
            if len(succ[a]) >= threshold:
                la = layer[a] + 1
                for b in f:
                    if layer[b] == la:
                        routed[a].append(b)
                    else:
                        stub_pairs.append((a, b))
            else:
                routed[a] = f

        # --- vertices: items, then one chain of dummies per source down to its last routed consumer
        layers: list[list[int]] = [[] for _ in range(n_layers)]
        for v in topo:
            layers[layer[v]].append(v)
        vlayer = list(layer)
        width = list(it.widths)
        is_dummy = [False] * n
        container = list(it.container)
        up: list[list[int]] = [[] for _ in range(n)]
        down: list[list[int]] = [[] for _ in range(n)]
        chain: dict[int, list[int]] = {}  # source item -> its dummy vertices, one per layer below it
        dummy_w = opt.dummy_width
        frames_on = it.frames_on
        nv = n
        for a in topo:
            r = routed[a]
            if not r:
                continue
            la = layer[a]
            deepest = max([layer[b] for b in r])
            prev = a
            if deepest > la + 1:
                cont = container[a]
                if frames_on:
                    for b in r:
                        cont = _common_prefix(cont, container[b])
                dummies = []
                for lyr in range(la + 1, deepest):
                    d = nv
                    nv += 1
                    vlayer.append(lyr)
                    width.append(dummy_w)
                    is_dummy.append(True)
                    container.append(cont)
                    up.append([prev])
                    down.append([])
                    down[prev].append(d)
                    layers[lyr].append(d)
                    dummies.append(d)
                    prev = d
                chain[a] = dummies
                for b in r:
                    lb = layer[b]
                    u = a if lb == la + 1 else dummies[lb - la - 2]
                    up[b].append(u)
                    down[u].append(b)
            else:
                for b in r:
                    up[b].append(a)
                    down[a].append(b)

        # --- ordering: barycenter sweeps on normalised positions
        rank = [0.0] * nv
        for lst in layers:
            inv = 1.0 / (len(lst) or 1)
            for i, v in enumerate(lst):
                rank[v] = (i + 0.5) * inv
        sort_layer = self._sort_layer_grouped if frames_on else None
        for _ in range(opt.ordering_sweeps):
            for direction in (0, 1):
                rng = range(1, n_layers) if direction == 0 else range(n_layers - 2, -1, -1)
                nbrs = up if direction == 0 else down
                for lyr in rng:
                    lst = layers[lyr]
                    if len(lst) < 2:
                        continue
                    bary = {}
                    for v in lst:
                        nb = nbrs[v]
                        if nb:
                            s = 0.0
                            for u in nb:
                                s += rank[u]
                            bary[v] = s / len(nb)
                        else:
                            bary[v] = rank[v]
                    if sort_layer is not None:
                        lst = sort_layer(lst, bary, container)
                    else:
                        lst = sorted(lst, key=bary.__getitem__)
                    layers[lyr] = lst
                    inv = 1.0 / len(lst)
                    for i, v in enumerate(lst):
                        rank[v] = (i + 0.5) * inv

        # --- horizontal placement
        cx = [0.0] * nv
        gap = opt.node_gap
        ggap = opt.group_gap
        sep_cache: list[list[float]] = []
        for lst in layers:
            seps = [0.0]
            x = 0.0
            prev = -1
            for v in lst:
                if prev >= 0:
                    s = (width[prev] + width[v]) * 0.5 + (gap * 0.5 if is_dummy[prev] or is_dummy[v] else gap)
                    if frames_on and container[prev] != container[v]:
                        s += ggap * (len(container[prev]) + len(container[v]) + 1)
                    seps.append(s)
                    x += s
                cx[v] = x
                prev = v
            sep_cache.append(seps)
        weight_v = [4.0 if d else 1.0 for d in is_dummy]

        def place(lyr: int, use_up: bool, use_down: bool) -> None:
            lst = layers[lyr]
            targets = []
            weights = []
            for v in lst:
                s = 0.0
                wsum = 0.0
                dv = is_dummy[v]
                if use_up:
                    for u in up[v]:
                        w = (8.0 if is_dummy[u] else 2.0) if dv else (2.0 if is_dummy[u] else 1.0)
                        s += w * cx[u]
                        wsum += w
                if use_down:
                    for u in down[v]:
                        w = (8.0 if is_dummy[u] else 2.0) if dv else (2.0 if is_dummy[u] else 1.0)
                        s += w * cx[u]
                        wsum += w
                if wsum > 0.0:
                    targets.append(s / wsum)
                    weights.append(weight_v[v] * wsum)
                else:
                    targets.append(cx[v])
                    weights.append(0.05)
            xs = _isotonic_place(targets, weights, sep_cache[lyr])
            for v, x in zip(lst, xs, strict=True):
                cx[v] = x

        for _ in range(opt.placement_passes):
            for lyr in range(1, n_layers):
                place(lyr, True, False)
            for lyr in range(n_layers - 2, -1, -1):
                place(lyr, False, True)
        for lyr in range(n_layers):
            place(lyr, True, True)

        # --- vertical placement
        heights = it.heights
        layer_h = [0.0] * n_layers
        for v in range(n):
            h = heights[v]
            if h > layer_h[layer[v]]:
                layer_h[layer[v]] = h
        layer_top = [0.0] * n_layers
        y = 0.0
        lgap = opt.layer_gap
        for lyr in range(n_layers):
            layer_top[lyr] = y
            y += layer_h[lyr] + lgap

        # --- output
        min_x = min([cx[v] - width[v] * 0.5 for v in range(nv)], default=0.0)
        xs = [c - min_x for c in cx]
        box_x = [0.0] * n
        box_y = [0.0] * n
        boxes: list[Box] = []
        keys = it.keys
        kinds = it.kinds
        labels = it.labels
        sublabels = it.sublabels
        for v in range(n):
            w = width[v]
            h = heights[v]
            lyr = layer[v]
            bx = xs[v] - w * 0.5
            by = layer_top[lyr] + (layer_h[lyr] - h) * 0.5
            box_x[v] = bx
            box_y[v] = by
            boxes.append(
                Box(keys[v], kinds[v], bx, by, w, h, labels[v], sublabels[v], it.node_of[v], it.scopes[v])
            )

        routes: list[Route] = []
        pairs = it.pairs
        for a in topo:
            r = routed[a]
            if not r:
                continue
            la = layer[a]
            sx = xs[a]
            sy = box_y[a] + heights[a]
            dummies = chain.get(a)
            for b in r:
                pts = [(sx, sy)]
                if dummies is not None:
                    for d in dummies[: layer[b] - la - 1]:
                        lyr = vlayer[d]
                        dxv = xs[d]
                        top = layer_top[lyr]
                        pts.append((dxv, top))
                        pts.append((dxv, top + layer_h[lyr]))
                pts.append((xs[b], box_y[b]))
                self._emit(routes, a, b, pairs[(a, b)], tuple(pts), False, kinds)
        # stubs: short ticks above the consumer, spread over its top edge
        stubs_into: dict[int, list[int]] = {}
        for a, b in stub_pairs:
            stubs_into.setdefault(b, []).append(a)
        sl = opt.stub_length
        for b, srcs in stubs_into.items():
            k = len(srcs)
            for i, a in enumerate(srcs):
                x = box_x[b] + width[b] * (i + 1) / (k + 1)
                yb = box_y[b]
                self._emit(routes, a, b, pairs[(a, b)], ((x, yb - sl), (x, yb)), True, kinds)

        frames = self._frames(boxes) if frames_on else []
        total_w = max([xs[v] + width[v] * 0.5 for v in range(nv)], default=0.0)
        total_h = (layer_top[-1] + layer_h[-1]) if n_layers else 0.0
        for f in frames:
            total_w = max(total_w, f.x + f.w)
            total_h = max(total_h, f.y + f.h)
        global last_stats
        last_stats = LayoutStats(n, nv - n, n_layers, len(stub_pairs))
        return Layout(boxes=boxes, routes=routes, frames=frames, width=total_w, height=total_h)

    def _emit(self, routes, a, b, tensors, pts, stub, kinds) -> None:
        keys = self.it.keys
        if kinds[a] == "group" or kinds[b] == "group":
            routes.append(Route(keys[a], keys[b], tensors[0], pts, stub, len(tensors)))
        else:
            for t in tensors:
                routes.append(Route(keys[a], keys[b], t, pts, stub, 1))

    @staticmethod
    def _sort_layer_grouped(lst: list[int], bary: dict[int, float], container: list[Scope]) -> list[int]:
        # keep each group's members contiguous: a group sorts among its siblings by its members' mean
        sums: dict[Scope, list[float]] = {}
        for v in lst:
            c = container[v]
            b = bary[v]
            for k in range(1, len(c) + 1):
                p = c[:k]
                acc = sums.get(p)
                if acc is None:
                    sums[p] = [b, 1.0]
                else:
                    acc[0] += b
                    acc[1] += 1.0
        if not sums:
            return sorted(lst, key=bary.__getitem__)
        means = {p: s / c for p, (s, c) in sums.items()}

        def key(v: int):
            c = container[v]
            return [(means[c[:k]], c[k - 1]) for k in range(1, len(c) + 1)] + [(bary[v], "")]

        return sorted(lst, key=key)

    def _frames(self, boxes: list[Box]) -> list[Frame]:
        it, opt = self.it, self.opt
        bounds: dict[Scope, list[float]] = {}
        for v, b in enumerate(boxes):
            c = it.container[v]
            if not c:
                continue
            x0, y0, x1, y1 = b.x, b.y, b.x + b.w, b.y + b.h
            acc = bounds.get(c)
            if acc is None:
                bounds[c] = [x0, y0, x1, y1]
            else:
                if x0 < acc[0]:
                    acc[0] = x0
                if y0 < acc[1]:
                    acc[1] = y0
                if x1 > acc[2]:
                    acc[2] = x1
                if y1 > acc[3]:
                    acc[3] = y1
        # make sure every ancestor of a framed scope has an entry, then grow outward from the deepest
        for c in list(bounds):
            for k in range(1, len(c)):
                bounds.setdefault(c[:k], [float("inf"), float("inf"), float("-inf"), float("-inf")])
        pad = opt.frame_padding
        top = opt.frame_label_height
        frames: list[Frame] = []
        for c in sorted(bounds, key=len, reverse=True):
            x0, y0, x1, y1 = bounds[c]
            fx, fy, fx1, fy1 = x0 - pad, y0 - pad - top, x1 + pad, y1 + pad
            frames.append(Frame(group_key(c), c, fx, fy, fx1 - fx, fy1 - fy, c[-1]))
            if len(c) > 1:
                acc = bounds[c[:-1]]
                acc[0] = min(acc[0], fx)
                acc[1] = min(acc[1], fy)
                acc[2] = max(acc[2], fx1)
                acc[3] = max(acc[3], fy1)
        frames.reverse()  # outermost first, so a painter draws inner frames on top
        return frames


def _isotonic_place(targets: list[float], weights: list[float], seps: list[float]) -> list[float]:
    """Positions closest (weighted least squares) to targets that keep the order and the minimum gaps."""
    # x_i >= x_{i-1} + seps[i]  <=>  y_i = x_i - off_i is non-decreasing; pool adjacent violators on y
    n = len(targets)
    offs = [0.0] * n
    o = 0.0
    for i in range(1, n):
        o += seps[i]
        offs[i] = o
    # blocks as parallel stacks: weight sum, weighted sum, count
    bw: list[float] = []
    bs: list[float] = []
    bc: list[int] = []
    for i in range(n):
        w = weights[i]
        s = w * (targets[i] - offs[i])
        c = 1
        while bw and bs[-1] * w >= s * bw[-1]:
            w += bw.pop()
            s += bs.pop()
            c += bc.pop()
        bw.append(w)
        bs.append(s)
        bc.append(c)
    out = [0.0] * n
    i = 0
    for w, s, c in zip(bw, bs, bc, strict=True):
        m = s / w
        for _ in range(c):
            out[i] = m + offs[i]
            i += 1
    return out
