"""Layered (Sugiyama-style) layout of a GraphDocument into boxes, edge routes and group frames.

Flat (expanded=None): every visible node, graph input and output is a box in one layered drawing (the
engine in layering.py: nodes pulled down to just above their first consumer, one dummy chain per source
for long edges, barycenter ordering, placement by weighted averaging, stubs for high fan-out sources).

Collapsed (expanded = the open scopes): a scope that is not open is one group box; each open scope is
laid out on its own, with a port on its top border for each value entering it and on its bottom border
for each value leaving it, and drawn as one big vertex in its parent. So frames nest and never overlap
other boxes, and a group's layout is cached per (scope, open scopes inside it): opening a group lays out
that group and its ancestors again, the other groups come from the cache. Routes are stitched through
the ports of every frame they cross.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseview.graph.document import GraphDocument
from fuseview.graph.geometry import (
    Box,
    Frame,
    Layout,
    Route,
    group_key,
)
from fuseview.graph.groups import Scope, ScopeGroup, graph_memo, group_scopes, initial_expansion, scope_tree
from fuseview.graph.layering import Placement, place_graph
from fuseview.graph.layout_items import LayoutItems, LayoutOptions, LayoutStats
from fuseview.graph.scopes import common_prefix

__all__ = [
    "LayoutOptions",
    "LayoutStats",
    "ScopeGroup",
    "group_scopes",
    "initial_expansion",
    "layout_graph",
    "scope_tree",
]


def layout_graph(
    graph: GraphDocument,
    expanded: frozenset[tuple[str, ...]] | None = None,
    options: LayoutOptions | None = None,
    stats: LayoutStats | None = None,
) -> Layout:
    """Lay out the graph: flat when expanded is None, else with every scope not in expanded collapsed.

    stats, when given, receives the sizes of the layout's internals (the benchmark reads them).
    """
    opt = options or LayoutOptions()
    items = LayoutItems(graph, expanded, opt)
    stats = stats if stats is not None else LayoutStats()
    if expanded is None:
        return _layout_flat(items, opt, stats)
    return _layout_nested(items, graph, expanded, opt, stats)


def _engine_args(opt: LayoutOptions) -> dict:
    return {
        "fanout_stub_threshold": opt.fanout_stub_threshold,
        "layer_gap": opt.layer_gap,
        "node_gap": opt.node_gap,
        "dummy_width": opt.dummy_width,
        "ordering_sweeps": opt.ordering_sweeps,
        "placement_passes": opt.placement_passes,
    }


def _emit(routes: list[Route], it: LayoutItems, a: int, b: int, tensors: list[str], pts, stub: bool) -> None:
    # edges touching a collapsed group are one route per item pair; node to node, one per tensor
    keys = it.keys
    if it.kinds[a] == "group" or it.kinds[b] == "group":
        routes.append(Route(keys[a], keys[b], tensors[0], pts, stub, len(tensors)))
    else:
        for t in tensors:
            routes.append(Route(keys[a], keys[b], t, pts, stub, 1))


def _stub_routes(
    routes: list[Route], it: LayoutItems, stubs: dict[tuple[int, int], list[str]], box_x, box_y,
    opt: LayoutOptions,
) -> None:
    """Short ticks above each consumer, spread over its top edge; stubs maps (src, dst) to its tensors."""
    into: dict[int, list[int]] = {}
    for a, b in stubs:
        into.setdefault(b, []).append(a)
    sl = opt.stub_length
    for b, srcs in into.items():
        k = len(srcs)
        for i, a in enumerate(srcs):
            x = box_x[b] + it.widths[b] * (i + 1) / (k + 1)
            yb = box_y[b]
            _emit(routes, it, a, b, stubs[(a, b)], ((x, yb - sl), (x, yb)), True)


def _boxes(it: LayoutItems, box_x: list[float], box_y: list[float]) -> list[Box]:
    return [
        Box(
            it.keys[v],
            it.kinds[v],
            box_x[v],
            box_y[v],
            it.widths[v],
            it.heights[v],
            it.labels[v],
            it.sublabels[v],
            it.node_of[v],
            it.scopes[v],
        )
        for v in range(it.n)
    ]


# ---------------------------------------------------------------------------------------------------------
# Flat: one layered drawing of every box


def _layout_flat(it: LayoutItems, opt: LayoutOptions, stats: LayoutStats) -> Layout:
    n = it.n
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in it.pairs:
        succ[a].append(b)
    pl = place_graph(succ, it.order_key, it.widths, it.heights, **_engine_args(opt))
    nv = len(pl.cx)
    widths = it.widths
    min_x = min([pl.cx[v] - widths[v] * 0.5 for v in range(n)] + pl.cx[n:], default=0.0)
    if min_x != 0.0:
        pl.cx = [c - min_x for c in pl.cx]
    cx = pl.cx
    heights = it.heights
    box_x = [cx[v] - widths[v] * 0.5 for v in range(n)]
    box_y = [pl.box_y(v, heights[v]) for v in range(n)]
    routes: list[Route] = []
    pairs = it.pairs
    for a in pl.topo:
        r = pl.routed[a]
        if not r:
            continue
        start = (cx[a], box_y[a] + heights[a])
        for b in r:
            pts = [start]
            pts.extend(pl.chain_points(a, b))
            pts.append((cx[b], box_y[b]))
            _emit(routes, it, a, b, pairs[(a, b)], tuple(pts), False)
    _stub_routes(routes, it, {(a, b): pairs[(a, b)] for a, b in pl.stubs}, box_x, box_y, opt)
    width = max([box_x[v] + widths[v] for v in range(n)] + [cx[v] for v in range(n, nv)], default=0.0)
    height = (pl.layer_top[-1] + pl.layer_h[-1]) if pl.layer_top else 0.0
    stats.items, stats.dummies, stats.layers, stats.stubs = n, pl.dummies, len(pl.layer_top), len(pl.stubs)
    return Layout(boxes=_boxes(it, box_x, box_y), routes=routes, frames=[], width=width, height=height)


# ---------------------------------------------------------------------------------------------------------
# Nested: each open group is laid out on its own (cached) and drawn as one big vertex in its parent, with a
# port on its top border for every value that enters it and on its bottom border for every value that leaves.

VKey = tuple  # ('box', key) | ('block', scope) | ('in', tensor) | ('out', tensor)


@dataclass
class _Block:
    """One open group laid out in its own coordinates (frame top-left at 0, 0)."""

    w: float
    h: float
    pos: dict  # vkey -> (x, y) top-left of boxes and blocks; port x for ports
    layer: dict  # vkey -> layer
    chains: dict  # source vkey -> [(x, top, bottom)] per layer below the source
    stubs: set  # (src vkey, dst vkey) drawn as stubs at this level
    dummies: int
    layers: int


TensorPath = list[tuple[Scope, VKey, VKey]]  # the segments one tensor takes through the open groups


def _layout_nested(
    it: LayoutItems, graph: GraphDocument, expanded: frozenset[Scope], opt: LayoutOptions, stats: LayoutStats
) -> Layout:
    tree = scope_tree(graph)
    open_scopes = [s for s in tree if all(s[:k] in expanded for k in range(1, len(s) + 1))]
    level_edges, paths = _level_edges(it, open_scopes)
    blocks = _blocks(it, graph, expanded, tree, open_scopes, level_edges, opt)
    origin, frames = _origins(tree, open_scopes, blocks)
    box_x, box_y = _box_positions(it, origin, blocks)
    placed = _Placed(it, blocks, origin, {k: v for v, k in enumerate(it.keys)})
    routes: list[Route] = []
    stub_pairs: dict[tuple[int, int], list[str]] = {}
    for (a, b), tensors in it.pairs.items():
        group_pair = it.kinds[a] == "group" or it.kinds[b] == "group"
        for t in tensors[:1] if group_pair else tensors:
            pts = placed.route_points(paths[(a, b, t)], t)
            if pts is None:
                # a group pair stands for all its tensors in one route
                stub_pairs.setdefault((a, b), []).extend(tensors if group_pair else [t])
                continue
            count = len(tensors) if group_pair else 1
            routes.append(Route(it.keys[a], it.keys[b], t, tuple(pts), False, count))
    _stub_routes(routes, it, stub_pairs, box_x, box_y, opt)

    root = blocks[()]
    stats.items, stats.stubs = it.n, len(stub_pairs)
    stats.dummies = sum(b.dummies for b in blocks.values())
    stats.layers = sum(b.layers for b in blocks.values())
    return Layout(boxes=_boxes(it, box_x, box_y), routes=routes, frames=frames, width=root.w, height=root.h)


def _vertex_at(it: LayoutItems, level: Scope, item: int) -> VKey:
    """The item's vertex in the open group `level`: its own box, or the open child group holding it."""
    c = it.container[item]
    if len(c) == len(level):
        return ("box", it.keys[item])
    return ("block", c[: len(level) + 1])


