"""GELU family: erf-GELU -> Gelu, tanh-GELU -> FastGelu, bias variants, x*sigmoid(a*x) -> QuickGelu."""

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
    product3,
    scalar,
)

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _erf_core(op, x, div: bool):
    scaled = op.Div(x, op.const(SQRT2)) if div else op.Mul(x, op.const(1.0 / SQRT2))
    return op.Add(op.Erf(scaled), op.const(1.0))


def _cube(op, x, pow_: bool):
    return op.Pow(x, op.const(3.0)) if pow_ else op.Mul(op.Mul(x, x), x)


def _tanh_core(op, x, pow_: bool):
    inner = op.Add(x, op.Mul(_cube(op, x, pow_), op.const(0.044715)))
    return op.Add(op.Tanh(op.Mul(inner, op.const(SQRT_2_OVER_PI))), op.const(1.0))


def _variants(core, bias: bool | str):
    """Patterns for 0.5*x*core(x): every bracketing and core variant, optional bias Add or linear layer."""
    fns = []
    for variant in range(3):
        for flag in (True, False):
            if bias == "gemm":

                def fn(op, x0, variant=variant, flag=flag):
                    x = linear_3d(op, x0)
                    return product3(op, x, core(op, x, flag), op.const(0.5), variant)
            elif bias:

                def fn(op, x0, bias, variant=variant, flag=flag):
                    x = op.Add(x0, bias, _label="bias_add")
                    return product3(op, x, core(op, x, flag), op.const(0.5), variant)
            else:

                def fn(op, x, variant=variant, flag=flag):
                    return product3(op, x, core(op, x, flag), op.const(0.5), variant)

            fn.__name__ = f"{core.__name__.strip('_')}_{variant}_{int(flag)}{'_bias' if bias else ''}"
            fns.append(fn)
    return tuple(fns)


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
    return op.Mul(x, op.Sigmoid(op.Mul(x, op.constant("alpha"))))


def _quick_check(m):
    a = scalar(m, "alpha")
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
        patterns=_variants(_erf_core, bias=False),
        check=float_input("x"),
        priority=10,
        replace=lambda m: Replacement([m["x"]]),
    ),
    Rule(
        name="bias_gelu_erf",
        description="Add(bias) then erf-GELU -> BiasGelu",
        fused_op="BiasGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=_variants(_erf_core, bias=True) + _variants(_erf_core, bias="gemm"),
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
        patterns=_variants(_tanh_core, bias=False),
        check=float_input("x"),
        priority=10,
        replace=lambda m: Replacement([m["x"]]),
    ),
    Rule(
        name="bias_fast_gelu",
        description="Add(bias) then tanh-GELU -> FastGelu with bias",
        fused_op="FastGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=_variants(_tanh_core, bias=True) + _variants(_tanh_core, bias="gemm"),
        check=all_checks(float_input("x0"), _bias_check),
        priority=11,
        replace=_bias_replace,
    ),
    Rule(
        name="quick_gelu",
        description="x*sigmoid(alpha*x) (alpha 1.702) -> QuickGelu",
        fused_op="QuickGelu",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_quick_gelu,),
        check=all_checks(float_input("x"), _quick_check),
        priority=5,
        replace=lambda m: Replacement([m["x"]], {"alpha": scalar(m, "alpha")}),
    ),
]
