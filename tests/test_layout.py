"""Layout of real and hand-made graphs: geometric invariants, collapsing by scope, stubs, expansion."""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import pytest
from onnx import TensorProto, helper

from fuseview.errors import FuseviewError
from fuseview.graph.document import GraphDocument
from fuseview.graph.geometry import Box, Layout, group_key, input_key, node_key, output_key
from fuseview.graph.groups import forget
from fuseview.graph.layout import LayoutOptions, group_scopes, initial_expansion, layout_graph, scope_tree
from fuseview.graph.loader import document_from_model, load_document
from tests.conftest import ASSET_MODELS, backend_models, gpt2_models

EPS = 1e-6


@lru_cache(maxsize=8)
def _doc(path: Path):
    return load_document(path)


def _graphs(graph: GraphDocument, where: str = "main"):
    """The graph and every subgraph body below it (Loop/If/Scan), with a readable name."""
    yield where, graph
    for node in graph.nodes:
        for attr, sub in node.subgraphs.items():
            yield from _graphs(sub, f"{where}/{node.name}.{attr}")


def _tiny(nodes, inputs=("x",), outputs=("y",), opset=17) -> GraphDocument:
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
    )
    return document_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])).graph


def check_geometry(graph: GraphDocument, lay: Layout) -> dict[str, Box]:
    """Invariants every layout must hold; returns the boxes by key."""
    boxes = lay.box_by_key()
    assert len(boxes) == len(lay.boxes), "duplicate box keys"
    for b in lay.boxes:
        assert b.w > 0 and b.h > 0
        assert b.x >= -EPS and b.y >= -EPS
        assert b.x + b.w <= lay.width + EPS and b.y + b.h <= lay.height + EPS

    # no two boxes overlap (checked on a grid of buckets)
    cell = 200.0
    grid: dict[tuple[int, int], list[Box]] = {}
    for b in lay.boxes:
        for gx in range(int(b.x // cell), int((b.x + b.w) // cell) + 1):
            for gy in range(int(b.y // cell), int((b.y + b.h) // cell) + 1):
                grid.setdefault((gx, gy), []).append(b)
    for bucket in grid.values():
        for i, p in enumerate(bucket):
            for q in bucket[i + 1 :]:
                apart = (
                    p.x + p.w <= q.x + EPS
                    or q.x + q.w <= p.x + EPS
                    or p.y + p.h <= q.y + EPS
                    or q.y + q.h <= p.y + EPS
                )
                assert apart, f"{p.key} overlaps {q.key}"

    if not lay.frames:
        # a flat drawing: boxes sit in horizontal bands (layers) that do not overlap
        bands: dict[float, list[Box]] = {}
        for b in lay.boxes:
            bands.setdefault(round(b.y + b.h / 2, 3), []).append(b)
        prev_bottom = float("-inf")
        for centre in sorted(bands):
            row = bands[centre]
            assert min(b.y for b in row) > prev_bottom, "two layers overlap vertically"
            prev_bottom = max(b.y + b.h for b in row)
    else:
        check_frames(lay)

    for r in lay.routes:
        src, dst = boxes[r.src], boxes[r.dst]
        assert r.count >= 1
        end = r.points[-1]
        assert abs(end[1] - dst.y) < EPS, f"{r} does not end on the top of {dst.key}"
        assert dst.x - EPS <= end[0] <= dst.x + dst.w + EPS
        if r.stub:
            assert len(r.points) == 2
            assert r.points[0][1] < end[1]
            continue
        start = r.points[0]
        assert abs(start[0] - (src.x + src.w / 2)) < EPS and abs(start[1] - (src.y + src.h)) < EPS
        assert abs(end[0] - (dst.x + dst.w / 2)) < EPS
        assert dst.y > src.y + src.h, f"edge {r.src} -> {r.dst} does not go downward"
        ys = [p[1] for p in r.points]
        assert all(a <= b + EPS for a, b in zip(ys, ys[1:], strict=False)), f"{r} goes up somewhere"
    return boxes


def _inside(b, f) -> bool:
    return (
        f.x - EPS <= b.x
        and b.x + b.w <= f.x + f.w + EPS
        and f.y - EPS <= b.y
        and b.y + b.h <= f.y + f.h + EPS
    )


def _apart(b, f) -> bool:
    return (
        b.x + b.w <= f.x + EPS or f.x + f.w <= b.x + EPS or b.y + b.h <= f.y + EPS or f.y + f.h <= b.y + EPS
    )


def check_frames(lay: Layout) -> None:
    """Frames hold exactly their group's boxes and nested frames; nothing else reaches into them."""
    frames = {f.scope: f for f in lay.frames}
    assert len(frames) == len(lay.frames)
    for scope, f in frames.items():
        assert f.w > 0 and f.h > 0 and f.label == scope[-1]
        parent = frames.get(scope[:-1])
        if len(scope) > 1:
            assert parent is not None and _inside(f, parent), f"frame {scope} sticks out of its parent"
        for other, g in frames.items():
            if other != scope and other[: len(scope)] != scope and scope[: len(other)] != other:
                assert _apart(f, g), f"frames {scope} and {other} overlap"
        for b in lay.boxes:
            member = b.scope[: len(scope)] == scope and not (b.kind == "group" and b.scope == scope)
            if b.kind in ("input", "output"):
                member = False
            if member:
                assert _inside(b, f), f"{b.key} is outside the frame of {scope}"
            else:
                assert _apart(b, f), f"{b.key} reaches into the frame of {scope}"


def check_flat(graph: GraphDocument, lay: Layout) -> None:
    """A flat layout: one box per visible node, graph input and output, and a route per edge."""
    boxes = check_geometry(graph, lay)
    node_boxes = [b for b in lay.boxes if b.kind == "node"]
    assert sorted(b.node for b in node_boxes) == sorted(n.index for n in graph.visible_nodes())
    for b in node_boxes:
        assert b.key == node_key(b.node)
        assert b.label == graph.nodes[b.node].op_type and b.sublabel == graph.nodes[b.node].name
    for name in graph.inputs:
        assert boxes[input_key(name)].kind == "input"
    for name in graph.outputs:
        assert boxes[output_key(name)].kind == "output"
    assert not any(b.kind == "group" for b in lay.boxes)
    drawn = {(r.src, r.dst, r.tensor) for r in lay.routes}
    for e in graph.edges:
        if e.src != e.dst:
            assert (node_key(e.src), node_key(e.dst), e.tensor) in drawn, f"edge {e} has no route"


def check_collapsed(graph: GraphDocument, lay: Layout, expanded: frozenset) -> None:
    """Collapsed: groups stand for exactly the nodes not shown, with the right counts."""
    check_geometry(graph, lay)
    tree = scope_tree(graph)
    shown = {b.node for b in lay.boxes if b.kind == "node"}
    groups = [b for b in lay.boxes if b.kind == "group"]
    hidden = [n for n in graph.visible_nodes() if n.index not in shown]
    assert sum(tree[b.scope].count for b in groups) == len(hidden)
    assert sum(int(b.sublabel.split()[0]) for b in groups) == len(hidden)
    for b in groups:
        assert b.key == group_key(b.scope) and b.label == b.scope[-1]
        assert b.scope not in expanded and all(b.scope[:k] in expanded for k in range(len(b.scope)))
    scopes = group_scopes(graph)
    item: dict[int, str] = {}
    for n in graph.visible_nodes():
        s = scopes[n.index]
        open_ = all(s[:k] in expanded for k in range(1, len(s) + 1))
        assert (n.index in shown) == open_
        if open_:
            item[n.index] = node_key(n.index)
        else:
            item[n.index] = group_key(next(s[:k] for k in range(1, len(s) + 1) if s[:k] not in expanded))

    # every value between two different boxes is drawn once: a route per tensor, or one with a count
    expected: dict[tuple[str, str], set[str]] = {}
    for e in graph.edges:
        if item[e.src] != item[e.dst]:
            expected.setdefault((item[e.src], item[e.dst]), set()).add(e.tensor)
    for name in graph.inputs:
        for c in graph.tensors[name].consumers:
            if c in item:
                expected.setdefault((input_key(name), item[c]), set()).add(name)
    for name in graph.outputs:
        p = graph.tensors[name].producer
        if p is not None and p in item:
            expected.setdefault((item[p], output_key(name)), set()).add(name)
    drawn: dict[tuple[str, str], int] = {}
    for r in lay.routes:
        drawn[(r.src, r.dst)] = drawn.get((r.src, r.dst), 0) + r.count
    for pair, tensors in expected.items():
        assert drawn.get(pair) == len(tensors), f"{pair}: {drawn.get(pair)} drawn, {len(tensors)} tensors"
    extra = set(drawn) - set(expected)
    assert all(src.startswith("in:") for src, _ in extra), f"routes between unconnected boxes: {extra}"


# --- every real model ----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", gpt2_models(), ids=lambda p: p.name)
def test_shared_models_flat_and_collapsed(path: Path) -> None:
    g = _doc(path).graph
    check_flat(g, layout_graph(g))
    ex = initial_expansion(g, max_boxes=200)
    assert ex is not None  # every shared export has more than 200 visible nodes
    lay = layout_graph(g, ex)
    check_collapsed(g, lay, ex)
    # the top level shows the transformer blocks, not one box for the whole model
    labels = {b.label for b in lay.boxes if b.kind == "group"}
    assert {"h.0", "h.1"} <= labels


_BACKEND = [
    p
    for p in backend_models()
    if p.parent.parent.name in ("light", "simple", "pytorch-converted", "pytorch-operator")
]


@pytest.mark.parametrize("path", _BACKEND, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_backend_models(path: Path) -> None:
    try:
        doc = load_document(path)
    except FuseviewError:
        pytest.skip("the loader rejects this model")
    for _, g in _graphs(doc.graph):
        check_flat(g, layout_graph(g))
        ex = frozenset({()})
        check_collapsed(g, layout_graph(g, ex), ex)


def test_backend_models_are_there() -> None:
    assert len(_BACKEND) > 100


# --- expansion -------------------------------------------------------------------------------------------


def test_opening_a_group_shows_its_children_in_a_frame() -> None:
    g = _doc(gpt2_models()[0]).graph
    ex = initial_expansion(g, max_boxes=200)
    before = layout_graph(g, ex).box_by_key()
    target = next(b for b in before.values() if b.kind == "group" and b.label == "h.1")
    opened = ex | {target.scope}
    lay = layout_graph(g, opened)
    check_collapsed(g, lay, opened)
    boxes = lay.box_by_key()
    assert target.key not in boxes
    tree = scope_tree(g)
    group = tree[target.scope]
    for i in group.nodes:
        assert node_key(i) in boxes
    for child in group.children:
        assert group_key(child) in boxes
    frame = next(f for f in lay.frames if f.scope == target.scope)
    inside = [boxes[node_key(i)] for i in group.nodes] + [boxes[group_key(c)] for c in group.children]
    for b in inside:
        assert frame.x <= b.x and b.x + b.w <= frame.x + frame.w
        assert frame.y <= b.y and b.y + b.h <= frame.y + frame.h
    # other blocks stay collapsed
    assert group_key(target.scope[:-1] + ("h.0",)) in boxes


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_initial_expansion_small_and_big() -> None:
    small = _doc(gpt2_models()[0]).graph
    n = len(small.visible_nodes())
    assert initial_expansion(small, max_boxes=n) is None
    ex = initial_expansion(small, max_boxes=n - 1)
    assert ex is not None and () in ex
    g = _doc(ASSET_MODELS / "gpt2_96l_ts13.onnx").graph
    ex = initial_expansion(g)
    assert ex == frozenset({(), ("lm",), ("lm", "transformer")})
    lay = layout_graph(g, ex)
    blocks = {b.label for b in lay.boxes if b.kind == "group"}
    assert {f"h.{i}" for i in range(96)} <= blocks
    assert len(lay.boxes) <= 800


def test_fully_expanded_equals_flat_boxes() -> None:
    g = _doc(gpt2_models()[0]).graph
    every = frozenset(scope_tree(g))
    lay = layout_graph(g, every)
    check_geometry(g, lay)
    assert sorted(b.node for b in lay.boxes if b.kind == "node") == [n.index for n in g.visible_nodes()]
    assert lay.frames and all(f.w > 0 and f.h > 0 for f in lay.frames)


# --- hand-made graphs --------------------------------------------------------------------------------------


def test_one_node_graph() -> None:
    g = _tiny([helper.make_node("Relu", ["x"], ["y"], name="r")])
    lay = layout_graph(g)
    check_flat(g, lay)
    assert len(lay.boxes) == 3 and len(lay.routes) == 2
    assert initial_expansion(g) is None


def test_disconnected_nodes_and_no_scopes() -> None:
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="a"),
        helper.make_node("Sigmoid", ["x2"], ["y2"], name="b"),
    ]
    g = _tiny(nodes, inputs=("x", "x2"), outputs=("y", "y2"))
    check_flat(g, layout_graph(g))
    assert initial_expansion(g, max_boxes=1) is None  # nothing to collapse


def test_fanout_sources_become_stubs_and_add_no_dummies() -> None:
    # one Relu feeds a chain of 12 nodes at increasing depth: with stubs, no edge crosses layers
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="src")]
    prev = "x"
    for i in range(12):
        nodes.append(helper.make_node("Add", [prev, "r"], [f"a{i}"], name=f"add{i}"))
        prev = f"a{i}"
    g = _tiny(nodes, outputs=(prev,))
    lay = layout_graph(g)
    check_flat(g, lay)
    from_src = [r for r in lay.routes if r.src == node_key(0)]
    assert len(from_src) == 12
    assert sum(r.stub for r in from_src) >= 11  # the hop to the next layer may be a plain edge
    plain = layout_graph(g, options=LayoutOptions(fanout_stub_threshold=100))
    check_flat(g, plain)
    assert not any(r.stub for r in plain.routes)
    assert max(len(r.points) for r in plain.routes) > 2  # the long edges go through dummy positions


def test_collapsed_groups_aggregate_edges_and_survive_cycles() -> None:
    # a/n1 -> n2 (root) -> a/n3: collapsing 'a' makes a cycle a -> n2 -> a
    nodes = [
        helper.make_node("Relu", ["x"], ["t1"], name="/a/n1"),
        helper.make_node("Split", ["t1"], ["s1", "s2"], name="/a/split", axis=1, num_outputs=2),
        helper.make_node("Neg", ["s1"], ["t2"], name="n2"),
        helper.make_node("Concat", ["t2", "s2"], ["y"], name="/a/n3", axis=1),
        helper.make_node("Sum", ["s1", "s2", "y", "t2"], ["z"], name="/b/sum"),  # keeps n2 out of 'a'
    ]
    g = _tiny(nodes, outputs=("z",), opset=18)
    assert [n.scope for n in g.nodes] == [("a",), ("a",), (), ("a",), ("b",)]
    ex = frozenset({()})
    lay = layout_graph(g, ex)
    check_collapsed(g, lay, ex)
    boxes = lay.box_by_key()
    assert boxes[group_key(("a",))].sublabel == "3 nodes"
    ab = [r for r in lay.routes if r.src == group_key(("a",)) and r.dst == group_key(("b",))]
    assert len(ab) == 1 and ab[0].count == 3  # s1, s2 and y in one route
    # the cycle a -> n2 -> a is drawn, one of its edges as a stub
    assert {(r.src, r.dst) for r in lay.routes} >= {
        (group_key(("a",)), node_key(2)),
        (node_key(2), group_key(("a",))),
    }


def test_loop_body_with_outer_scope_values() -> None:
    body = helper.make_graph(
        [
            helper.make_node("Add", ["v_in", "outer"], ["v_out"], name="add"),
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="id"),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [2, 3]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [2, 3]),
        ],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["outer"], name="relu"),
        helper.make_node(
            "Constant", [], ["n"], name="n", value=helper.make_tensor("n", TensorProto.INT64, [], [3])
        ),
        helper.make_node(
            "Constant", [], ["c"], name="c", value=helper.make_tensor("c", TensorProto.BOOL, [], [1])
        ),
        helper.make_node("Loop", ["n", "c", "x"], ["y"], name="loop", body=body),
    ]
    model = helper.make_model(
        helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    doc = document_from_model(model)
    sub = doc.graph.nodes[3].subgraphs["body"]
    lay = layout_graph(sub)
    check_flat(sub, lay)
    boxes = lay.box_by_key()
    assert boxes[input_key("outer")].kind == "input"  # a value from the enclosing graph gets a box
    assert any(r.src == input_key("outer") and r.dst == node_key(0) for r in lay.routes)


def test_layout_is_deterministic() -> None:
    g = _doc(gpt2_models()[0]).graph
    assert layout_graph(g) == layout_graph(g)


def test_nodes_between_ops_of_one_scope_join_it() -> None:
    w = helper.make_tensor("w", TensorProto.FLOAT, [2, 3], [1.0] * 6)
    nodes = [
        helper.make_node("Identity", ["w"], ["w2"], name="Identity_7"),  # exporter's shared-weight alias
        helper.make_node("Add", ["x", "w2"], ["t1"], name="/blk/attn/add"),
        helper.make_node("Neg", ["t1"], ["t2"], name="/blk/neg"),  # between two ops of blk/attn
        helper.make_node("Relu", ["t2"], ["y"], name="/blk/attn/relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[w],
    )
    g = document_from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])).graph
    assert group_scopes(g) == [("blk", "attn")] * 4
    tree = scope_tree(g)
    assert tree[("blk", "attn")].count == 4 and tree[()].count == 4
    lay = layout_graph(g, frozenset({()}))
    check_collapsed(g, lay, frozenset({()}))
    assert [b.sublabel for b in lay.boxes if b.kind == "group"] == ["4 nodes"]