def _level_edges(
    it: LayoutItems, open_scopes: list[Scope]
) -> tuple[dict[Scope, dict[tuple[VKey, VKey], None]], dict[tuple[int, int, str], TensorPath]]:
    """Every tensor between two shown items, as the chain of segments it takes through the open groups:
    the edges of each open group, and each tensor's path (up to the common group, then down)."""
    container = it.container
    level_edges: dict[Scope, dict[tuple[VKey, VKey], None]] = {s: {} for s in open_scopes}
    paths: dict[tuple[int, int, str], TensorPath] = {}
    for (a, b), tensors in it.pairs.items():
        ca, cb = container[a], container[b]
        lca = common_prefix(ca, cb)
        for t in tensors:
            path = []
            x = ca
            while len(x) > len(lca):
                seg = (_vertex_at(it, x, a), ("out", t))
                level_edges[x][seg] = None
                path.append((x, *seg))
                x = x[:-1]
            seg = (_vertex_at(it, lca, a), _vertex_at(it, lca, b))
            level_edges[lca][seg] = None
            path.append((lca, *seg))
            for k in range(len(lca) + 1, len(cb) + 1):
                y = cb[:k]
                seg = (("in", t), _vertex_at(it, y, b))
                level_edges[y][seg] = None
                path.append((y, *seg))
            paths[(a, b, t)] = path
    return level_edges, paths


