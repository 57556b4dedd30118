"""Which fused node stands for which original nodes, from the fuseview.origin metadata (no Qt)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fuseview.graph.document import GraphDocument
from fuseview.graph.groups import group_scopes, run_scopes
from fuseview.graph.scopes import common_scope
from fuseview.provenance import ORIGIN_KEY, origin_names


@dataclass
class Links:
    """Which original nodes each fused node stands for, and the reverse (by node name)."""

    to_original: dict[str, list[str]] = field(default_factory=dict)
    to_fused: dict[str, list[str]] = field(default_factory=dict)


def link_graphs(original: GraphDocument, fused: GraphDocument) -> Links:
    """Map fused nodes to the original nodes they replaced (fuseview.origin) or kept (same name)."""
    links = Links()
    for n in fused.nodes:
        raw = n.metadata.get(ORIGIN_KEY)
        if raw:
            names = origin_names(raw) or []
        elif n.name in original.node_by_name:
            names = [n.name]
        else:
            names = []
        links.to_original[n.name] = names
        for o in names:
            links.to_fused.setdefault(o, []).append(n.name)
    return links


def adopt_origin_scopes(original: GraphDocument, fused: GraphDocument) -> None:
    """Give each fused node the scope its replaced nodes share (exporters' scopes are not on new nodes).

    When the original's crowded scopes are cut into runs (groups.RUN_ABOVE), every fused node takes the
    run its original nodes sit in (the first's, when they straddle two), so that both panes have the same
    groups to open together."""
    runs = run_scopes(original)
    grouped = group_scopes(original) if runs else None
    for n in fused.nodes:
        names = [x for x in origin_names(n.metadata.get(ORIGIN_KEY)) or [] if x in original.node_by_name]
        if runs and not names and n.name in original.node_by_name:
            names = [n.name]  # a node the fusion kept
        if grouped is None:
            scopes = [original.node(x).scope for x in names if original.node(x).visible] or [
                original.node(x).scope for x in names
            ]
        else:
            scopes = [grouped[i] for i in sorted(original.node_by_name[x] for x in names)]
        if not scopes:
            continue
        n.scope = common_scope(scopes)
        if grouped is not None and scopes[0] != n.scope and scopes[0][: len(n.scope) + 1] in runs:
            n.scope = scopes[0]  # a run is no module: a fusion across its end stays with its first node
