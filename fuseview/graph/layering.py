"""The Sugiyama engine over abstract vertices: layers, dummy chains, order within layers, x/y positions.

Vertices are 0..n-1 with a width, a height and an order key (file order, used to break ties and cycles).
Long edges get one chain of dummy vertices per source (shared by all its long edges), so a value used
far below costs one vertex per layer it crosses, not one per consumer. Sources with many consumers
(at least `fanout_stub_threshold`) are not routed beyond the next layer: those edges become stubs.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass


@dataclass
class Placement:
    """Where the engine put every vertex, and how each routed edge runs."""

    layer: list[int]  # per vertex
    cx: list[float]  # x centre per vertex (dummies included, index >= n)
    layer_top: list[float]
    layer_h: list[float]
    routed: list[list[int]]  # per source: consumers reached by a drawn edge
    chain: dict[int, list[int]]  # source -> its dummy vertices, one per layer below it
    stubs: list[tuple[int, int]]  # edges drawn as stubs (high fan-out, or closing a cycle)
    topo: list[int]
    dummies: int

    def box_y(self, v: int, h: float) -> float:
        """Top of a vertex of height h, centred in its layer."""
        lyr = self.layer[v]
        return self.layer_top[lyr] + (self.layer_h[lyr] - h) * 0.5

    def chain_points(self, a: int, b: int) -> list[tuple[float, float]]:
        """Bend points of the routed edge a -> b through a's dummy chain (top and bottom of each layer)."""
        dummies = self.chain.get(a)
        if dummies is None:
            return []
        la = self.layer[a]
        pts = []
        top, lh, cx = self.layer_top, self.layer_h, self.cx
        for k, d in enumerate(dummies[: self.layer[b] - la - 1]):
            lyr = la + 1 + k
            x = cx[d]
            pts.append((x, top[lyr]))
            pts.append((x, top[lyr] + lh[lyr]))
        return pts


def place_graph(
    succ: list[list[int]],
    order_key: list[int],
    width: list[float],
    height: list[float],
    *,
    pin_top: list[bool] | None = None,
    pin_bottom: list[bool] | None = None,
    reserve_top: bool = False,
    fanout_stub_threshold: int = 8,
    layer_gap: float = 30.0,
    node_gap: float = 18.0,
    dummy_width: float = 6.0,
    ordering_sweeps: int = 4,
    placement_passes: int = 4,
) -> Placement:
    """Layer, order and place a directed graph given as successor lists (cycles are tolerated).

    pin_top vertices stay in layer 0 and pin_bottom vertices go to a last layer of their own;
    reserve_top keeps layer 0 for the pinned-top vertices alone."""
    n = len(succ)
    topo, pos = _topological_order(succ, order_key)
    fwd, back = _split_back_edges(succ, pos)
    layer = _assign_layers(topo, fwd, pin_top, pin_bottom, reserve_top)
    n_layers = (max(layer) + 1) if n else 0
    if reserve_top and n_layers == 0:
        n_layers = 1
    routed, stubs = _route(succ, fwd, back, pos, layer, fanout_stub_threshold)
    g = _with_dummies(topo, layer, routed, n_layers, list(width), dummy_width)
    _order_layers(g, n_layers, ordering_sweeps)
    cx = _place_x(g, n_layers, node_gap, placement_passes)
    layer_top, layer_h = _place_y(layer, height, n_layers, layer_gap)
    return Placement(layer, cx, layer_top, layer_h, routed, g.chain, stubs, topo, g.nv - n)


@dataclass
class _Layered:
    """The vertices with their dummies: per layer in order, widths, and the edges up and down."""

    layers: list[list[int]]
    width: list[float]
    is_dummy: list[bool]
    up: list[list[int]]
    down: list[list[int]]
    chain: dict[int, list[int]]
    nv: int


def _topological_order(succ: list[list[int]], order_key: list[int]) -> tuple[list[int], list[int]]:
    """(topo, pos): the vertices in a topological order led by order_key (a cycle is broken at its
    lowest-keyed vertex), and each vertex's position in it."""
    n = len(succ)
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
    return topo, pos