def _members(it: LayoutItems, open_scopes: list[Scope]) -> tuple[dict[Scope, list[int]], dict[Scope, int]]:
    """The boxes that sit directly in each open group, and each scope's smallest order key."""
    members: dict[Scope, list[int]] = {s: [] for s in open_scopes}
    first: dict[Scope, int] = {}
    for v in range(it.n):
        c = it.container[v]
        members[c].append(v)
        ok = it.order_key[v]
        for k in range(len(c) + 1):
            p = c[:k]
            if ok < first.get(p, ok + 1):
                first[p] = ok
    return members, first


def _blocks(
    it: LayoutItems,
    graph: GraphDocument,
    expanded: frozenset[Scope],
    tree: dict[Scope, ScopeGroup],
    open_scopes: list[Scope],
    level_edges: dict[Scope, dict[tuple[VKey, VKey], None]],
    opt: LayoutOptions,
) -> dict[Scope, _Block]:
    """Each open group laid out, innermost first; from the graph's cache when its open scopes are the same."""
    members, first = _members(it, open_scopes)
    open_set = set(open_scopes)
    cache: dict = graph_memo(graph).setdefault("blocks", {})  # type: ignore[assignment]
    if len(cache) > 4096:
        cache.clear()
    blocks: dict[Scope, _Block] = {}
    for scope in sorted(open_scopes, key=len, reverse=True):
        inner = frozenset(s for s in expanded if len(s) > len(scope) and s[: len(scope)] == scope)
        ck = (scope, inner, opt)
        blk = cache.get(ck)
        if blk is None:
            blk = _layout_block(
                scope, it, tree, open_set, members[scope], level_edges[scope], blocks, first, opt
            )
            cache[ck] = blk
        blocks[scope] = blk
    return blocks


