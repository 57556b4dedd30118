"""A graph whose nodes crowd one scope (an export without name scopes) opens as runs of nodes, not as every
node at once: the 50,000-node model of issue 38 (finding 6) took 71 s to open, drawing 100,000 items."""

from __future__ import annotations

import json
from functools import lru_cache

from onnx import helper

from fuseview.graph import groups
from fuseview.graph.groups import (
    RUN_ABOVE,
    RUN_NODES,
    group_scopes,
    has_runs,
    initial_expansion,
    run_label,
    scope_tree,
)
from fuseview.graph.layout import layout_graph
from fuseview.graph.loader import document_from_model
from fuseview.provenance import ORIGIN_KEY
from fuseview.session.links import adopt_origin_scopes
from tests.big_graphs import big_model
from tests.test_layout import check_collapsed

N = 6_500  # over RUN_ABOVE: 7 runs of 928 or 929


@lru_cache(maxsize=4)
def _graph(nodes: int = N, kind: str = "chain"):
    return document_from_model(big_model(nodes, kind)).graph


def test_a_crowded_graph_opens_as_runs_of_consecutive_nodes():
    g = _graph()
    assert has_runs(g)
    expanded = initial_expansion(g)
    lay = layout_graph(g, expanded)
    groups = [b for b in lay.boxes if b.kind == "group"]
    # before: no scopes, so flat, a box for every node (6,502 boxes, 6,501 routes)
    assert len(groups) == 7 and len(lay.boxes) == 9 and len(lay.routes) == 8
    check_collapsed(g, lay, expanded)
    scopes = group_scopes(g)
    runs = list(dict.fromkeys(scopes))
    assert [len(s) for s in runs] == [1] * 7
    start = 0
    for run in runs:  # consecutive in file order, evenly cut, named by their first and last node
        members = scope_tree(g)[run].nodes
        assert list(members) == list(range(start, start + len(members)))
        assert len(members) in (928, 929) and run[0] == run_label(members[0], members[-1])
        start += len(members)
    assert start == N and runs[0] == ("nodes 1–928",) and runs[-1] == ("nodes 5,572–6,500",)


def test_opening_a_run_lays_out_its_nodes_alone():
    g = _graph()
    run = group_scopes(g)[3000]
    expanded = frozenset({(), run})
    lay = layout_graph(g, expanded)
    check_collapsed(g, lay, expanded)
    shown = [b.node for b in lay.boxes if b.kind == "node"]
    assert 3000 in shown and len(shown) == len(scope_tree(g)[run].nodes) <= RUN_NODES
    assert len(lay.boxes) == len(shown) + 6 + 2 and [f.scope for f in lay.frames] == [run]


def test_graphs_up_to_the_bound_keep_their_scopes_and_layout():
    g = _graph(RUN_ABOVE)
    assert not has_runs(g) and initial_expansion(g) is None  # no scopes: flat, as before
    assert group_scopes(g) == [n.scope for n in g.nodes]
    scoped = _graph(8_000, "scoped")  # 80 blocks of 100: name scopes already group it
    assert not has_runs(scoped) and group_scopes(scoped) == [n.scope for n in scoped.nodes]


def test_the_run_count_is_bounded(monkeypatch):
    # the bounds scaled down (a graph of MAX_RUNS + 50 runs at the real ones is 250,000 nodes)
    monkeypatch.setattr(groups, "RUN_ABOVE", 50)
    monkeypatch.setattr(groups, "RUN_NODES", 10)
    monkeypatch.setattr(groups, "MAX_RUNS", 5)
    g = _graph(300)
    runs = list(dict.fromkeys(group_scopes(g)))
    assert len(runs) == 5 and [len(scope_tree(g)[r].nodes) for r in runs] == [60] * 5


def test_a_crowded_scope_inside_a_scoped_graph_and_a_scope_named_like_a_run():
    model = big_model(N)
    # a scoped node beside the crowd, and a real scope named as the crowd's first run would be
    # (the crowd is nodes 2.. at the top: 6,498 nodes, 7 runs of 928)
    model.graph.node[0].name = f"/{run_label(2, 929)}/first"
    model.graph.node[1].name = "/encoder/second"
    g = document_from_model(model).graph
    scopes = group_scopes(g)
    assert scopes[0] == (run_label(2, 929),) and scopes[1] == ("encoder",)
    runs = list(dict.fromkeys(scopes[2:]))
    assert len(runs) == 7 and all(len(s) == 1 and s[0].startswith("nodes ") for s in runs)
    assert runs[0] == (run_label(2, 929) + "'",)  # kept apart from the real scope of that name
    assert scope_tree(g)[runs[0]].nodes == tuple(range(2, 930))
    expanded = initial_expansion(g)
    check_collapsed(g, layout_graph(g, expanded), expanded)


def test_a_fused_graph_takes_the_runs_of_its_original_nodes():
    original = big_model(N)
    fused = big_model(N)
    # n10, n11 replaced by one node that names them as its origin; n927, n928 (across the first run's end,
    # named last first) too
    for a, b in ((927, 928), (10, 11)):
        del fused.graph.node[a : b + 1]
        fused.graph.node.insert(a, helper.make_node("Identity", [f"t{a - 1}"], [f"t{b}"], name=f"f{a}"))
        fused.graph.node[a].metadata_props.add(key=ORIGIN_KEY, value=json.dumps([f"n{b}", f"n{a}"]))
    og = document_from_model(original).graph
    fg = document_from_model(fused).graph
    adopt_origin_scopes(og, fg)
    oscopes, fscopes = group_scopes(og), group_scopes(fg)
    assert fscopes[10] == oscopes[10] == oscopes[11]
    assert oscopes[927] != oscopes[928] and fscopes[fg.node_by_name["f927"]] == oscopes[927]
    # every kept node sits in the same run in both panes, so a group opened in one opens in the other
    for n in fg.nodes:
        if n.name in og.node_by_name:
            assert fscopes[n.index] == oscopes[og.node_by_name[n.name]]
    assert set(fscopes) == set(oscopes)
