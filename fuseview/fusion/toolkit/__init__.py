"""The rule toolkit: what every fusion rule is written with.

* Declarative patterns (most rules): ``Rule(patterns=(fn,), check=..., replace=...)`` where ``fn(op, x, ...)``
  builds the pattern as data with ``op.<OpType>(...)``, alternatives ``op.Or``, optional nodes
  ``op.Optional``, optional inputs ``op.opt``, any-of op types ``op.AnyOp`` and commutative operands tried
  both ways (see :mod:`fuseview.fusion.rule`); :func:`match_rule` matches one rule at one root node.
* Imperative rules (``Rule(find=...)``): ``find(ctx)`` receives the scan's :class:`ScanContext` (graph index,
  one :class:`SymbolicDims`, :class:`Structure` helpers, memo, results of the rules it ``requires``) and
  yields :class:`Match` objects (``Match.custom(..., payload=...)``; ``replace`` reads ``m.payload``) and
  :class:`NearMiss` reasons; a step that does not fit raises :class:`Miss`. A piece an imperative rule
  would otherwise re-detect by hand (``x @ W + b`` in either operand order) is a pattern function matched
  with ``ctx.match(pattern, at=tensor)``, which returns a :class:`SubMatch` (nodes by label, bound tensors).
"""

from fuseview.fusion.matcher import SubMatch, match_at, match_rule
from fuseview.fusion.rule import Match, Miss, NearMiss, Replacement, Rule
from fuseview.fusion.toolkit.context import ScanContext
from fuseview.fusion.toolkit.dims import SymbolicDims
from fuseview.fusion.toolkit.structural import Structure, scalar, shape_inputs_walk, single_reader

__all__ = [
    "Match",
    "Miss",
    "NearMiss",
    "Replacement",
    "Rule",
    "ScanContext",
    "Structure",
    "SubMatch",
    "SymbolicDims",
    "scalar",
    "shape_inputs_walk",
    "match_at",
    "match_rule",
    "single_reader",
]