def _origins(
    tree: dict[Scope, ScopeGroup], open_scopes: list[Scope], blocks: dict[Scope, _Block]
) -> tuple[dict[Scope, tuple[float, float]], list[Frame]]:
    """Each open group's absolute top-left (outermost first) and the frames of the open groups."""
    open_set = set(open_scopes)
    origin: dict[Scope, tuple[float, float]] = {(): (0.0, 0.0)}
    frames: list[Frame] = []
    for scope in sorted(open_scopes, key=len):
        ox, oy = origin[scope]
        blk = blocks[scope]
        if scope:
            frames.append(Frame(group_key(scope), scope, ox, oy, blk.w, blk.h, scope[-1]))
        for child in tree[scope].children:
            if child in open_set:
                x, y = blk.pos[("block", child)]
                origin[child] = (ox + x, oy + y)
    return origin, frames


def _box_positions(
    it: LayoutItems, origin: dict[Scope, tuple[float, float]], blocks: dict[Scope, _Block]
) -> tuple[list[float], list[float]]:
    """Every box's absolute top-left."""
    box_x = [0.0] * it.n
    box_y = [0.0] * it.n
    for v in range(it.n):
        ox, oy = origin[it.container[v]]
        x, y = blocks[it.container[v]].pos[("box", it.keys[v])]
        box_x[v] = ox + x
        box_y[v] = oy + y
    return box_x, box_y


@dataclass
class _Placed:
    """The open groups laid out and placed: where a route meets a box, a group's port or a frame."""

    it: LayoutItems
    blocks: dict[Scope, _Block]
    origin: dict[Scope, tuple[float, float]]
    index_of: dict[str, int]

    def attach(self, level: Scope, vk: VKey, t: str, as_src: bool) -> tuple[float, float]:
        """The point where tensor t leaves (as_src) or enters vertex vk of the open group `level`."""
        ox, oy = self.origin[level]
        blk = self.blocks[level]
        kind = vk[0]
        if kind == "box":
            x, y = blk.pos[vk]
            v = self.index_of[vk[1]]
            return (ox + x + self.it.widths[v] * 0.5, oy + y + (self.it.heights[v] if as_src else 0.0))
        if kind == "block":
            sub = self.blocks[vk[1]]
            x, y = blk.pos[vk]
            px = sub.pos[("out", t) if as_src else ("in", t)][0]
            return (ox + x + px, oy + y + (sub.h if as_src else 0.0))
        px = blk.pos[vk][0]
        return (ox + px, oy + (0.0 if kind == "in" else blk.h))

    def route_points(self, path: TensorPath, t: str) -> list[tuple[float, float]] | None:
        """The polyline of tensor t along its path, stitched through the ports; None where it is a stub."""
        pts: list[tuple[float, float]] = []
        for level, s, d in path:
            blk = self.blocks[level]
            if (s, d) in blk.stubs:
                return None
            p0 = self.attach(level, s, t, True)
            if not pts or pts[-1] != p0:
                pts.append(p0)
            ox, oy = self.origin[level]
            ls, ld = blk.layer[s], blk.layer[d]
            ch = blk.chains.get(s)
            if ch:
                for x, top, bottom in ch[: ld - ls - 1]:
                    pts.append((ox + x, oy + top))
                    pts.append((ox + x, oy + bottom))
            pts.append(self.attach(level, d, t, False))
        return pts


@dataclass
class _Vertices:
    """The vertices of one open group, as the columns place_graph takes."""

    vkeys: list[VKey]
    widths: list[float]
    heights: list[float]
    order: list[int]
    pin_top: list[bool]
    pin_bottom: list[bool]

    def add(self, vk: VKey, w: float, h: float, order: int, top: bool, bottom: bool) -> None:
        """One more vertex."""
        self.vkeys.append(vk)
        self.widths.append(w)
        self.heights.append(h)
        self.order.append(order)
        self.pin_top.append(top)
        self.pin_bottom.append(bottom)