def _split_back_edges(succ: list[list[int]], pos: list[int]) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """(forward successors, back edges): the edges that close a cycle are set aside, drawn as stubs."""
    fwd: list[list[int]] = [[] for _ in range(len(succ))]
    back: list[tuple[int, int]] = []
    for a in range(len(succ)):
        pa = pos[a]
        for b in succ[a]:
            if pos[b] > pa:
                fwd[a].append(b)
            else:
                back.append((a, b))
    return fwd, back


def _assign_layers(topo: list[int], fwd: list[list[int]], pin_top: list[bool] | None,
                   pin_bottom: list[bool] | None, reserve_top: bool) -> list[int]:
    """Longest path from the top, then every vertex pulled down to just above its first consumer."""
    n = len(fwd)
    layer = [0] * n
    for v in topo:
        lv = layer[v]
        for b in fwd[v]:
            if layer[b] <= lv:
                layer[b] = lv + 1
    for v in reversed(topo):
        f = fwd[v]
        if f and not (pin_top is not None and pin_top[v]):
            m = min([layer[b] for b in f]) - 1
            if m > layer[v]:
                layer[v] = m
    if reserve_top and pin_top is not None:
        for v in range(n):
            if not pin_top[v]:
                layer[v] += 1
    if pin_bottom is not None and n:
        bottom = max([layer[v] for v in range(n) if not pin_bottom[v]], default=-1) + 1
        for v in range(n):
            if pin_bottom[v]:
                layer[v] = bottom
    return layer


def _route(succ: list[list[int]], fwd: list[list[int]], back: list[tuple[int, int]], pos: list[int],
           layer: list[int], fanout_stub_threshold: int) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """(routed, stubs): high fan-out sources keep only their hops to the very next layer."""
    n = len(succ)
    stubs = sorted(back, key=lambda p: (pos[p[1]], pos[p[0]]))
    routed: list[list[int]] = [[] for _ in range(n)]
    for a in range(n):
        f = fwd[a]
        if not f:
            continue
        if len(succ[a]) >= fanout_stub_threshold:
            la = layer[a] + 1
            for b in f:
                if layer[b] == la:
                    routed[a].append(b)
                else:
                    stubs.append((a, b))
        else:
            routed[a] = f
    return routed, stubs


def _with_dummies(topo: list[int], layer: list[int], routed: list[list[int]], n_layers: int,
                  width: list[float], dummy_width: float) -> _Layered:
    """The given vertices, then one chain of dummies per source down to its last routed consumer."""
    n = len(layer)
    layers: list[list[int]] = [[] for _ in range(n_layers)]
    for v in topo:
        layers[layer[v]].append(v)
    is_dummy = [False] * n
    up: list[list[int]] = [[] for _ in range(n)]
    down: list[list[int]] = [[] for _ in range(n)]
    chain: dict[int, list[int]] = {}
    nv = n
    for a in topo:
        r = routed[a]
        if not r:
            continue
        la = layer[a]
        deepest = max([layer[b] for b in r])
        if deepest > la + 1:
            prev = a
            dummies = []
            for lyr in range(la + 1, deepest):
                d = nv
                nv += 1
                width.append(dummy_width)
                is_dummy.append(True)
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
    return _Layered(layers, width, is_dummy, up, down, chain, nv)


def _order_layers(g: _Layered, n_layers: int, ordering_sweeps: int) -> None:
    """Barycenter sweeps on positions normalised to [0, 1] per layer (g.layers reordered in place)."""
    layers, up, down = g.layers, g.up, g.down
    rank = [0.0] * g.nv
    for lst in layers:
        inv = 1.0 / (len(lst) or 1)
        for i, v in enumerate(lst):
            rank[v] = (i + 0.5) * inv
    for _ in range(ordering_sweeps):
        for downward in (True, False):
            rng = range(1, n_layers) if downward else range(n_layers - 2, -1, -1)
            nbrs = up if downward else down
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
                lst = sorted(lst, key=bary.__getitem__)
                layers[lyr] = lst
                inv = 1.0 / len(lst)
                for i, v in enumerate(lst):
                    rank[v] = (i + 0.5) * inv


_SETTLED = 1e-4  # px: a placement round that moved no vertex further than this is not repeated


