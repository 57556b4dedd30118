"""Match a rule's declarative patterns against a GraphIndex (backtracking, commuted operands, near misses)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import onnx

from fuseview.fusion.bounds import largest
from fuseview.fusion.graphindex import GraphIndex
from fuseview.fusion.rule import (
    COMMUTATIVE,
    Match,
    PAlt,
    Pattern,
    PConst,
    PNode,
    POpt,
    POut,
    PTerm,
    PVar,
    Rule,
)


@dataclass(slots=True)
class _State:
    nodes: dict[str, onnx.NodeProto]
    used: frozenset[int]
    binds: dict[str, str]


@dataclass
class Failure:
    """Deepest point a pattern reached before it failed."""

    depth: float
    reason: str
    nodes: list[onnx.NodeProto]


def _attr_equal(actual: object, expected: object) -> bool:
    if isinstance(expected, (list, tuple)):
        return isinstance(actual, (list, tuple)) and list(actual) == list(expected)
    if isinstance(expected, bytes) or isinstance(actual, bytes):
        a = actual.decode() if isinstance(actual, bytes) else actual
        e = expected.decode() if isinstance(expected, bytes) else expected
        return a == e
    if isinstance(expected, float):
        return isinstance(actual, (int, float)) and abs(float(actual) - expected) <= 1e-6 * max(
            1, abs(expected)
        )
    return actual == expected


class PatternMatcher:
    """Matches one compiled pattern rooted at a given graph node."""

    def __init__(self, index: GraphIndex, pattern: Pattern) -> None:
        self.index = index
        self.pattern = pattern
        self.failure: Failure | None = None

    def _deeper(self, st: _State, bonus: float = 0.0) -> bool:
        """True when a failure here goes deeper than the deepest so far: only then is its reason written
        (the matcher fails thousands of times a scan, and keeps one reason per pattern)."""
        return self.failure is None or len(st.nodes) + bonus > self.failure.depth

    def _fail(self, st: _State, reason: str, bonus: float = 0.0) -> None:
        # A wrong constant value at the same depth explains a near miss better than a wrong operand order.
        depth = len(st.nodes) + bonus
        if self.failure is None or depth > self.failure.depth:
            self.failure = Failure(depth, reason, list(st.nodes.values()))

    def match_root(self, node: onnx.NodeProto) -> Iterator[_State]:
        """Every structural match whose root is ``node``."""
        st = _State({}, frozenset(), {})
        for root in self.pattern.roots:
            if node.op_type in root.op_types:
                inputs = self._fit(root, node, st)
                if inputs is not None:
                    yield from self._match_inputs(root, node, inputs, st)

    def _fit(self, pn: PNode, node: onnx.NodeProto, st: _State) -> list[str] | None:
        """The node's inputs (padded to the pattern node's terms) when its op, domain, attributes and
        arity fit pn; else None, the failure recorded. Most nodes a pattern meets fail here: checked
        before any generator is made for them."""
        idx = self.index
        op = node.op_type
        domain = node.domain
        if op not in pn.op_types or ("" if domain == "ai.onnx" else domain) != pn.domain:
            if self._deeper(st):
                want = "/".join(pn.op_types)
                self._fail(st, f"{idx.name(node)} is {op}, expected {want} ({pn.label})")
            return None
        if id(node) in st.used:
            if self._deeper(st):
                self._fail(st, f"{idx.name(node)} is already matched elsewhere in the pattern")
            return None
        if pn.attrs:
            for k, v in pn.attrs.items():
                actual = idx.attr(node, k, pn.defaults.get(k))
                if not _attr_equal(actual, v):
                    if self._deeper(st):
                        self._fail(st, f"{idx.name(node)}: attribute {k}={actual!r}, expected {v!r}")
                    return None
        inputs = idx.inputs(node)
        terms = pn.inputs
        need = pn.required
        if len(inputs) < need or (len(inputs) > len(terms) and not pn.extra_inputs):
            if self._deeper(st):
                want = str(need) if need == len(terms) else f"{need}-{len(terms)}"
                self._fail(st, f"{idx.name(node)} has {len(inputs)} inputs, expected {want}")
            return None
        if len(inputs) < len(terms):
            inputs = inputs + [""] * (len(terms) - len(inputs))
        return inputs

    def _match_inputs(
        self, pn: PNode, node: onnx.NodeProto, inputs: list[str], st: _State
    ) -> Iterator[_State]:
        terms = pn.inputs
        st2 = _State({**st.nodes, pn.label: node}, st.used | {id(node)}, st.binds)
        yield from self._match_seq(terms, inputs, 0, st2)
        if len(terms) == 2 and (pn.commutative or node.op_type in COMMUTATIVE):
            yield from self._match_seq([terms[1], terms[0]], inputs, 0, st2)

    def _match_seq(self, terms: list[PTerm], tensors: list[str], i: int, st: _State) -> Iterator[_State]:
        # a variable, a constant or a node matched already gives at most one state: taken in place, without
        # a generator of its own; a node not matched yet goes straight to its inputs (the matcher's states
        # pass up through every generator between them and the root: fewer levels, less time)
        n_terms = len(terms)
        while i < n_terms:
            term = terms[i]
            if type(term) is PVar:
                got = self._bind(term, tensors[i], st)
                if got is None:
                    return
                st = got
            elif type(term) is PConst:
                if not self._const_fits(term, tensors[i], st):
                    return
            elif type(term) is POut and term.node.label in st.nodes:
                if not self._same_output(term, tensors[i], st):
                    return
            else:
                break
            i += 1
        if i == n_terms:
            yield st
            return
        term = terms[i]
        if type(term) is POut:
            fit = self._producer_fit(term, tensors[i], st)
            if fit is None:
                return
            states = self._match_inputs(term.node, fit[0], fit[1], st)
        else:
            states = self._match_term(term, tensors[i], st)
        if i + 1 == n_terms:
            yield from states
            return
        for st2 in states:
            yield from self._match_seq(terms, tensors, i + 1, st2)

    def _bind(self, term: PVar, tensor: str, st: _State) -> _State | None:
        """The state with the variable bound to tensor (st itself when it is bound to it already); None, the
        failure recorded, when it is bound to another or must be a constant and is not."""
        bound = st.binds.get(term.name)
        if bound is not None:
            if bound == tensor:
                return st
            if self._deeper(st):
                self._fail(st, f"{term.name} should be {bound} but is {tensor}")
            return None
        if term.constant and not self.index.is_const(tensor):
            if self._deeper(st):
                self._fail(st, f"{tensor} ({term.name}) is not a constant")
            return None
        return _State(st.nodes, st.used, {**st.binds, term.name: tensor})

    def _const_fits(self, term: PConst, tensor: str, st: _State) -> bool:
        """Whether tensor is a one-number constant of the term's value (else the failure is recorded)."""
        v = self.index.const_value(tensor)
        if v is None:
            if self._deeper(st):
                self._fail(st, f"{tensor} is not a constant (expected {term.value:g})")
            return False
        if v.size != 1 or v.dtype.kind not in "fiu":
            if self._deeper(st):
                self._fail(st, f"{tensor} is not a single number (expected {term.value:g})")
            return False
        x = float(np.ravel(v)[0])
        # a float16 constant is the wanted value rounded to float16: allow its rounding step
        tol = max(term.tol, float(np.finfo(v.dtype).eps)) if v.dtype == np.float16 else term.tol
        if not abs(x - term.value) <= tol * max(1.0, abs(term.value)):
            if self._deeper(st, 0.5):
                self._fail(st, f"constant {tensor} = {x:g}, expected {term.value:g}", bonus=0.5)
            return False
        return True

    def _same_output(self, term: POut, tensor: str, st: _State) -> bool:
        """Whether tensor is that output of the node term's label matched already (else the failure)."""
        pn = term.node
        node = st.nodes[pn.label]
        outs = self.index.outputs(node)
        if term.index < len(outs) and outs[term.index] == tensor:
            return True
        if self._deeper(st):
            self._fail(st, f"{tensor} should come from {self.index.name(node)} ({pn.label})")
        return False

    def _producer_fit(self, term: POut, tensor: str, st: _State) -> tuple[onnx.NodeProto, list[str]] | None:
        """The node computing tensor as term's output, and its inputs, when it fits term's node (a node not
        matched yet); else None, the failure recorded."""
        idx = self.index
        pn = term.node
        prod = idx.producer.get(tensor)
        if prod is None:
            if self._deeper(st):
                self._fail(st, f"{tensor} is not computed by a node (expected {pn.op_type})")
            return None
        node, out_i = prod
        if out_i != term.index:
            if self._deeper(st):
                where = f"output {out_i} of {idx.name(node)}"
                self._fail(st, f"{tensor} is {where}, expected output {term.index}")
            return None
        inputs = self._fit(pn, node, st)
        return None if inputs is None else (node, inputs)

    def _match_term(self, term: PTerm, tensor: str, st: _State) -> Iterator[_State]:
        # exact types, not isinstance: this runs for every tensor a pattern term meets
        if type(term) is PVar:
            got = self._bind(term, tensor, st)
            if got is not None:
                yield got
            return
        if type(term) is POut:
            if term.node.label in st.nodes:
                if self._same_output(term, tensor, st):
                    yield st
                return
            fit = self._producer_fit(term, tensor, st)
            if fit is not None:
                yield from self._match_inputs(term.node, fit[0], fit[1], st)
            return
        if type(term) is PConst:
            if self._const_fits(term, tensor, st):
                yield st
            return
        if type(term) is PAlt:
            for alt in term.alternatives:
                yield from self._match_term(alt, tensor, st)
            return
        if type(term) is POpt:
            if tensor:
                yield from self._match_term(term.term, tensor, st)
            else:
                yield st
            return
        raise TypeError(f"not a pattern term: {term!r}")


