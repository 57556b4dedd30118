"""Scan a model for fusion candidates and near misses (never modifies the model)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from fuseview import collector
from fuseview.errors import FuseviewError
from fuseview.fusion import kernels
from fuseview.fusion.bounds import fruitless
from fuseview.fusion.candidates import candidate_id, link_conflicts, make_candidate
from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.matcher import match_patterns, patterns_for
from fuseview.fusion.rule import Candidate, Match, Miss, NearMiss, Rule
from fuseview.fusion.rules import catalogue
from fuseview.fusion.subgraphs import InnerModel, inner_models
from fuseview.fusion.toolkit import ScanContext
from fuseview.graph.loader import read_model_table
from fuseview.graph.table import NodeTable


@dataclass
class ScanResult:
    """Candidates (bigger fusions first, then graph order), near misses and notes of one scan."""

    candidates: list[Candidate]
    near_misses: list[NearMiss]
    index: GraphIndex
    notes: list[str] = field(default_factory=list)
    path: str | None = None
    # scans of the inner graphs (If/Loop/Scan bodies, local functions); their candidates are in candidates too
    inner: list[tuple[InnerModel, ScanResult]] = field(default_factory=list)

    def by_id(self) -> dict[str, Candidate]:
        """Candidates keyed by id."""
        return {c.id: c for c in self.candidates}

    def to_json(self) -> dict:
        """The object `fuseview scan --json` prints."""
        return {
            "model": self.path,
            "dims": dict(self.index.dims_used),
            "candidates": [c.to_json() for c in self.candidates],
            "near_misses": [
                {"rule": n.rule, "nodes": list(n.nodes), "reason": n.reason} for n in self.near_misses
            ],
            "notes": list(self.notes),
        }


def load_model(path: str | os.PathLike) -> onnx.ModelProto:
    """Read an ONNX file for fusion (external weights left on disk); FuseviewError on bad input."""
    return load_model_table(path)[0]


def load_model_table(path: str | os.PathLike) -> tuple[onnx.ModelProto, NodeTable]:
    """load_model, and the table of its main graph's nodes (graph.table) the reader made."""
    p = Path(path)
    model, table = read_model_table(p)
    if not model.graph.node:
        raise FuseviewError(f"{p}: not an ONNX model with a graph (no nodes)")
    return model, table


def scan_model(
    model: onnx.ModelProto,
    dims: dict[str, int] | None = None,
    rules: Sequence[Rule] | None = None,
    base_dir: str | os.PathLike | None = None,
    path: str | None = None,
    functions: bool = True,
    provider: str | None = None,
    typed: onnx.GraphProto | None = None,
    table: NodeTable | None = None,
) -> ScanResult:
    """Find every candidate of every rule in the model's main graph, its If/Loop/Scan bodies (nested too)
    and its local functions. With a provider, a candidate whose fused op has no kernel there for its dtype
    becomes a near miss (fuseview.fusion.kernels). typed: an inner graph's part of the outer inference;
    table: the main graph's NodeTable, when the reader made one."""
    with collector.paused():
        return _scan_model(model, dims, rules, base_dir, path, functions, provider, typed, table)