def _packed_x(g: _Layered, node_gap: float) -> tuple[list[float], list[list[float]]]:
    """Each layer's vertices packed left to right at their gaps: (x of every vertex, each layer's gaps)."""
    width, is_dummy = g.width, g.is_dummy
    cx = [0.0] * g.nv
    half_gap = node_gap * 0.5
    sep_cache: list[list[float]] = []
    for lst in g.layers:
        seps = [0.0]
        x = 0.0
        prev = -1
        for v in lst:
            if prev >= 0:
                s = (width[prev] + width[v]) * 0.5 + (half_gap if is_dummy[prev] or is_dummy[v] else node_gap)
                seps.append(s)
                x += s
            cx[v] = x
            prev = v
        sep_cache.append(seps)
    return cx, sep_cache


def _place_x(g: _Layered, n_layers: int, node_gap: float, placement_passes: int) -> list[float]:
    """Horizontal placement: each vertex pulled towards its neighbours, keeping order and gaps."""
    layers, is_dummy, up, down = g.layers, g.is_dummy, g.up, g.down
    cx, sep_cache = _packed_x(g, node_gap)
    # long edges should run straight: dummies are stiff and pull hard on each other
    weight_v = [4.0 if d else 1.0 for d in is_dummy]

    def place(lyr: int, dummy_up: bool, dummy_down: bool) -> float:
        # boxes are pulled by both neighbours; dummies by the side the sweep comes from, or not at all.
        # Returns how far the layer's vertices moved, at most.
        lst = layers[lyr]
        targets = []
        weights = []
        for v in lst:
            s = 0.0
            wsum = 0.0
            dv = is_dummy[v]
            if dv and not (dummy_up or dummy_down):
                targets.append(cx[v])
                weights.append(1e6)  # frozen
                continue
            if not dv or dummy_up:
                for u in up[v]:
                    w = (8.0 if is_dummy[u] else 2.0) if dv else (2.0 if is_dummy[u] else 1.0)
                    s += w * cx[u]
                    wsum += w
            if not dv or dummy_down:
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
        # a layer of one vertex has no gap to keep: it goes to its target (a 50,000-node chain is all such)
        xs = targets if len(lst) == 1 else isotonic_place(targets, weights, sep_cache[lyr])
        moved = 0.0
        for v, x in zip(lst, xs, strict=True):
            d = abs(x - cx[v])
            if d > moved:
                moved = d
            cx[v] = x
        return moved

    # Sweeps down and up. Boxes take the mean of both neighbours (one-sided, median-style sweeps let a
    # GPT-2's residual stream drift sideways block after block); dummies follow the sweep direction only
    # (pulled from both sides, long edges wiggle around the boxes they pass). A last round settles the
    # boxes with the long edges held still.
    # A round that moved nothing (by more than _SETTLED px) would be repeated as it was: the rest of
    # its kind is skipped (a chain settles after one round of each; the result is the same to 1/1000 px).
    for _ in range(placement_passes):
        moved = 0.0
        for lyr in range(1, n_layers):
            moved = max(moved, place(lyr, True, False))
        for lyr in range(n_layers - 2, -1, -1):
            moved = max(moved, place(lyr, False, True))
        if moved <= _SETTLED:
            break
    moved = 0.0
    for lyr in range(n_layers):
        moved = max(moved, place(lyr, False, False))
    if moved > _SETTLED:
        for lyr in range(n_layers - 1, -1, -1):
            place(lyr, False, False)
    return cx


def _place_y(layer: list[int], height: list[float], n_layers: int, layer_gap: float
             ) -> tuple[list[float], list[float]]:
    """(layer tops, layer heights): each layer as tall as its tallest vertex."""
    layer_h = [0.0] * n_layers
    for v in range(len(layer)):
        h = height[v]
        if h > layer_h[layer[v]]:
            layer_h[layer[v]] = h
    layer_top = [0.0] * n_layers
    y = 0.0
    for lyr in range(n_layers):
        layer_top[lyr] = y
        y += layer_h[lyr] + layer_gap
    return layer_top, layer_h


def isotonic_place(targets: list[float], weights: list[float], seps: list[float]) -> list[float]:
    """Positions closest (weighted least squares) to targets that keep the order and the minimum gaps."""
    # x_i >= x_{i-1} + seps[i]  <=>  y_i = x_i - off_i is non-decreasing: pool adjacent violators on y
    n = len(targets)
    offs = [0.0] * n
    o = 0.0
    for i in range(1, n):
        o += seps[i]
        offs[i] = o
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
