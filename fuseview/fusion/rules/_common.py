"""Helpers shared by rule modules: pattern variants and common checks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from fuseview.fusion.rule import Match

FLOAT = onnx.TensorProto.FLOAT


def product3(op, a, b, c, variant: int, **kw):
    """a*b*c as one of the three bracketings (operand order inside each Mul is tried by the matcher)."""
    if variant == 0:
        return op.Mul(op.Mul(a, b), c, **kw)
    if variant == 1:
        return op.Mul(op.Mul(a, c), b, **kw)
    return op.Mul(a, op.Mul(b, c), **kw)


def float_input(*vars_: str) -> Callable[[Match], str | None]:
    """Check that bound tensors are float32 (the CPU kernels of the contrib ops are float-only)."""

    def check(m: Match) -> str | None:
        for v in vars_:
            dt = m.index.const_dtype(m[v])
            if dt is not None and dt != FLOAT:
                return f"{m[v]} is {onnx.TensorProto.DataType.Name(dt)}, the fused kernel needs float32"
        return None

    return check


def all_checks(*checks: Callable[[Match], str | None] | None) -> Callable[[Match], str | None]:
    """Combine checks: the first reason wins."""

    def check(m: Match) -> str | None:
        for c in checks:
            if c is not None:
                r = c(m)
                if r:
                    return r
        return None

    return check


def scalar(m: Match, var: str) -> float | None:
    """The single value of a constant variable, None if it is not a one-element constant."""
    v = m.value(var)
    if v is None or v.size != 1:
        return None
    return float(np.ravel(v)[0])


def last_axis_vector(m: Match, var: str, x: str) -> str | None:
    """Reason unless constant ``var`` is 1-D with the size of ``x``'s last dim."""
    v = m.value(var)
    if v is None:
        return f"{m[var]} is not a constant"
    shape = m.shape(x)
    if v.ndim != 1:
        if v.size > 1 and all(d == 1 for d in v.shape[:-1]):
            pass
        else:
            return f"{m[var]} has shape {list(v.shape)}, expected a vector over the last axis"
    if shape and isinstance(shape[-1], int) and v.shape[-1] != shape[-1]:
        return f"{m[var]} has {v.shape[-1]} values, last dim of {m[x]} is {shape[-1]}"
    return None


def is_last_axis(m: Match, label: str, x: str) -> str | None:
    """Reason unless the reduce node ``label`` reduces only the last axis of ``x`` and keeps dims."""
    axes = m.axes(label)
    rank = m.rank(x)
    if axes is None or len(axes) != 1:
        return f"{m.index.name(m.node(label))} reduces axes {axes}, expected the last axis only"
    a = axes[0]
    if a != -1 and (rank is None or a != rank - 1):
        return f"{m.index.name(m.node(label))} reduces axis {a}, expected the last axis"
    if m.attr(label, "keepdims", 1) != 1:
        return f"{m.index.name(m.node(label))} drops the reduced axis (keepdims=0)"
    return None
