"""Name-scope groups of a graph: which groups hold which nodes, and which groups start open."""

from __future__ import annotations

import weakref
from dataclasses import dataclass

from fuseview.graph.document import GraphDocument
from fuseview.graph.scopes import common_prefix

Scope = tuple[str, ...]


@dataclass(frozen=True)
class ScopeGroup:
    """One name scope: its child scopes (in order of first appearance), its own nodes, and its size."""

    scope: Scope
    children: tuple[Scope, ...]  # direct child scopes
    nodes: tuple[int, ...]  # visible nodes whose scope is exactly this one
    count: int  # visible nodes in this scope and all scopes below it

    @property
    def label(self) -> str:
        """The last segment of the scope path ('h.3'), or '' for the root."""
        return self.scope[-1] if self.scope else ""


_cache: dict[int, tuple[weakref.ref, dict[str, object]]] = {}


def graph_memo(graph: GraphDocument) -> dict[str, object]:
    """A per-graph memo (the document is not hashable) for derived structures; dropped with the graph."""
    gid = id(graph)
    hit = _cache.get(gid)
    if hit is not None and hit[0]() is graph:
        return hit[1]
    memo: dict[str, object] = {}
    def forget_memo(_ref: weakref.ref, gid: int = gid) -> None:
        _cache.pop(gid, None)

    _cache[gid] = (weakref.ref(graph, forget_memo), memo)
    return memo


def forget(graph: GraphDocument) -> None:
    """Drop what was memoised for this graph (scope tree, cached group layouts)."""
    hit = _cache.pop(id(graph), None)
    if hit is not None:
        hit[1].clear()


def group_scopes(graph: GraphDocument) -> list[Scope]:
    """The scope each node is grouped under: its own, unless every node it reads from or feeds lies in one
    deeper scope, which it then joins (an exporter's Identity of a shared weight, a module-level Split
    between two ops of the same attention block); in a crowded scope, its run of nodes (RUN_ABOVE).
    Everything that opens, closes or finds groups goes by this, not by Node.scope."""
    memo = graph_memo(graph)
    got = memo.get("group_scopes")
    if got is not None:
        return got  # type: ignore[return-value]
    nodes = graph.nodes
    tensors = graph.tensors
    own = [n.scope for n in nodes]
    scopes = list(own)
    for node in nodes:
        if node.folded_into is not None:
            continue
        mine = node.scope
        common: Scope | None = None
        neighbours: list[Scope] = []
        for name in node.inputs:
            t = tensors.get(name) if name else None
            if t is None or t.kind in ("initializer", "constant"):
                continue
            if t.producer is None:
                neighbours.append(())  # a graph input: the node stays where it is
                break
            if nodes[t.producer].folded_into is None:
                neighbours.append(own[t.producer])
        for name in node.outputs:
            t = tensors.get(name) if name else None
            if t is None:
                continue
            if t.kind == "output":
                neighbours.append(())
                break
            for c in t.consumers:
                neighbours.append(own[c])
        for sc in neighbours:
            if common is None:
                common = sc
            else:
                common = common_prefix(common, sc)
            if len(common) <= len(mine):
                break
        if common is not None and len(common) > len(mine) and common[: len(mine)] == mine:
            scopes[node.index] = common
    memo["runs"] = _cut_into_runs(graph, scopes)
    memo["group_scopes"] = scopes
    return scopes


def run_scopes(graph: GraphDocument) -> frozenset[Scope]:
    """The runs of nodes the graph's crowded scopes were cut into (see RUN_ABOVE); empty when none was."""
    group_scopes(graph)
    return graph_memo(graph)["runs"]  # type: ignore[return-value]


def has_runs(graph: GraphDocument) -> bool:
    """Whether some crowded scope of the graph was cut into runs of nodes."""
    return bool(run_scopes(graph))


# A scope holding more than RUN_ABOVE nodes directly (an export without name scopes: every node at the top)
# is cut into runs of consecutive nodes in file order (topological in ONNX), each a group of about RUN_NODES
# (at most MAX_RUNS runs): a collapsed graph of 50,000 such nodes is 50 boxes, not 50,000.
RUN_ABOVE = 5000
RUN_NODES = 1000
MAX_RUNS = 200


def run_label(first: int, last: int) -> str:
    """The group name of a run of nodes: their file positions, 1-based ('nodes 1–1,000')."""
    return f"nodes {first + 1:,}–{last + 1:,}"


