"""MatMul + Add(bias) -> Gemm (2-D); MatMul with a scalar scale or transposed input -> FusedMatMul;
a linear layer on 3-D input whose Reshapes are computed from shapes -> the same Gemm with light Reshapes."""

from __future__ import annotations

import numpy as np

from fuseview.fusion.rule import MS_DOMAIN, ONNX_DOMAIN, Match, Miss, Replacement, Rule
from fuseview.fusion.rules._common import all_checks, float_input, linear_3d, linear_3d_check, scalar


def _gemm(op, a, b, c):
    return op.Add(op.MatMul(a, b, _label="matmul"), c, _label="add")


def _gemm_check(m: Match) -> str | None:
    sa, sb, sc = m.shape("a"), m.shape("b"), m.shape("c")
    if sa is None or len(sa) != 2 or sb is None or len(sb) != 2:
        return f"MatMul operands have shapes {sa} and {sb}; Gemm needs 2-D A and B"
    n = sb[1]
    if sc is None:
        return f"bias {m['c']} has an unknown shape"
    if len(sc) > 2:
        return f"bias {m['c']} has shape {sc}; Gemm's C must broadcast to [M, N]"
    if len(sc) >= 1 and isinstance(n, int) and isinstance(sc[-1], int) and sc[-1] not in (1, n):
        return f"bias {m['c']} has {sc[-1]} columns, B has {n}"
    if len(sc) == 2 and isinstance(sa[0], int) and isinstance(sc[0], int) and sc[0] not in (1, sa[0]):
        return f"bias {m['c']} has {sc[0]} rows, A has {sa[0]}"
    # Gemm's output must not become larger than the Add's (C broadcasting beyond [M, N] would change shape).
    return None


def _is_last_two_swap(perm, rank) -> bool:
    if perm is None:
        return rank == 2
    n = len(perm)
    return n >= 2 and list(perm) == list(range(n - 2)) + [n - 1, n - 2]


def _side(op, v, side: str):
    """An operand of the MatMul: v, optionally transposed, optionally scaled by a constant."""
    t = op.Optional(op.Transpose(v, _label=f"transpose_{side}"), v)
    return op.Optional(op.Mul(t, op.constant(f"s_{side}"), _label=f"scale_{side}"), t)


def _fused(op, a, b):
    mm = op.MatMul(_side(op, a, "a"), _side(op, b, "b"), _label="matmul")
    return op.Or(op.AnyOp(("Mul", "Div"), mm, op.constant("s"), _label="scale"), mm)


def _plain_matmul(m: Match) -> bool:
    return len(m.nodes) == 1  # nothing to fuse: a bare MatMul


def _alpha(m: Match) -> float | None:
    """Product of the scales (a Div divides); None when a scale is not a scalar constant."""
    alpha = 1.0
    for var, label in (("s_a", "scale_a"), ("s_b", "scale_b"), ("s", "scale")):
        if label not in m.nodes:
            continue
        s = scalar(m, var)
        if s is None or (m.node(label).op_type == "Div" and s == 0):
            return None
        alpha *= 1.0 / s if m.node(label).op_type == "Div" else s
    return alpha


def _fused_check(m: Match) -> str | None:
    for side in ("a", "b"):
        label = f"transpose_{side}"
        if label in m.nodes:
            perm = m.attr(label, "perm")
            if not _is_last_two_swap(perm, m.rank(side)):
                return f"{m.index.name(m.node(label))} has perm {perm}, not a swap of the last two axes"
    for side in ("a", "b"):
        r = m.rank(side)
        if r is not None and r < 2:
            return f"{m[side]} has rank {r}; FusedMatMul needs rank >= 2"
    if _alpha(m) is None:
        scales = [m[v] for v in ("s_a", "s_b", "s") if v in m.bindings]
        return f"scale {', '.join(scales)} is not a non-zero scalar constant"
    return None


def _fused_replace(m: Match) -> Replacement:
    alpha = _alpha(m)
    if alpha is None:
        raise Miss("a scale is not a non-zero scalar constant")
    return Replacement(
        [m["a"], m["b"]],
        {
            "alpha": alpha,
            "transA": int("transpose_a" in m.nodes),
            "transB": int("transpose_b" in m.nodes),
        },
    )


def _linear(op, x):
    return linear_3d(op, x)


def _constant_output_shape(m: Match) -> bool:
    """Nothing to lighten: the Reshape back to 3-D already has a constant target."""
    return m.index.is_const(m["shape_out"])


def _linear_replace(m: Match) -> list[Replacement]:
    """Reshape(x, [-1, K]) -> Gemm -> Reshape(x's leading dims + [N]): the target read from x in two
    small nodes instead of the export's Shape/Gather/Unsqueeze/Concat chains (left without readers)."""
    x, gemm = m["x"], m.node("gemm").output[0]
    k, n = m.array("w").shape
    base = gemm.replace("/", "_").strip("_")
    flat_shape, width = f"{base}_flat_shape", f"{base}_width"
    lead, target, flat = f"{gemm}_lead", f"{gemm}_target", f"{gemm}_flat"
    if m.index.opsets.get("", 0) >= 15:  # Shape's start/end came with opset 15
        lead_nodes = [Replacement([x], {"end": -1}, op="Shape", domain="", outputs=[lead])]
    else:
        shape, ends = f"{gemm}_shape", f"{base}_slice_ends"
        starts = f"{base}_slice_starts"
        lead_nodes = [
            Replacement([x], op="Shape", domain="", outputs=[shape]),
            Replacement([shape, starts, ends], op="Slice", domain="", outputs=[lead],
                        initializers={starts: np.array([0], np.int64), ends: np.array([-1], np.int64)}),
        ]
    return [
        Replacement([x, flat_shape], op="Reshape", domain="", outputs=[flat],
                    initializers={flat_shape: np.array([-1, k], np.int64)}),
        Replacement([flat, m["w"], m["bias"]], op="Gemm", domain="", outputs=[f"{gemm}_2d"]),
        *lead_nodes,
        Replacement([lead, width], {"axis": 0}, op="Concat", domain="", outputs=[target],
                    initializers={width: np.array([n], np.int64)}),
        Replacement([f"{gemm}_2d", target], op="Reshape", domain=""),
    ]


RULES = [
    Rule(
        name="linear_3d",
        description="Reshape -> Gemm(W, bias) -> Reshape with targets computed from shapes -> the same"
        " Gemm with a constant flatten and the leading dims read once",
        fused_op="Gemm",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_linear,),
        check=linear_3d_check,
        exclude=_constant_output_shape,
        priority=4,
        replace=_linear_replace,
    ),
    Rule(
        name="matmul_add_gemm",
        description="MatMul + Add(bias) with 2-D operands -> Gemm",
        fused_op="Gemm",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_gemm,),
        check=all_checks(float_input("a", "b"), _gemm_check),
        priority=8,
        replace=lambda m: Replacement([m["a"], m["b"], m["c"]]),
    ),
    Rule(
        name="fused_matmul",
        description="MatMul with a constant scalar scale or a transposed input -> FusedMatMul",
        fused_op="FusedMatMul",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_fused,),
        check=all_checks(float_input("a", "b"), _fused_check),
        exclude=_plain_matmul,
        priority=7,
        replace=_fused_replace,
    ),
]
