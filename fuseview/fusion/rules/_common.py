"""Helpers shared by rule modules: pattern variants and common checks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx

from fuseview.fusion.dtypes import is_float, type_name
from fuseview.fusion.rule import Match, Replacement

FLOAT = onnx.TensorProto.FLOAT


def float_input(*vars_: str) -> Callable[[Match], str | None]:
    """Check that bound tensors are of one float type, float32 or float16 (which provider has the fused
    kernel in that type is the kernel table's to say, fusion.kernels)."""

    def check(m: Match) -> str | None:
        seen: dict[int, str] = {}
        for v in vars_:
            dt = m.index.const_dtype(m[v])
            if dt is not None and not is_float(dt):
                return f"{m[v]} is {type_name(dt)}, the fused kernel needs float32 or float16"
            if dt is not None:
                seen.setdefault(dt, m[v])
        if len(seen) > 1:
            (a, ta), (b, tb) = list(seen.items())[:2]
            return f"{ta} is {type_name(a)} but {tb} is {type_name(b)}: the fused kernel takes one type"
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


def linear_3d(op, x):
    """Reshape(x, [-1, K]) -> Gemm(W, bias) -> Reshape([B, S, N]): TorchScript's Conv1D / nn.Linear on 3-D x.

    Becomes MatMul(x, W) plus a bias input of the fused op that follows, which also drops the Shape/Gather/
    Concat subgraphs that only fed the two Reshapes.
    """
    flat = op.Reshape(x, op.var("shape_in"), _label="reshape_in")
    gemm = op.Gemm(flat, op.constant("w"), op.constant("bias"), _label="gemm")
    return op.Reshape(gemm, op.var("shape_out"), _label="reshape_out")


def linear_3d_check(m: Match) -> str | None:
    """Reason unless the Reshape/Gemm/Reshape really is x @ W + bias over the last axis of a 3-D x."""
    if "gemm" not in m.nodes:
        return None
    for a, want in (("alpha", 1.0), ("beta", 1.0), ("transA", 0), ("transB", 0)):
        if m.attr("gemm", a, want) != want:
            return f"Gemm has {a}={m.attr('gemm', a)}; only plain x @ W + bias is rewritten"
    sx = m.shape(m.node("reshape_in").input[0])
    sf = m.shape(m.node("reshape_in").output[0])
    so = m.shape(m.node("reshape_out").output[0])
    w = m.value("w")
    bias = m.value("bias")
    if sx is None or sf is None or so is None or w is None or bias is None \
            or not all(isinstance(d, int) for d in (*sx, *sf, *so)):
        return "shapes around the Gemm are unknown"
    if len(sx) < 2 or w.ndim != 2 or bias.ndim != 1 or bias.shape[0] != w.shape[1]:
        return f"Gemm input {sx}, weight {list(w.shape)}, bias {list(bias.shape)}: not a linear layer"
    if list(sf) != [int(np.prod(sx[:-1])), sx[-1]] or list(so) != list(sx[:-1]) + [w.shape[1]]:
        return f"Reshapes {sx} -> {sf} -> {so} do not just flatten and restore the leading dims"
    return None


def linear_3d_matmul(m: Match, x: str) -> tuple[Replacement, str]:
    """The MatMul replacing Reshape/Gemm/Reshape, and the name of its output."""
    out = m.node("gemm").output[0] + "_matmul"
    return Replacement([x, m["w"]], op="MatMul", domain="", outputs=[out]), out
