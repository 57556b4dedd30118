"""What a graph pane shows over the graph, as plain data (no Qt): marks, focus, highlight, heat, selection.

The Session holds one PaneState per pane; the workbench works the overlays out from the decisions, the
profile and the links between panes and sets them on the session; the scene draws the PaneState it is
bound to (GraphScene.draw_state, and each part on the session's pane event). Testable without a window.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fuseview.colors import mixed_rules_color
from fuseview.graph.document import GraphDocument

if TYPE_CHECKING:  # networkx costs ~0.2 s of the window's start: imported where a path is asked for
    import networkx as nx

# how strongly a candidate's status claims a box it shares with others (the strongest wins the colour)
STATUS_RANK = {"rejected": 0, "pending": 1, "accepted": 2, "applied": 3}


@dataclass
class Marks:
    """Candidate outlines: colour per box key, the faded ones (rejected), counts on collapsed groups, and the
    rules' colours on a collapsed group holding candidates of several rules (drawn neutral, with swatches)."""

    colors: dict[str, str] = field(default_factory=dict)
    faded: set[str] = field(default_factory=set)
    badges: dict[str, int] = field(default_factory=dict)
    swatches: dict[str, list[str]] = field(default_factory=dict)


@dataclass
class PaneState:
    """Everything drawn over one pane's graph, by box key."""

    marks: Marks = field(default_factory=Marks)
    focus: list[str] = field(default_factory=list)  # the candidate being looked at (dashed outline)
    highlight: set[str] = field(default_factory=set)  # op-type search hits
    heat: dict[str, float] | None = None  # share of time 0..1 per box (None: heat map off)
    selection: list[str] = field(default_factory=list)  # what the user picked

    def clear(self) -> None:
        """Nothing drawn over the graph (a new model is open)."""
        self.marks, self.focus, self.highlight, self.heat, self.selection = Marks(), [], set(), None, []


def candidate_marks(entries: Iterable[tuple[str, str, str, list[str]]]) -> Marks:
    """Marks for (rule, colour, status, box keys) of each candidate.

    A box in several candidates wears the colour of the most decided one (applied > accepted > pending >
    rejected); a collapsed group ('g:' key) holding candidates of several rules wears the neutral
    mixed_rules_color rather than one rule's, with each rule's colour as a swatch, and counts them all.
    """
    marks = Marks()
    rank: dict[str, int] = {}
    group_rules: dict[str, dict[str, str]] = {}
    for rule, color, status, keys in entries:
        r = STATUS_RANK.get(status, 1)
        for k in keys:
            if k.startswith("g:"):
                marks.badges[k] = marks.badges.get(k, 0) + 1
                group_rules.setdefault(k, {})[rule] = color
            if r >= rank.get(k, -1):
                rank[k] = r
                marks.colors[k] = color
    for k, rules in group_rules.items():
        if len(rules) > 1:
            marks.colors[k] = mixed_rules_color()
            marks.swatches[k] = [rules[r] for r in sorted(rules)]
    marks.faded = {k for k, r in rank.items() if r == STATUS_RANK["rejected"]}
    return marks


def dataflow_graph(graph: GraphDocument) -> nx.DiGraph:
    """The graph's nodes (by name) and the tensors between them, as a networkx DiGraph."""
    import networkx as nx

    g = nx.DiGraph()
    g.add_nodes_from(n.name for n in graph.nodes)
    g.add_edges_from((graph.nodes[e.src].name, graph.nodes[e.dst].name) for e in graph.edges)
    return g


def nodes_between(graph: GraphDocument, first: str, second: str) -> list[str]:
    """Every node on a path from one node to the other (either way round), both ends included, in order.

    [] when neither reaches the other.
    """
    import networkx as nx

    g = dataflow_graph(graph)
    for a, b in ((first, second), (second, first)):
        if a == b or nx.has_path(g, a, b):
            inside = (nx.descendants(g, a) | {a}) & (nx.ancestors(g, b) | {b})
            order = {n.name: n.index for n in graph.nodes}
            return sorted(inside, key=order.__getitem__)
    return []
