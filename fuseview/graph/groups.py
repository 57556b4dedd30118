"""Name-scope groups of a graph: which groups hold which nodes, and which groups start open."""

from __future__ import annotations

from dataclasses import dataclass

from fuseview.graph.document import GraphDocument

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


def scope_tree(graph: GraphDocument) -> dict[Scope, ScopeGroup]:
    """Every name scope of the graph's visible nodes, keyed by path; the root () is always present."""
    direct: dict[Scope, list[int]] = {(): []}
    children: dict[Scope, list[Scope]] = {(): []}
    count: dict[Scope, int] = {(): 0}
    for node in graph.nodes:
        if node.folded_into is not None:
            continue
        scope = node.scope
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
    return {s: ScopeGroup(s, tuple(children[s]), tuple(direct[s]), count[s]) for s in direct}


def initial_expansion(graph: GraphDocument, max_boxes: int = 400) -> frozenset[Scope] | None:
    """None (flat) for graphs of at most max_boxes visible nodes; else the top level, opened through
    chains of scopes that hold most of their parent (('m',) -> ('m', 'transformer') -> blocks h.0 ... h.N)."""
    visible = sum(1 for n in graph.nodes if n.folded_into is None)
    if visible <= max_boxes:
        return None
    tree = scope_tree(graph)
    if not tree[()].children:
        return None  # no scopes: nothing to collapse
    expanded = {()}
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
