"""Bounds on what a pattern can match in a graph, from the op types the graph lacks: how large a match at a
root may be (the matcher takes a state that large without making the rest) and whether a pattern can match or
fail deep enough for a near miss at all (the scan skips it where not). Memoised on the Pattern, per set of
absent op types."""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from fuseview.fusion.rule import PAlt, Pattern, PNode, POpt, POut, PTerm


def _reach(term: PTerm, absent: frozenset[str], seen: dict[int, PNode]) -> None:
    """Add to seen the pattern nodes below term a match may reach without one whose op types are all absent
    (such a node never fits, nor is anything below it tried)."""
    if isinstance(term, PAlt):
        for a in term.alternatives:
            _reach(a, absent, seen)
    elif isinstance(term, POpt):
        _reach(term.term, absent, seen)
    elif isinstance(term, POut):
        node = term.node
        if id(node) in seen or absent.issuperset(node.op_types):
            return
        seen[id(node)] = node
        for t in node.inputs:
            _reach(t, absent, seen)


def _label_sets(term: PTerm, absent: frozenset[str], memo: dict[int, Any]) -> set[frozenset[str]] | None:
    """The label sets a complete match of term may hold, over each choice of alternatives (a superset of
    those it can hold), none through a node whose op types are all absent; None past 256 (no claim)."""
    if isinstance(term, PAlt):
        each = [_label_sets(a, absent, memo) for a in term.alternatives]
        return None if None in each else set().union(*each)  # type: ignore[arg-type]
    if isinstance(term, POpt):
        inner = _label_sets(term.term, absent, memo)
        return None if inner is None else inner | {frozenset()}
    if not isinstance(term, POut):
        return {frozenset()}
    node = term.node
    if id(node) in memo:
        return memo[id(node)]
    out: set[frozenset[str]] | None = set() if absent.issuperset(node.op_types) else {frozenset([node.label])}
    for t in node.inputs:
        sub = _label_sets(t, absent, memo) if out else set()
        out = None if out is None or sub is None else {a | b for a in out for b in sub}
        if out is not None and len(out) > 256:
            out = None
    memo[id(node)] = out
    return out


def largest(pattern: Pattern, absent: frozenset[str]) -> dict[str, int]:
    """Root label -> most nodes a match at that root may hold in a graph without the absent op types (an
    upper bound; a root without one is left out)."""
    got = pattern.sizes.get(absent)
    if got is None:
        memo: dict[int, Any] = {}
        sets = {r.label: _label_sets(POut(r), absent, memo) for r in pattern.roots}
        got = pattern.sizes[absent] = {lb: max(map(len, s)) for lb, s in sets.items() if s}
    return got

def fruitless(pattern: Pattern, present: Container[str]) -> bool:
    """True when, in a graph whose op types are ``present``, pattern can neither match nor fail deep
    enough for a near miss: the nodes it may reach without an op type the graph lacks are fewer than a
    match holds, and their labels (a failure's depth, plus 0.5 for a wrong constant) too few."""
    absent = frozenset(op for n in pattern.nodes for op in n.op_types if op not in present)
    if not absent:
        return False
    got = pattern.barren.get(absent)
    if got is None:
        got = True
        for root in pattern.roots:
            seen: dict[int, PNode] = {}
            _reach(POut(root), absent, seen)
            labels = {n.label for n in seen.values()}
            if len(seen) >= pattern.min_nodes or len(labels) + 0.5 >= pattern.near_miss_depth:
                got = False
        pattern.barren[absent] = got
    return got