def _random_graph(seed: int):
    """A random DAG of Sum nodes in random nested scopes (a0/b1/...), some outputs also read inside."""
    rnd = random.Random(seed)
    names = ["x0", "x1"]
    nodes = []
    for i in range(rnd.randint(1, 60)):
        ins = [rnd.choice(names[-8:] if rnd.random() < 0.7 else names) for _ in range(rnd.randint(1, 3))]
        scope = "/".join(rnd.choice("abc") + str(rnd.randint(0, 1)) for _ in range(rnd.randint(0, 3)))
        nodes.append(helper.make_node("Sum", ins, [f"t{i}"], name=f"/{scope}/op{i}" if scope else f"op{i}"))
        names.append(f"t{i}")
    used = {t for nd in nodes for t in nd.input}
    outs = [t for t in names[2:] if t not in used]
    if rnd.random() < 0.3:
        outs.append(rnd.choice(names[2:]))
    return _tiny(nodes, inputs=("x0", "x1"), outputs=tuple(dict.fromkeys(outs))), rnd


@pytest.mark.parametrize("seed", range(40))
def test_random_graphs_in_random_expansion_states(seed: int) -> None:
    g, rnd = _random_graph(seed)
    opt = LayoutOptions(fanout_stub_threshold=rnd.choice([2, 3, 8]))
    check_flat(g, layout_graph(g, options=opt))
    scopes = list(scope_tree(g))
    for _ in range(3):
        ex = frozenset([()] + [s for s in scopes if rnd.random() < 0.5])
        check_collapsed(g, layout_graph(g, ex, opt), ex)