def _boundary(
    index: GraphIndex, pattern: Pattern, st: _State
) -> tuple[str | None, list[str], dict[str, str]]:
    """Check intermediates; returns (reason or None, outputs to keep, exposed label -> tensor)."""
    matched = {id(n) for n in st.nodes.values()}
    root = next(iter(st.nodes.values()))  # the root is matched (inserted) first, whichever alternative
    outputs = [o for o in index.outputs(root) if o]
    exposed: dict[str, str] = {}
    for label, node in st.nodes.items():
        if node is root:
            continue
        for o in index.outputs(node):
            if not o:
                continue
            outside = [c for c in index.consumers.get(o, ()) if id(c) not in matched]
            is_out = o in index.graph_outputs
            if not outside and not is_out:
                continue
            if label in pattern.exposed_labels:
                exposed[label] = o
                outputs.append(o)
                continue
            if is_out:
                return f"intermediate {o} is a graph output", outputs, exposed
            return (
                f"intermediate {o} is also used by {index.name(outside[0])} outside the match",
                outputs,
                exposed,
            )
    return None, outputs, exposed


def _producer_ops(term: PTerm) -> frozenset[str] | None:
    """Op types that may produce the tensor a root input term matches; None when any tensor may."""
    if isinstance(term, POut):
        return frozenset(term.node.op_types)
    if isinstance(term, PAlt):
        ops: set[str] = set()
        for a in term.alternatives:
            some = _producer_ops(a)
            if some is None:
                return None
            ops |= some
        return frozenset(ops)
    return None