def _cut_into_runs(graph: GraphDocument, scopes: list[Scope]) -> frozenset[Scope]:
    """Put the nodes of every scope that directly holds more than RUN_ABOVE of them into runs (in place);
    the runs made."""
    direct: dict[Scope, list[int]] = {}
    for node in graph.nodes:
        if node.folded_into is None:
            direct.setdefault(scopes[node.index], []).append(node.index)
    crowded = {s: members for s, members in direct.items() if len(members) > RUN_ABOVE}
    if not crowded:
        return frozenset()
    made: set[Scope] = set()
    taken = {s[: len(p) + 1] for s in direct for p in crowded if len(s) > len(p) and s[: len(p)] == p}
    for scope, members in crowded.items():
        runs = min(MAX_RUNS, -(-len(members) // RUN_NODES))
        for k in range(runs):  # run sizes differ by one at most
            part = members[k * len(members) // runs : (k + 1) * len(members) // runs]
            label = run_label(part[0], part[-1])
            while scope + (label,) in taken:  # a real scope of that name: keep the two apart
                label += "'"
            run = scope + (label,)
            made.add(run)
            for i in part:
                scopes[i] = run
    return frozenset(made)


def scope_tree(graph: GraphDocument) -> dict[Scope, ScopeGroup]:
    """Every name scope of the graph's visible nodes, keyed by path; the root () is always present.

    Nodes are placed by group_scopes (unscoped weight readers join their consumers' scope)."""
    memo = graph_memo(graph)
    got = memo.get("scope_tree")
    if got is not None:
        return got  # type: ignore[return-value]
    scopes = group_scopes(graph)
    direct: dict[Scope, list[int]] = {(): []}
    children: dict[Scope, list[Scope]] = {(): []}
    count: dict[Scope, int] = {(): 0}
    for node in graph.nodes:
        if node.folded_into is not None:
            continue
        scope = scopes[node.index]
        if scope not in direct:
            # register the scope and any missing ancestors, keeping first-appearance order
            for k in range(1, len(scope) + 1):
                prefix = scope[:k]
                if prefix not in direct:
                    direct[prefix] = []
                    children[prefix] = []
                    count[prefix] = 0
                    children[prefix[:-1]].append(prefix)
        direct[scope].append(node.index)
        for k in range(len(scope) + 1):
            count[scope[:k]] += 1
    tree = {s: ScopeGroup(s, tuple(children[s]), tuple(direct[s]), count[s]) for s in direct}
    memo["scope_tree"] = tree
    return tree


def initial_expansion(graph: GraphDocument, max_boxes: int = 400) -> frozenset[Scope] | None:
    """None (flat) for graphs of at most max_boxes visible nodes; else the top level, opened through
    chains of scopes that hold most of their parent (('m',) -> ('m', 'transformer') -> blocks h.0 ... h.N)."""
    visible = sum(1 for n in graph.nodes if n.folded_into is None)
    if visible <= max_boxes:
        return None
    tree = scope_tree(graph)
    if not tree[()].children:
        return None  # no scopes: nothing to collapse
    expanded: set[Scope] = {()}
    scope: Scope = ()
    boxes = len(tree[()].nodes) + len(tree[()].children)
    while True:
        group = tree[scope]
        if not group.children:
            break
        child = max(group.children, key=lambda c: tree[c].count)
        # open a child that holds most of this scope (a lone 'm', or 'transformer' beside a 1-node lm_head)
        if tree[child].count * 3 < group.count * 2:
            break
        more = len(tree[child].nodes) + len(tree[child].children) - 1
        if boxes + more > max_boxes:
            break
        boxes += more
        expanded.add(child)
        scope = child
    return frozenset(expanded)


# How a newly opened graph starts: grouped when big (auto), every node (flat), or groups closed (collapsed).
EXPANSION_MODES = ("auto", "flat", "collapsed")
Expansion = frozenset[Scope] | None  # the open scopes; None: flat, every node drawn


def collapsed_expansion(graph: GraphDocument) -> frozenset[Scope]:
    """'Collapse all': the initial grouping of a big graph, or only the top level of a small one."""
    return initial_expansion(graph) or frozenset({()})


def expansion_for(graph: GraphDocument, mode: str) -> Expansion:
    """The expansion a newly opened graph starts with: auto, flat or collapsed."""
    if mode == "flat":
        return None
    if mode == "collapsed":
        return collapsed_expansion(graph)
    return initial_expansion(graph)
