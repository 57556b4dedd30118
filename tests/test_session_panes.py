"""The Qt-free view state: rule colours, candidate marks, nodes between two nodes (networkx)."""

from __future__ import annotations

import itertools

from fuseview.colors import (
    RESERVED,
    color_distance,
    mixed_rules_color,
    rule_color,
    rule_colors,
)
from fuseview.fusion.rules import catalogue
from fuseview.graph.loader import load_document
from fuseview.session.panes import candidate_marks, nodes_between
from tests.conftest import GPT2_MODELS


def test_rule_colours_are_stable_distinct_and_apart_from_op_and_selection_colours():
    names = [r.name for r in catalogue()]
    order = tuple(names)
    colours = [rule_color(n, order) for n in names]
    assert colours == [rule_color(n, order) for n in names]  # a pure function of the name
    # consecutive catalogue rules (as many as there are colours) each wear their own
    assert len(set(colours[: len(rule_colors())])) == len(rule_colors())
    for a, b in itertools.combinations(rule_colors(), 2):
        assert color_distance(a, b) >= 20, (a, b)
    for c in rule_colors():
        assert min(color_distance(c, r) for r in RESERVED) >= 20, c
    assert mixed_rules_color() in RESERVED
    assert rule_color("a_rule_from_a_plugin", order) in rule_colors()  # unknown names hash into the palette


def test_candidate_marks_strongest_status_wins_and_mixed_groups_get_their_own_colour():
    marks = candidate_marks(
        [
            ("r1", "#111111", "rejected", ["n:1", "n:2"]),
            ("r2", "#222222", "accepted", ["n:2", "g:layer"]),
            ("r1", "#111111", "pending", ["g:layer"]),
            ("r3", "#333333", "pending", ["g:other"]),
        ]
    )
    assert marks.colors["n:1"] == "#111111" and "n:1" in marks.faded
    assert marks.colors["n:2"] == "#222222" and "n:2" not in marks.faded
    assert marks.colors["g:layer"] == mixed_rules_color() and marks.badges["g:layer"] == 2
    assert marks.colors["g:other"] == "#333333" and marks.badges["g:other"] == 1


def test_nodes_between_follows_the_dataflow_either_way():
    g = load_document(GPT2_MODELS / "gpt2_2l_ts17.onnx").graph
    # a LayerNormalization and the MatMul it feeds, a few nodes apart
    ln = next(n for n in g.nodes if n.op_type == "LayerNormalization")
    downstream = [n for n in g.nodes if n.index > ln.index and n.op_type == "MatMul"]
    target = downstream[0]
    between = nodes_between(g, ln.name, target.name)
    assert between[0] == ln.name and between[-1] == target.name
    assert nodes_between(g, target.name, ln.name) == between
    names = set(between)
    for name in between[1:]:  # every inner node is fed by one in the set: a connected stretch of the graph
        node = g.node(name)
        feeders = {g.tensors[t].producer for t in node.inputs if t and g.tensors[t].producer is not None}
        assert any(g.nodes[i].name in names for i in feeders)
    inputs_only = [n for n in g.nodes if n.op_type == "Shape"]
    unrelated = next(
        (a, b) for a, b in itertools.combinations(inputs_only, 2) if not nodes_between(g, a.name, b.name)
    )
    assert nodes_between(g, unrelated[0].name, unrelated[1].name) == []