def _first_level(pattern: Pattern, op_type: str) -> list[list[frozenset[str]]]:
    """Per root alternative of type ``op_type``: for each input that must come from a node, the op types
    that may produce it (a cheap filter before backtracking)."""
    cache = pattern.need
    cached = cache.get(op_type)
    if cached is None:
        cached = []
        for root in pattern.roots:
            if op_type not in root.op_types:
                continue
            need = [ops for ops in map(_producer_ops, root.inputs) if ops is not None]
            cached.append(sorted(need, key=len))
        cache[op_type] = cached
    return cached


def _may_match(need: list[frozenset[str]], producer_ops: Sequence[str | None]) -> bool:
    """True when each constrained input can be fed by a distinct producer of an allowed type."""
    if len(need) == 1:
        return not need[0].isdisjoint(producer_ops)
    free = list(producer_ops)
    for ops in need:
        hit = next((i for i, p in enumerate(free) if p in ops), None)
        if hit is None:
            return False
        free.pop(hit)
    return True


def _orders(pn: PNode, commutes: bool) -> list[list[PTerm]]:
    """The operand orders the matcher tries for pn at a node (both for a pair when commutes: the graph
    node's op type is in COMMUTATIVE)."""
    terms = pn.inputs
    if len(terms) == 2 and (pn.commutative or commutes):
        return [terms, [terms[1], terms[0]]]
    return [terms]


