"""Turn matches into candidates: stable ids, removed tensors and their bytes, conflicts."""

from __future__ import annotations

import hashlib
from collections import Counter
from itertools import chain
from typing import cast

from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.rule import Candidate, Match


def candidate_id(rule: str, node_names: list[str]) -> str:
    """Stable short id from the rule name and the matched node names (order-independent)."""
    key = rule + "\n" + "\n".join(sorted(node_names))
    return rule + "-" + hashlib.sha1(key.encode()).hexdigest()[:8]


def make_candidate(index: GraphIndex, m: Match) -> Candidate:
    """The candidate for one valid match."""
    nodes = m.node_list
    names = [index.name(n) for n in nodes]
    keep = set(m.outputs)
    removed = [o for n in nodes for o in index.outputs(n) if o and o not in keep]
    sizes = list(map(index.nbytes, removed))
    saved = traffic = None
    if None not in sizes:
        known = cast(list[int], sizes)  # no None among them
        saved = sum(known)
        # one pass over every input (a big match has hundreds of nodes), counted in C
        reads = Counter(chain.from_iterable(map(index.inputs, nodes)))
        traffic = sum(s * (1 + reads[t]) for t, s in zip(removed, known, strict=True))
    r = m.rule
    return Candidate(
        candidate_id(r.name, names),
        r.name,
        r.fused_op,
        r.domain,
        tuple(r.runs_on),
        names,
        removed,
        saved,
        match=m,
        traffic_bytes=traffic,
    )


def link_conflicts(cands: list[Candidate]) -> None:
    """Fill each candidate's conflicts: the ids of candidates sharing at least one node."""
    by_node: dict[str, list[Candidate]] = {}
    for c in cands:
        for n in c.nodes:
            by_node.setdefault(n, []).append(c)
    for c in cands:
        seen: dict[str, None] = {}
        for n in c.nodes:
            for o in by_node[n]:
                if o is not c:
                    seen[o.id] = None
        c.conflicts = list(seen)