def _scan_model(
    model: onnx.ModelProto,
    dims: dict[str, int] | None,
    rules: Sequence[Rule] | None,
    base_dir: str | os.PathLike | None,
    path: str | None,
    functions: bool,
    provider: str | None,
    typed: onnx.GraphProto | None,
    table: NodeTable | None,
) -> ScanResult:
    index = GraphIndex(model, dims, base_dir=base_dir, typed=typed, table=table)
    ctx = ScanContext(index)
    rules = list(catalogue() if rules is None else rules)
    wanted = {id(r) for r in rules}
    found: list[tuple[int, int, Candidate]] = []
    misses: list[NearMiss] = []
    anchors: dict[frozenset[str], _Anchors] = {}  # rules share op types (Add, Mul): sorted and keyed once
    for rule in run_order(rules):
        if rule.find is not None:
            matches = _find_guarded(ctx, rule.name, rule.find)
            ctx.record(rule.name, [m.payload for m in matches if isinstance(m, Match)])
            if id(rule) not in wanted:
                continue  # run only because a chosen rule requires its results
            for m in matches:
                if isinstance(m, NearMiss):  # find() rules report their near misses in the same stream
                    misses.append(m)
                    continue
                c = make_candidate(index, m)
                found.append((-rule.priority, index.position(m.node_list[-1]), c))
            continue
        key = frozenset(rule.op_types)
        if key not in anchors:
            anchors[key] = _anchors(index, key)
        _match_anchors(index, rule, *anchors[key], found, misses)
    found.sort(key=lambda t: (t[0], t[1]))
    cands = []
    seen = set()
    for _p, _pos, c in found:
        if c.id not in seen:
            seen.add(c.id)
            cands.append(c)
    cands = _drop_submatches(cands)
    if provider:
        cands = kernels.keep_runnable(cands, provider, index, misses)
    link_conflicts(cands)
    result = ScanResult(cands, misses, index, list(dict.fromkeys(index.notes)), path)
    _scan_inner(result, rules, base_dir, functions)
    return result


def _match_anchors(
    index: GraphIndex,
    rule: Rule,
    nodes: list[onnx.NodeProto],
    kinds: list[int],
    keys: list[tuple[str, tuple[str | None, ...]]],
    found: list[tuple[int, int, Candidate]],
    misses: list[NearMiss],
) -> None:
    """Match a declarative rule at each anchor node; its candidates and near misses in graph order.

    The anchors are matched last first: a valid match then names, before they come, the nodes where the
    matcher proved the rule's match to be a strict subset of it (the Mul of a LayerNorm whose beta Add
    matched: Match.nested_roots), which _drop_submatches would drop; they are skipped. Which patterns may
    match depends on a node's kind only (kinds[i] indexes keys): asked once per kind."""
    results: list[Candidate | NearMiss | None] = [None] * len(nodes)
    nested: set[int] = set()
    by_kind: list[tuple[int, ...] | None] = [None] * len(keys)
    # patterns needing an op type this graph lacks, that could not even fail deep enough for a near miss
    dead = {pi for pi, p in enumerate(rule.compiled) if fruitless(p, index.by_op)}
    if len(dead) == len(rule.compiled):
        return
    absent = frozenset(o for p in rule.compiled for n in p.nodes for o in n.op_types if o not in index.by_op)
    for i in range(len(nodes) - 1, -1, -1):
        node = nodes[i]
        if nested and id(node) in nested:
            continue
        try:
            pis = by_kind[kinds[i]]
            if pis is None:
                pis = patterns_for(rule, keys[kinds[i]])
                pis = by_kind[kinds[i]] = tuple(pi for pi in pis if pi not in dead) if dead else pis
            if not pis:
                continue
            match, failure = match_patterns(index, rule, node, pis, absent)
        except Exception as exc:  # noqa: BLE001 - a rule's bug on an odd graph is a near miss, not a crash
            results[i] = NearMiss(rule.name, (index.name(node),), _rule_error(exc))
            continue
        if match is not None:
            results[i] = make_candidate(index, match)
            nested.update(id(n) for n in match.nested_roots)
        elif failure is not None:
            names = tuple(index.name(n) for n in sorted(failure.nodes, key=index.position))
            results[i] = NearMiss(rule.name, names, failure.reason)
    prio = -rule.priority
    for node, r in zip(nodes, results, strict=True):
        if isinstance(r, Candidate):
            found.append((prio, index.position(node), r))
        elif r is not None:
            misses.append(r)


_Key = tuple[str, tuple[str | None, ...]]
_Anchors = tuple[list[onnx.NodeProto], list[int], list[_Key]]


def _anchors(index: GraphIndex, op_types: Iterable[str]) -> _Anchors:
    """The nodes of these op types in graph order (one op type: its list as the index keeps it, in order),
    the kind of each (an index into the kinds) and the kinds: (op type, its producers' op types)."""
    lists = [index.by_op[op] for op in dict.fromkeys(op_types) if op in index.by_op]
    if len(lists) == 1:
        nodes = lists[0]
    else:
        nodes = sorted((n for nodes in lists for n in nodes), key=index.position)
    ids: dict[_Key, int] = {}
    kinds = [ids.setdefault((n.op_type, tuple(index.producer_ops(n))), len(ids)) for n in nodes]
    return nodes, kinds, list(ids)


