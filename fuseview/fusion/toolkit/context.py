"""ScanContext: what one scan shares between its rules, made once per scan and handed to ``Rule.find(ctx)``.

It holds the graph index (producers, consumers, constants, inferred shapes), the one symbolic dims engine
and structural helpers (built on first use), a memo for the stages several rules build on (the attention
cores) and the payloads of the rules already run, which a rule reads with ``ctx.result(name)`` after
declaring that rule in its ``requires``. ``ctx.match(pattern, at=tensor)`` matches a declarative pattern
inside an imperative rule, so both kinds of rule are written in one pattern language. Nothing outlives the
scan: no module-level cache holds a graph.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any, TypeVar

import numpy as np
import onnx

from fuseview.fusion.matcher import SubMatch, match_at
from fuseview.fusion.rule import Pattern
from fuseview.fusion.toolkit.dims import SymbolicDims
from fuseview.fusion.toolkit.structural import Structure

T = TypeVar("T")


class ScanContext:
    """Per-scan state shared by the rules: index, dims engine, structure helpers, memo and results."""

    def __init__(self, index: Any) -> None:
        self.index = index
        self._memo: dict[object, Any] = {}
        self._results: dict[str, list[Any]] = {}

    @cached_property
    def dims(self) -> SymbolicDims:
        """The scan's one symbolic dims engine (memoised dims and shape vectors)."""
        return SymbolicDims(self.index)

    @cached_property
    def structure(self) -> Structure:
        """Graph-walking helpers over this scan's index and dims engine."""
        return Structure(self.index, self.dims)

    @property
    def graph(self) -> onnx.GraphProto:
        """The scanned graph."""
        return self.index.graph

    def producer(self, tensor: str) -> onnx.NodeProto | None:
        """The node producing a tensor (None for graph inputs and initializers)."""
        return self.dims.producer(tensor)

    def consumers(self, tensor: str) -> list[onnx.NodeProto]:
        """The nodes reading a tensor."""
        return list(self.index.consumers.get(tensor, ()))

    def constant(self, tensor: str) -> np.ndarray | None:
        """A constant tensor's value (initializer or Constant output), None when it is not constant."""
        return self.index.const_value(tensor) if self.index.is_const(tensor) else None

    def match(self, pattern: Callable[..., Any], at: str) -> SubMatch | None:
        """Match a pattern function (the declarative rules' ``fn(op, x, ...)``) rooted at the node computing
        tensor `at`: its nodes by label and its variables' tensors, or None. Compiled once per scan."""
        compiled = self.memo(("pattern", pattern), lambda _ctx: Pattern.build(pattern))
        return match_at(self.index, compiled, at)

    def memo(self, key: object, compute: Callable[[ScanContext], T]) -> T:
        """compute(self) once per scan for key (a stage several rules share)."""
        if key not in self._memo:
            self._memo[key] = compute(self)
        return self._memo[key]

    def record(self, rule: str, payloads: list[Any]) -> None:
        """Keep a rule's match payloads for the rules that declare it in their requires."""
        self._results[rule] = payloads

    def result(self, rule: str) -> list[Any]:
        """The payloads of a rule already run in this scan (declare it in your rule's ``requires``)."""
        if rule not in self._results:
            raise LookupError(f"rule {rule!r} has not run in this scan: list it in the rule's requires")
        return self._results[rule]