def _first_nodes(terms: list[PTerm]) -> tuple[int, list[POut]] | None:
    """Where the matcher first leaves the variables and constants it takes in place: the slot and the node
    outputs that may fill it (a node output or alternatives of them); None when it is something else."""
    for i, t in enumerate(terms):
        if type(t) is PVar or type(t) is PConst:
            continue
        if type(t) is POut:
            return i, [t]
        if type(t) is PAlt and all(type(a) is POut for a in t.alternatives):
            return i, [a for a in t.alternatives if type(a) is POut]
        return None
    return None


def _child_probe(child: PNode, root_label: str) -> dict[bool, list] | None:
    """For a root's first node input: per commutativity of the graph node, its operand orders as (slot,
    ((output index, op types), ...)) of its own first node input; None when a path is beyond the proof."""
    variants: dict[bool, list] = {}
    for commutes in (False, True):
        orders = []
        for terms in _orders(child, commutes):
            first = _first_nodes(terms)
            if first is None or any(o.node.label in (root_label, child.label) for o in first[1]):
                return None  # a label matched already is compared, not fitted: not what the proof covers
            orders.append((first[0], tuple((o.index, frozenset(o.node.op_types)) for o in first[1])))
        variants[commutes] = orders
    return variants


def _shallow_probes(pattern: Pattern, op: str) -> list | None:
    """What _fails_shallow tests at a node of op type op, made once per pattern: per root, per operand
    order, (slot, fits) with each fit (output index, op types, _child_probe). None when unprovable."""
    probes = []
    for root in pattern.roots:
        if op not in root.op_types:
            continue
        orders = []
        for terms in _orders(root, op in COMMUTATIVE):
            first = _first_nodes(terms)
            if first is None or any(o.node.label == root.label for o in first[1]):
                return None
            fits = [(o.index, frozenset(o.node.op_types), _child_probe(o.node, root.label)) for o in first[1]]
            orders.append((first[0], fits))
        probes.append(orders)
    return probes


def _fails_shallow(index: GraphIndex, pattern: Pattern, node: onnx.NodeProto) -> bool:
    """True when the pattern provably matches nothing at node and fails with at most two nodes matched: in
    every root and operand order, the first node input (after the variables and constants the matcher takes
    in place) has no producer that fits, or one whose own first node input has none. Such a failure is
    never a near miss (min_nodes >= 2), so skipping the backtracking there changes nothing."""
    op = node.op_type
    if op in pattern.shallow:
        probes = pattern.shallow[op]
    else:
        probes = pattern.shallow[op] = _shallow_probes(pattern, op)
    if probes is None:
        return False
    producer = index.producer
    inputs = index.inputs(node)
    for orders in probes:
        for slot, fits in orders:
            prod = producer.get(inputs[slot]) if slot < len(inputs) else None
            if prod is None:
                continue
            child, k = prod
            for out_index, ops, variants in fits:
                if k != out_index or child.op_type not in ops:
                    continue
                if variants is None:
                    return False
                below = index.inputs(child)
                for slot2, fits2 in variants[child.op_type in COMMUTATIVE]:
                    p2 = producer.get(below[slot2]) if slot2 < len(below) else None
                    if p2 is not None:
                        for i, o in fits2:
                            if p2[1] == i and p2[0].op_type in o:
                                return False
    return True