def run_order(rules: Sequence[Rule]) -> list[Rule]:
    """The rules in catalogue order, each after the rules it requires (those added from the catalogue)."""
    known = {r.name: r for r in catalogue()} | {r.name: r for r in rules}
    order: list[Rule] = []
    placed: set[str] = set()

    def place(rule: Rule, chain: tuple[str, ...]) -> None:
        if rule.name in placed:
            return
        if rule.name in chain:
            raise ValueError(f"rule requires form a cycle: {' -> '.join((*chain, rule.name))}")
        for name in rule.requires:
            if name not in known:
                raise ValueError(f"rule {rule.name} requires {name!r}, which is no rule")
            place(known[name], (*chain, rule.name))
        placed.add(rule.name)
        order.append(rule)

    for r in rules:
        place(r, ())
    return order


def _rule_error(exc: Exception) -> str:
    if isinstance(exc, Miss):  # a step that does not fit: its message is the reason
        return str(exc)
    text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
    return f"rule failed on this graph ({type(exc).__name__}{': ' + text if text else ''})"


def _find_guarded(
    ctx: ScanContext, rule_name: str, find: Callable[[Any], Iterable[Match | NearMiss]]
) -> list[Match | NearMiss]:
    """A find() rule's matches and near misses; if it raises, one near miss saying so instead."""
    try:
        return list(find(ctx))
    except Exception as exc:  # noqa: BLE001 - a rule's bug on an odd graph is a near miss, not a crash
        return [NearMiss(rule_name, (), _rule_error(exc))]


def _scan_inner(
    result: ScanResult,
    rules: list[Rule],
    base_dir: str | os.PathLike | None,
    functions: bool,
) -> None:
    """Scan each inner graph as its own model; its candidates join the result with a scope and scoped ids."""
    for inner in inner_models(result.index.model, result.index, functions):
        # an inner model carries the model's functions (for inference): they are scanned once, at the top.
        # --dim names the model's top-level inputs only: a body's inputs are typed from the outer graph's
        # shapes under those dims already (passing them on refused every body: the silero-vad regression)
        sub = scan_model(inner.model, None, rules, base_dir=base_dir, functions=False, typed=inner.typed)
        label = inner.where.label
        for c in sub.candidates:
            c.scope = label + (f" ▸ {c.scope}" if c.scope else "")
            c.id = candidate_id(c.rule, [c.scope, *c.nodes])
        # conflicts hold ids: link again with the scoped ids, within each inner graph only
        for scope in dict.fromkeys(c.scope for c in sub.candidates):
            link_conflicts([c for c in sub.candidates if c.scope == scope])
        result.candidates.extend(sub.candidates)
        result.near_misses.extend(
            NearMiss(m.rule, m.nodes, f"in {label}: {m.reason}") for m in sub.near_misses
        )
        result.inner.append((inner, sub))


def _drop_submatches(cands: list[Candidate]) -> list[Candidate]:
    """Within one rule, drop candidates whose nodes are a strict subset of another's (LN sans beta)."""
    by_node: dict[str, list[Candidate]] = {}
    for c in cands:
        for n in c.nodes:
            by_node.setdefault(n, []).append(c)
    keep = []
    for c in cands:
        others = {id(o): o for o in by_node[c.nodes[0]] if o is not c and o.rule == c.rule}
        if others:  # most candidates share their first node with no other candidate of their rule
            mine = set(c.nodes)
            if any(mine < set(o.nodes) for o in others.values()):
                continue
        keep.append(c)
    return keep


def scan_file(
    path: str | os.PathLike, dims: dict[str, int] | None = None, rules: Sequence[Rule] | None = None,
    provider: str | None = None,
) -> ScanResult:
    """Load and scan an ONNX file (for provider, when given: see scan_model)."""
    with collector.paused():
        model, table = load_model_table(path)
        return scan_model(model, dims, rules, base_dir=Path(path).parent, path=str(path), provider=provider,
                          table=table)
