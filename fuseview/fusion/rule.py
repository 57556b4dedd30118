"""The fusion rule API: a rule is a small declarative pattern, a check, and a replacement.

How to write a rule
-------------------
A rule module in ``fuseview/fusion/rules/`` defines a module-level list ``RULES`` of :class:`Rule` objects;
``fuseview.fusion.rules.catalogue()`` collects them from every module listed in ``RULE_MODULES``.

A *pattern* is a plain function whose parameters are pattern variables (any tensor) and whose body builds
the subgraph with ``op.<OpType>(inputs..., _label=..., _attrs=..., _domain=..., _extra_inputs=...)``:

* ``op.const(0.5, tol=1e-4)`` matches a constant (initializer or Constant node) holding one value close to
  0.5 (a scalar or a one-element tensor); ``op.constant("gamma")`` matches any constant and binds it to
  the variable ``gamma``; ``op.var("s")`` is a plain variable a helper introduces. Parameters with a
  default value are not variables: they configure variants built in a loop (``def fn(op, x, flag=flag)``).
* Variants are declared inside one pattern instead of generated in loops:
  ``op.Or(t1, t2, ...)`` matches any of its alternatives (nodes, variables or constants; like onnxscript's
  ``OrValue``), also as the root; ``op.Optional(node_out, skip)`` is ``op.Or(node_out, skip)``: the node may
  be there or the tensor ``skip`` stands in its place (e.g. an optional bias Add); ``op.opt(term)`` marks a
  trailing node input as optional (``op.Conv(x, w, op.opt(b))`` matches Conv with or without a bias; ``b`` is
  then unbound); ``op.AnyOp(("Relu", "Tanh"), y)`` matches a node of any of those types. Labels may repeat
  across alternatives (``m.node("scale")`` is then whichever matched).
* A rule may list several pattern functions; the largest structural match at a root wins.
* Add and Mul (and the other ops in ``COMMUTATIVE``) are tried in both operand orders automatically.
* Reusing a sub-expression (``d = op.Sub(x, mean)`` used twice) means the *same* graph node in both places;
  reusing a variable means the same tensor.
* ``_attrs={"axis": -1}`` requires attribute values (missing attributes compare with ``_defaults``);
  ``_extra_inputs=True`` lets the graph node have more inputs than the pattern names (opset-18 ``axes``).
* ``_expose=True`` on a node lets its output be consumed outside the match (the replacement must then
  produce that tensor, e.g. SkipLayerNormalization's ``input_skip_bias_sum``). Any other intermediate that
  is a graph output or has a consumer outside the match makes the match a near miss, never a candidate.
* The function returns the root node (the last node of the match; its outputs stay the outputs).

``check(m)`` returns None when the match is valid, otherwise a one-line reason (kept as a near miss);
``exclude(m)`` (optional) returns True to drop a match silently (it belongs to another rule).
Within one rule, a candidate whose nodes are a strict subset of another candidate's is dropped.
``replace(m)`` returns one :class:`Replacement` (or a list): op, inputs, attributes; outputs default to the
root's outputs (plus used exposed outputs, see ``Match.outputs`` / ``Match.exposed``), new initializers go
in ``initializers``; ``op=""`` makes no node (the outputs become initializers). The engine names nodes, adds
provenance metadata, declares domains, raises the ONNX opset when a fused ONNX op needs it and no other op
changes meaning, drops nodes left without readers, and keeps the node order topological.

In ``check``/``replace``: ``m["x"]`` is the tensor bound to ``x``, ``m.node(label)`` the matched node,
``m.value(var)`` a constant's numpy value (None when not readable; ``m.array(var)`` and ``m.number(var)``,
its one value, raise :class:`Miss` instead: for what the check has already proved), ``m.shape(var)`` its
inferred shape (ints under the scan's dims), ``m.attr(label, name)``, ``m.axes(label)`` (attribute or
opset-18 input), ``m.index`` the GraphIndex.

Tiny example (erf-GELU -> com.microsoft Gelu)::

    def _gelu(op, x):
        inner = op.Erf(op.Div(x, op.const(1.4142135, tol=1e-4)))
        return op.Mul(op.Mul(x, op.Add(inner, op.const(1.0))), op.const(0.5))

    RULES = [Rule(
        name="gelu_erf", description="erf-GELU subgraph -> Gelu",
        fused_op="Gelu", domain=MS_DOMAIN, runs_on=("cpu", "cuda"),
        patterns=(_gelu,),
        replace=lambda m: Replacement(inputs=[m["x"]]),
    )]

Rules whose matches are not a fixed shape (attention, constant folding) may instead give ``find(ctx)``, a
function of the scan's :class:`fuseview.fusion.toolkit.ScanContext` yielding :class:`Match` objects built with
:meth:`Match.custom` (what ``replace`` needs goes in ``payload``) and :class:`NearMiss` reasons. A rule that
reads another rule's matches (``ctx.result(name)``: their payloads) names it in ``requires``; the scan runs
rules in an order that honours every ``requires``, whatever the catalogue order. A rule that raises on a
graph it did not expect yields a near miss saying so; the scan goes on. A check, replace or find step that
raises :class:`Miss` gives its message as the near miss's reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MS_DOMAIN = "com.microsoft"
ONNX_DOMAIN = ""
RUNS_ON = ("cpu", "cuda", "reference")
COMMUTATIVE = frozenset({"Add", "Mul", "Max", "Min", "Sum", "And", "Or", "Equal"})


class Miss(Exception):
    """A near miss: the one-line reason why a structure is not an exact match."""


# ----------------------------------------------------------------------------------------------- patterns
class PTerm:
    """A term in a pattern: a variable, a constant, or an op node."""


@dataclass(eq=False)
class PVar(PTerm):
    name: str
    constant: bool = False  # must be an initializer / Constant output


@dataclass(eq=False)
class PConst(PTerm):
    value: float
    tol: float = 1e-4


@dataclass(eq=False)
class POut(PTerm):
    """Output ``index`` of a pattern node."""

    node: PNode
    index: int = 0


@dataclass(eq=False)
class PAlt(PTerm):
    """Alternatives: the first of them (in order) that matches, each tried in turn by the backtracking."""

    alternatives: list[PTerm]


@dataclass(eq=False)
class POpt(PTerm):
    """A trailing node input that may be absent (or empty) in the graph."""

    term: PTerm


@dataclass(eq=False)
class PNode:
    op_type: str
    inputs: list[PTerm]
    label: str
    domain: str = ""
    attrs: dict[str, Any] = field(default_factory=dict)
    defaults: dict[str, Any] = field(default_factory=dict)
    extra_inputs: bool = False
    expose: bool = False
    commutative: bool = False
    alt_ops: tuple[str, ...] = ()  # op types accepted besides op_type (op.AnyOp)
    op_types: tuple[str, ...] = ()  # every op type this node accepts (op_type + alt_ops), set on build
    required: int = 0  # inputs the graph node must have (the trailing op.opt inputs may be missing)

    def __post_init__(self) -> None:
        self.finish()

    def finish(self) -> None:
        """Derive op_types and required from op_type, alt_ops and inputs (matching reads them per node)."""
        self.op_types = (self.op_type, *self.alt_ops)
        need = len(self.inputs)
        while need and isinstance(self.inputs[need - 1], POpt):
            need -= 1
        self.required = need


class OpBuilder:
    """The ``op`` handed to pattern functions: ``op.Add(a, b)`` builds a pattern node."""

    def __init__(self) -> None:
        self.nodes: list[PNode] = []
        self._counts: dict[str, int] = {}

    def const(self, value: float, tol: float = 1e-4) -> PConst:
        """A constant holding one value close to ``value``."""
        return PConst(float(value), tol)

    def var(self, name: str) -> PVar:
        """Any tensor, bound to variable ``name`` (for variables a helper introduces)."""
        return PVar(name)

    def constant(self, name: str) -> PVar:
        """Any constant tensor, bound to variable ``name``."""
        return PVar(name, constant=True)

    def Or(self, *alternatives: PTerm) -> PAlt:  # noqa: N802 - reads like the op builders
        """Any one of the alternatives (tried in the order given)."""
        flat: list[PTerm] = []
        for a in alternatives:
            flat.extend(a.alternatives if isinstance(a, PAlt) else [a])
        return PAlt(flat)

    def Optional(self, present: PTerm, skip: PTerm) -> PAlt:  # noqa: N802
        """An optional node: ``present`` if the graph has it, else the tensor ``skip`` in its place."""
        return self.Or(present, skip)

    def opt(self, term: PTerm) -> POpt:
        """A trailing node input that the graph node may lack."""
        return POpt(term)

    def AnyOp(self, op_types: Sequence[str], *inputs: PTerm, **kw: Any) -> Any:  # noqa: N802
        """A node of any of ``op_types`` (its label defaults to the first type)."""
        first, *rest = op_types
        out = getattr(self, first)(*inputs, **kw)
        node = (out[0] if isinstance(out, tuple) else out).node
        node.alt_ops = tuple(rest)
        node.finish()
        return out

    def __getattr__(self, op_type: str) -> Callable[..., POut]:
        if op_type.startswith("_"):
            raise AttributeError(op_type)

        def make(
            *inputs: PTerm | POut,
            _label: str | None = None,
            _attrs: dict | None = None,
            _defaults: dict | None = None,
            _domain: str = "",
            _extra_inputs: bool = False,
            _expose: bool = False,
            _outputs: int = 1,
        ) -> Any:
            n = self._counts.get(op_type, 0)
            self._counts[op_type] = n + 1
            label = _label or (op_type if n == 0 else f"{op_type}_{n}")
            node = PNode(
                op_type,
                list(inputs),
                label,
                _domain,
                dict(_attrs or {}),
                dict(_defaults or {}),
                _extra_inputs,
                _expose,
                op_type in COMMUTATIVE and len(inputs) == 2,
            )
            self.nodes.append(node)
            if _outputs == 1:
                return POut(node, 0)
            return tuple(POut(node, i) for i in range(_outputs))

        return make


def _smallest(term: PTerm, seen: set[int]) -> int:
    """Fewest nodes a match of ``term`` can hold (shared sub-expressions counted once)."""
    if isinstance(term, PAlt):
        return min(_smallest(a, set(seen)) for a in term.alternatives)
    if isinstance(term, POpt):
        return 0
    if isinstance(term, POut):
        if id(term.node) in seen:
            return 0
        seen.add(id(term.node))
        return 1 + sum(_smallest(t, seen) for t in term.node.inputs)
    return 0


def _var_names(terms: Iterable[PTerm]) -> list[str]:
    """Names of the variables among terms (inside alternatives and optional inputs too)."""
    out: list[str] = []
    for t in terms:
        if isinstance(t, PVar):
            out.append(t.name)
        elif isinstance(t, PAlt):
            out += _var_names(t.alternatives)
        elif isinstance(t, POpt):
            out += _var_names([t.term])
    return out


def _nested_roots(roots: list[PNode], nodes: list[PNode]) -> dict[str, tuple[str, frozenset[str]]]:
    """Outer root label -> (inner root label, the outer root's variables) for each root whose one node input
    is another root, its other inputs variables of its own or constants, where no other root takes the inner
    root's op types and both labels are unique: every match of the inner root at a node then is a match of
    the outer one at its consumer less that consumer, in the same order (the matcher relies on it)."""
    out: dict[str, tuple[str, frozenset[str]]] = {}
    labels = [n.label for n in nodes]
    for outer in roots if len(roots) > 1 else ():
        subs = [t for t in outer.inputs if isinstance(t, POut)]
        rest = [t for t in outer.inputs if not isinstance(t, POut)]
        if len(subs) != 1 or subs[0].index != 0 or not all(type(t) in (PVar, PConst) for t in rest):
            continue
        inner = subs[0].node
        if all(inner is not r for r in roots) or labels.count(inner.label) + labels.count(outer.label) != 2:
            continue
        if any(r is not inner and set(r.op_types) & set(inner.op_types) for r in roots):
            continue
        own = _var_names(rest)
        elsewhere = _var_names(t for n in nodes if n is not outer for t in n.inputs)
        if len(set(own)) == len(own) and not set(own) & set(elsewhere):
            out[outer.label] = (inner.label, frozenset(own))
    return out


@dataclass
class Pattern:
    """A compiled pattern: its root nodes (alternatives), all its nodes and the variable names."""

    root: PNode
    nodes: list[PNode]
    variables: list[str]
    source: str
    roots: list[PNode] = field(default_factory=list)
    min_nodes: int = 0
    # False for a plain pattern: every match has the same size, so the first valid one can be taken
    has_alternatives: bool = False
    root_ops: frozenset[str] = frozenset()
    need: dict[str, list] = field(default_factory=dict, repr=False)  # matcher's first-level filter cache
    shallow: dict[str, Any] = field(default_factory=dict, repr=False)  # matcher's _fails_shallow probes

    exposed_labels: frozenset[str] = frozenset()
    # an Optional root (op.Optional(op.Add(scaled, beta), scaled)): the outer root's label -> the inner
    # root's label and the outer root's own variables (see _nested_roots)
    nested: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict, repr=False)

    # memos of fuseview.fusion.bounds, per set of op types absent from a graph
    barren: dict[frozenset[str], bool] = field(default_factory=dict, repr=False)
    sizes: dict[frozenset[str], dict[str, int]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.root_ops = frozenset(t for r in self.roots for t in r.op_types)
        self.exposed_labels = frozenset(n.label for n in self.nodes if n.expose)
        self.nested = _nested_roots(self.roots, self.nodes)

    @property
    def near_miss_depth(self) -> float:
        """How deep a failure must go to be reported as a near miss (a short pattern must fail past its
        end: at its check; a long one may miss by one node)."""
        n = self.min_nodes
        return max(3, n - 1) if n >= 4 else n + 1

    @property
    def max_nodes(self) -> int:
        """Pattern nodes over every alternative (an upper bound on a match's size)."""
        return len(self.nodes)

    @classmethod
    def build(cls, fn: Callable[..., POut]) -> Pattern:
        """Run a pattern function with an :class:`OpBuilder` and fresh variables."""
        op = OpBuilder()
        params = list(inspect.signature(fn).parameters.values())[1:]
        # Parameters with defaults configure a variant (closures in loops); the others are variables.
        names = [p.name for p in params if p.default is inspect.Parameter.empty]
        out = fn(op, *[PVar(n) for n in names])
        alts = out.alternatives if isinstance(out, PAlt) else [out]
        if not alts or not all(isinstance(a, POut) for a in alts):
            raise TypeError(f"pattern {fn.__name__} must return a node output (or op.Or of node outputs)")
        roots = list({id(a.node): a.node for a in alts if isinstance(a, POut)}.values())
        alternative = len(alts) > 1 or any(
            n.alt_ops or any(isinstance(t, (PAlt, POpt)) for t in n.inputs) for n in op.nodes
        )
        return cls(roots[0], op.nodes, names, fn.__name__, roots, _smallest(out, set()), alternative)


# ------------------------------------------------------------------------------------------------ matches
@dataclass
class Match:
    """A structural match of a pattern in a graph (before the check)."""

    rule: Rule
    index: Any  # fuseview.fusion.graphindex.GraphIndex
    nodes: dict[str, Any]  # pattern label -> onnx NodeProto
    bindings: dict[str, str]  # variable name -> tensor name
    outputs: list[str]  # the tensors the fused node(s) must produce (root outputs + used exposed outputs)
    exposed: dict[str, str] = field(default_factory=dict)  # label -> exposed tensor that is used outside
    pattern: str = ""
    payload: Any = None  # what a find() rule's replace needs (its own match object)
    # nodes this match holds as its pattern's inner root where the match would be this one less its root
    # (proved valid by the matcher): a strict subset of this one, so the scan need not match there
    nested_roots: tuple[Any, ...] = ()

    @classmethod
    def custom(
        cls,
        rule: Rule,
        index: Any,
        nodes: Sequence[Any],
        outputs: Sequence[str],
        bindings: dict[str, str] | None = None,
        payload: Any = None,
    ) -> Match:
        """A match found by a rule's own ``find`` (labels are the node positions)."""
        return cls(
            rule,
            index,
            {str(i): n for i, n in enumerate(nodes)},
            dict(bindings or {}),
            list(outputs),
            pattern="find",
            payload=payload,
        )

    def __getitem__(self, var: str) -> str:
        return self.bindings[var]

    def node(self, label: str) -> Any:
        """The graph node matched to a pattern label."""
        return self.nodes[label]

    def value(self, var_or_tensor: str) -> np.ndarray | None:
        """Constant value of a bound variable (or tensor name), None if not constant."""
        return self.index.const_value(self.bindings.get(var_or_tensor, var_or_tensor))

    def array(self, var_or_tensor: str) -> np.ndarray:
        """Constant value of a bound variable (or tensor name); Miss when it cannot be read."""
        tensor = self.bindings.get(var_or_tensor, var_or_tensor)
        value = self.index.const_value(tensor)
        if value is None:
            raise Miss(f"{tensor} is not a constant this scan reads")
        return value

    def number(self, var_or_tensor: str) -> float:
        """The one value of a one-element constant; Miss when it is not one."""
        value = self.array(var_or_tensor)
        if value.size != 1:
            raise Miss(f"{self.bindings.get(var_or_tensor, var_or_tensor)} is not a single number")
        return float(np.ravel(value)[0])

    def shape(self, var_or_tensor: str) -> list | None:
        """Inferred shape (ints or dim names) of a bound variable or tensor, None if unknown."""
        return self.index.shape(self.bindings.get(var_or_tensor, var_or_tensor))

    def attr(self, label: str, name: str, default: Any = None) -> Any:
        """Attribute value of the node matched to ``label``."""
        return self.index.attr(self.nodes[label], name, default)

    def axes(self, label: str) -> list[int] | None:
        """Reduce axes of a matched node, from its attribute (opset < 18) or its second input."""
        node = self.nodes[label]
        ax = self.index.attr(node, "axes", None)
        if ax is not None:
            return [int(a) for a in ax]
        if len(node.input) > 1 and node.input[1]:
            v = self.index.const_value(node.input[1])
            return None if v is None else [int(a) for a in np.ravel(v)]
        return None

    def rank(self, var_or_tensor: str) -> int | None:
        """Rank of a bound tensor if inferred."""
        s = self.shape(var_or_tensor)
        return None if s is None else len(s)

    @property
    def node_list(self) -> list[Any]:
        """Matched nodes in graph order."""
        return sorted(self.nodes.values(), key=self.index.position)


@dataclass
class Replacement:
    """One node the fused subgraph becomes; op/domain default to the rule's fused op."""

    inputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    op: str | None = None
    domain: str | None = None
    outputs: list[str] | None = None
    initializers: dict[str, np.ndarray] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------------- rules
PatternFn = Callable[..., POut]


@dataclass(eq=False)
class Rule:
    """A fusion rule: what it matches (patterns or find), when it applies (check), what it becomes."""

    name: str
    description: str
    fused_op: str
    domain: str
    runs_on: tuple[str, ...]
    patterns: tuple[PatternFn, ...] = ()
    replace: Callable[[Match], Replacement | list[Replacement]] | None = None
    check: Callable[[Match], str | None] | None = None
    find: Callable[[Any], Iterable[Match | NearMiss]] | None = None  # find(ctx: ScanContext)
    requires: tuple[str, ...] = ()  # rules whose results find() reads (ctx.result), run before this one
    # True for a structural match that belongs to another rule (e.g. the RMS tail of a LayerNorm):
    # dropped silently instead of being reported as a near miss.
    exclude: Callable[[Match], bool] | None = None
    # Larger fusions first: among conflicting candidates "first come first served" then prefers them.
    priority: int = 0
    compiled: list[Pattern] = field(default_factory=list, repr=False)
    # (op type, input producers' op types) -> positions of the compiled patterns its filter lets through
    # (not an init field: a copy of the rule made with other patterns starts without it)
    prefilter: dict[tuple, tuple[int, ...]] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        bad = [r for r in self.runs_on if r not in RUNS_ON]
        if bad or not self.runs_on:
            raise ValueError(f"rule {self.name}: runs_on must be a subset of {RUNS_ON}")
        if not self.patterns and self.find is None:
            raise ValueError(f"rule {self.name}: needs patterns or find")
        if self.replace is None:
            raise ValueError(f"rule {self.name}: needs replace")
        # Largest patterns first: the first valid match at a root is then the largest one.
        self.compiled = sorted((Pattern.build(p) for p in self.patterns), key=lambda p: -p.max_nodes)

    @property
    def reference_only(self) -> bool:
        """True when no onnxruntime provider runs the fused op."""
        return tuple(self.runs_on) == ("reference",)

    @property
    def op_types(self) -> set[str]:
        """Op types of the pattern roots (where matching starts)."""
        return {t for p in self.compiled for r in p.roots for t in r.op_types}


@dataclass
class Candidate:
    """One proposed fusion found by scanning; ``id`` is stable for the same rule and node names."""

    id: str
    rule: str
    fused_op: str
    domain: str
    runs_on: tuple[str, ...]
    nodes: list[str]  # matched node names (graph order)
    removed_tensors: list[str]
    saved_bytes: int | None  # None when a removed tensor's size is unknown
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    match: Match | None = field(default=None, repr=False, compare=False)
    scope: str = ""  # "" for the main graph, else the inner graph, e.g. "cond_node:then_branch ▸ loop:body"
    # memory traffic fusing removes: each removed tensor written once and read by each of its consumers
    traffic_bytes: int | None = None

    def to_json(self) -> dict:
        """The JSON object `fuseview scan --json` prints for this candidate."""
        return {
            "id": self.id,
            "rule": self.rule,
            "fused_op": self.fused_op,
            "domain": self.domain,
            "runs_on": list(self.runs_on),
            "nodes": list(self.nodes),
            "removed_tensors": list(self.removed_tensors),
            "saved_bytes": self.saved_bytes,
            "traffic_bytes": self.traffic_bytes,
            "conflicts": list(self.conflicts),
            "scope": self.scope,
        }


@dataclass(frozen=True)
class NearMiss:
    """A rule that nearly matched: the nodes it matched so far and why it stopped."""

    rule: str
    nodes: tuple[str, ...]
    reason: str

    def __iter__(self):  # unpacks as (rule, node names, reason)
        return iter((self.rule, list(self.nodes), self.reason))