@dataclass
class SubMatch:
    """A pattern matched inside an imperative rule: its nodes by label and the tensors its variables bound."""

    nodes: dict[str, onnx.NodeProto]
    binds: dict[str, str]

    def __getitem__(self, var: str) -> str:
        return self.binds[var]

    def node(self, label: str) -> onnx.NodeProto | None:
        """The graph node a pattern label matched (None when an alternative without it matched)."""
        return self.nodes.get(label)

    def node_list(self) -> list[onnx.NodeProto]:
        """The matched nodes, root first."""
        return list(self.nodes.values())


def match_at(index: GraphIndex, pattern: Pattern, tensor: str) -> SubMatch | None:
    """The largest match of `pattern` whose root node computes `tensor` (its first output), None if none.

    Only the structure: the calling rule checks what reaches outside the match and what it means.
    """
    prod = index.producer.get(tensor)
    if prod is None or prod[1] != 0 or prod[0].op_type not in pattern.root_ops:
        return None
    states = PatternMatcher(index, pattern).match_root(prod[0])
    st = (max(states, key=lambda s: len(s.nodes), default=None) if pattern.has_alternatives
          else next(states, None))
    return None if st is None else SubMatch(dict(st.nodes), dict(st.binds))


def _passes(pattern: Pattern, op: str, producer_ops: tuple[str | None, ...]) -> bool:
    """Whether a node of op type op whose inputs come from producer_ops passes the pattern's cheap filter."""
    if op not in pattern.root_ops:
        return False
    needs = pattern.need.get(op)
    if needs is None:
        needs = _first_level(pattern, op)
    if not needs:
        return False
    return not all(needs) or any(_may_match(need, producer_ops) for need in needs)


def patterns_at(index: GraphIndex, rule: Rule, node: onnx.NodeProto) -> tuple[int, ...]:
    """The positions in rule.compiled of the patterns that may match at node: a function of the node's op
    type and its producers' op types only, kept on the rule (each of some 10,000 calls a scan made the
    same tests again)."""
    return patterns_for(rule, (node.op_type, tuple(index.producer_ops(node))))


def patterns_for(rule: Rule, key: tuple[str, tuple[str | None, ...]]) -> tuple[int, ...]:
    """patterns_at for the nodes of one kind: key is (op type, its producers' op types)."""
    got = rule.prefilter.get(key)
    if got is None:
        if len(rule.prefilter) >= 4096:  # op-type combinations: few per model, bounded over many
            rule.prefilter.clear()
        got = tuple(pi for pi, p in enumerate(rule.compiled) if _passes(p, key[0], key[1]))
        rule.prefilter[key] = got
    return got


def _judge(index: GraphIndex, rule: Rule, pattern: Pattern, st: _State) -> tuple[Match, str | None, bool]:
    """The match of a state, why it is not valid (None when it is) and whether the rule excludes it."""
    reason, outputs, exposed = _boundary(index, pattern, st)
    m = Match(rule, index, dict(st.nodes), dict(st.binds), outputs, exposed, pattern.source)
    if rule.exclude is not None and rule.exclude(m):
        return m, None, True
    if reason is None and rule.check is not None:
        reason = rule.check(m)  # one that raises is reported by the scan as the rule's failure
    return m, reason, False


