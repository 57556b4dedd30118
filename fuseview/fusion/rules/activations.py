"""GELU family: erf/tanh-GELU -> Gelu/FastGelu, bias variants (also Add + ONNX Gelu), SiLU -> QuickGelu."""

from __future__ import annotations

import math

from fuseview.fusion.rule import MS_DOMAIN, Replacement, Rule
from fuseview.fusion.rules._common import (
    all_checks,
    float_input,
    last_axis_vector,
    linear_3d,
    linear_3d_check,
    linear_3d_matmul,
    scalar,
)

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _erf_core(op, x):
    scaled = op.Or(op.Div(x, op.const(SQRT2)), op.Mul(x, op.const(1.0 / SQRT2)))
    return op.Add(op.Erf(scaled), op.const(1.0))


def _tanh_core(op, x):
    cube = op.Or(op.Pow(x, op.const(3.0)), op.Mul(op.Mul(x, x), x))
    inner = op.Add(x, op.Mul(cube, op.const(0.044715)))
    return op.Add(op.Tanh(op.Mul(inner, op.const(SQRT_2_OVER_PI))), op.const(1.0))


def _half_x_core(op, x, core):
    """0.5 * x * core(x) in any of its three bracketings (operand order inside each Mul is free)."""
    c, half = core(op, x), op.const(0.5)
    return op.Or(op.Mul(op.Mul(x, c), half), op.Mul(op.Mul(x, half), c), op.Mul(x, op.Mul(c, half)))


def _gelu_erf(op, x):
    return _half_x_core(op, x, _erf_core)


def _bias_gelu_erf(op, x0, bias):
    return _half_x_core(op, op.Add(x0, bias, _label="bias_add"), _erf_core)


def _linear_gelu_erf(op, x0):
    # A separate pattern (not an op.Or with the bias Add): its size sets the near-miss threshold.
    return _half_x_core(op, linear_3d(op, x0), _erf_core)


def _fast_gelu(op, x):
    return _half_x_core(op, x, _tanh_core)


def _bias_fast_gelu(op, x0, bias):
    return _half_x_core(op, op.Add(x0, bias, _label="bias_add"), _tanh_core)


def _linear_fast_gelu(op, x0):
    return _half_x_core(op, linear_3d(op, x0), _tanh_core)


def _onnx_gelu(approximate: str):
    """Add(bias) + the ONNX Gelu op (opset 20, dynamo exports) with the given approximation."""

    def fn(op, x0, bias):
        return op.Gelu(
            op.Add(x0, bias, _label="bias_add"),
            _label="gelu",
            _attrs={"approximate": approximate},
            _defaults={"approximate": "none"},
        )

    fn.__name__ = f"add_onnx_gelu_{approximate}"
    return fn


def _bias_check(m):
    if "gemm" in m.nodes:
        return linear_3d_check(m)
    if m.value("bias") is None:
        return f"{m['bias']} is not a constant bias"
    return last_axis_vector(m, "bias", "x0")


def _bias_replace(m):
    if "gemm" in m.nodes:
        mm, out = linear_3d_matmul(m, m["x0"])
        return [mm, Replacement([out, m["bias"]])]
    return Replacement([m["x0"], m["bias"]])


def _quick_gelu(op, x):
    """x * sigmoid(alpha * x); without the scale it is SiLU / Swish (alpha = 1)."""
    return op.Mul(x, op.Sigmoid(op.Optional(op.Mul(x, op.constant("alpha"), _label="scale"), x)))


def _quick_alpha(m) -> float | None:
    return scalar(m, "alpha") if "scale" in m.nodes else 1.0


def _quick_check(m):
    a = _quick_alpha(m)
    if a is None:
        return f"{m['alpha']} is not a scalar constant"
    if a <= 0:
        return f"sigmoid scale {a:g} is not positive"
    return None


RULES = [
    Rule(
        name="gelu_erf",
        description="0.5*x*(1+erf(x/sqrt(2))) -> Gelu",
        fused_op="Gelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_gelu_erf,),
        check=float_input("x"),
        priority=10,
        replace=lambda m: Replacement([m["x"]]),
    ),
    Rule(
        name="bias_gelu_erf",
        description="Add(bias) then erf-GELU or ONNX Gelu -> BiasGelu",
        fused_op="BiasGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_bias_gelu_erf, _linear_gelu_erf, _onnx_gelu("none")),
        check=all_checks(float_input("x0"), _bias_check),
        priority=11,
        replace=_bias_replace,
    ),
    Rule(
        name="fast_gelu",
        description="0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))) -> FastGelu",
        fused_op="FastGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_fast_gelu,),
        check=float_input("x"),
        priority=10,
        replace=lambda m: Replacement([m["x"]]),
    ),
    Rule(
        name="bias_fast_gelu",
        description="Add(bias) then tanh-GELU or ONNX Gelu(tanh) -> FastGelu with bias",
        fused_op="FastGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_bias_fast_gelu, _linear_fast_gelu, _onnx_gelu("tanh")),
        check=all_checks(float_input("x0"), _bias_check),
        priority=11,
        replace=_bias_replace,
    ),
    Rule(
        name="quick_gelu",
        description="x*sigmoid(alpha*x) (alpha 1.702), SiLU/Swish x*sigmoid(x) -> QuickGelu",
        fused_op="QuickGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_quick_gelu,),
        check=all_checks(float_input("x"), _quick_check),
        priority=5,
        replace=lambda m: Replacement([m["x"]], {"alpha": _quick_alpha(m)}),
    ),
]