def _ports(edges: dict[tuple[VKey, VKey], None]) -> tuple[dict[str, None], dict[str, None]]:
    """The tensors entering the group (a port on its top border) and leaving it (its bottom), in order."""
    ports_in: dict[str, None] = {}
    ports_out: dict[str, None] = {}
    for s, d in edges:
        if s[0] == "in":
            ports_in[s[1]] = None
        if d[0] == "out":
            ports_out[d[1]] = None
    return ports_in, ports_out


def _layout_block(
    scope: Scope,
    it: LayoutItems,
    tree: dict[Scope, ScopeGroup],
    open_set: set[Scope],
    members: list[int],
    edges: dict[tuple[VKey, VKey], None],
    blocks: dict[Scope, _Block],
    first: dict[Scope, int],
    opt: LayoutOptions,
) -> _Block:
    """Lay out one open group: its boxes, its open children as big vertices, and its ports."""
    vs = _Vertices([], [], [], [], [], [])
    for v in members:
        vs.add(("box", it.keys[v]), it.widths[v], it.heights[v], it.order_key[v],
               it.kinds[v] == "input", it.kinds[v] == "output")
    for child in tree[scope].children:
        if child in open_set:
            sub = blocks[child]
            vs.add(("block", child), sub.w, sub.h, first.get(child, 0), False, False)
    ports_in, ports_out = _ports(edges)
    big = 1 << 40
    for k, t in enumerate(ports_in):
        vs.add(("in", t), opt.dummy_width, 0.0, -big + k, True, False)
    for k, t in enumerate(ports_out):
        vs.add(("out", t), opt.dummy_width, 0.0, big + k, False, True)
    index = {vk: i for i, vk in enumerate(vs.vkeys)}
    succ: list[list[int]] = [[] for _ in vs.vkeys]
    for s, d in edges:
        succ[index[s]].append(index[d])
    framed = bool(scope)
    pl = place_graph(
        succ,
        vs.order,
        vs.widths,
        vs.heights,
        pin_top=vs.pin_top,
        pin_bottom=vs.pin_bottom,
        reserve_top=framed,
        **_engine_args(opt),
    )
    first_out = index[("out", next(iter(ports_out)))] if ports_out else None
    return _placed_block(pl, vs, first_out, opt.frame_padding if framed else 0.0)


def _placed_block(pl: Placement, vs: _Vertices, first_out: int | None, pad: float) -> _Block:
    """The block from the group's placement: shifted right of its left padding, as tall as its bottom
    ports (or its content and padding), with the long edges' dummy chains."""
    vkeys, widths, heights = vs.vkeys, vs.widths, vs.heights
    n = len(vkeys)
    cx = pl.cx
    lefts = [cx[i] - widths[i] * 0.5 for i in range(n)] + cx[n:]
    rights = [cx[i] + widths[i] * 0.5 for i in range(n)] + cx[n:]
    shift = pad - min(lefts, default=0.0)
    w = max(rights, default=0.0) + shift + pad
    pos: dict = {}
    layer: dict = {}
    content_bottom = 0.0
    for i, vk in enumerate(vkeys):
        layer[vk] = pl.layer[i]
        if vk[0] in ("in", "out"):
            pos[vk] = (cx[i] + shift, 0.0)
        else:
            y = pl.box_y(i, heights[i])
            pos[vk] = (cx[i] - widths[i] * 0.5 + shift, y)
            content_bottom = max(content_bottom, y + heights[i])
    if first_out is not None:
        h = pl.layer_top[pl.layer[first_out]]
    else:
        h = content_bottom + pad
    chains = {}
    for a, dummies in pl.chain.items():
        la = pl.layer[a]
        chains[vkeys[a]] = [
            (cx[d] + shift, pl.layer_top[la + 1 + k], pl.layer_top[la + 1 + k] + pl.layer_h[la + 1 + k])
            for k, d in enumerate(dummies)
        ]
    stubs = {(vkeys[a], vkeys[b]) for a, b in pl.stubs}
    return _Block(w, h, pos, layer, chains, stubs, pl.dummies, len(pl.layer_top))