def _shorter_form(
    index: GraphIndex, rule: Rule, pi: int, pattern: Pattern, st: _State
) -> tuple[onnx.NodeProto, ...]:
    """The node that st, the largest state at an outer root (Pattern.nested), holds as the inner root, when
    the rule's match there is proved to be st less its root: no earlier pattern of the rule takes that node's
    op, and the state is valid (it is then the first state there, see _nested_roots). That match is a strict
    subset of st's, dropped by the scan, which may skip the node. Else ()."""
    root = next(iter(st.nodes))
    nested = pattern.nested.get(root)
    if nested is None:
        return ()
    inner_label, own_vars = nested
    node = st.nodes.get(inner_label)
    if node is None or any(node.op_type in q.root_ops for q in rule.compiled[:pi]):
        return ()
    nodes = {lb: n for lb, n in st.nodes.items() if lb != root}
    sub = _State(nodes, st.used, {v: t for v, t in st.binds.items() if v not in own_vars})
    try:
        _m, reason, dropped = _judge(index, rule, pattern, sub)
    except Exception:  # noqa: BLE001 - then the node is matched itself, and its failure reported there
        return ()
    return () if reason is not None or dropped else (node,)


def match_rule(index: GraphIndex, rule: Rule, node: onnx.NodeProto) -> tuple[Match | None, Failure | None]:
    """The first valid match of any of the rule's patterns rooted at ``node``, else the deepest failure."""
    return match_patterns(index, rule, node, patterns_at(index, rule, node))


def _size(st: _State) -> int:
    return -len(st.nodes)


def _largest_first(states: Iterator[_State], pattern: Pattern, absent: frozenset[str]) -> Iterator[_State]:
    """The states largest first, in their order within a size (a stable sort). When the first is as large as
    a match at its root may be in this graph (bounds.largest), it comes before the rest are made: they are
    only when it is not taken."""
    first = next(states, None)
    if first is None:
        return
    top = largest(pattern, absent).get(next(iter(first.nodes)))
    if top is not None and len(first.nodes) >= top:
        yield first
        yield from sorted(states, key=_size)
    else:
        yield from sorted([first, *states], key=_size)


def match_patterns(
    index: GraphIndex, rule: Rule, node: onnx.NodeProto, pis: tuple[int, ...],
    absent: frozenset[str] = frozenset(),
) -> tuple[Match | None, Failure | None]:
    """match_rule over the patterns at these positions of rule.compiled (patterns_at: those whose filter
    lets the node through; the scan asks it first, and skips the many nodes with none). absent: op types
    the graph lacks (bounds a match's size: bounds.largest)."""
    best: Failure | None = None
    excluded = -1  # size of the largest match dropped by the rule's exclude (-1: none)
    for pi in pis:
        pattern = rule.compiled[pi]
        if pattern.min_nodes >= 2 and _fails_shallow(index, pattern, node):
            continue
        pm = PatternMatcher(index, pattern)
        # With alternatives one pattern has matches of several sizes: the largest is tried first.
        states = pm.match_root(node)
        if pattern.has_alternatives:
            states = _largest_first(states, pattern, absent)
        for k, st in enumerate(states):
            m, reason, dropped = _judge(index, rule, pattern, st)
            if dropped:
                excluded = max(excluded, len(st.nodes))
                continue
            if reason is None:
                # Patterns come largest first, so this is the largest valid match (Transpose+MatMul+Mul
                # rather than MatMul+Mul).
                if k == 0 and pattern.nested:
                    m.nested_roots = _shorter_form(index, rule, pi, pattern, st)
                return m, None
            f = Failure(len(st.nodes) + 1, reason, list(st.nodes.values()))
            if best is None or f.depth >= best.depth:
                best = f
        pf = pm.failure
        if pf is not None and pf.depth >= pattern.near_miss_depth:
            if best is None or pf.depth > best.depth:
                best = pf
    # An excluded match silences near misses, except a larger match that failed its check.
    if best is not None and excluded >= 0 and len(best.nodes) <= excluded:
        best = None
    return None, best