def test_root_is_always_open_and_cached_layouts_match_fresh_ones() -> None:
    g = _doc(gpt2_models()[0]).graph
    top = frozenset({()})
    assert layout_graph(g, frozenset()) == layout_graph(g, top)
    ex = initial_expansion(g, max_boxes=200)
    before = layout_graph(g, ex)
    block = next(b.scope for b in before.boxes if b.kind == "group" and b.label == "h.2")
    layout_graph(g, ex | {block, block + ("attn",)})  # fills the cache with other states
    assert layout_graph(g, ex) == before
    forget(g)
    assert layout_graph(g, ex) == before


@pytest.mark.parametrize("path", gpt2_models(), ids=lambda p: p.name)
def test_gpt2_residual_adds_line_up(path: Path) -> None:
    # the residual stream runs straight down: no sideways drift from block to block
    lay = layout_graph(_doc(path).graph)
    adds = [
        b.x + b.w / 2
        for b in sorted(lay.boxes, key=lambda b: b.y)
        if b.kind == "node" and b.label == "Add" and len(b.scope) == 3 and b.scope[2].startswith("h.")
    ]
    assert len(adds) >= 4
    steps = [abs(a - b) for a, b in zip(adds, adds[1:], strict=False)]
    assert max(steps) < 80, f"a residual add is {max(steps):.0f} px off the previous one"
    middle = adds[len(adds) // 6 : len(adds) - len(adds) // 6]
    assert max(middle) - min(middle) < 60, f"residual adds drift over {max(middle) - min(middle):.0f} px"
