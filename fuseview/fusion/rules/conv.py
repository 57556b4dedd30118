"""Conv fusions: Conv + BatchNormalization -> Conv with folded weights; Conv + activation -> FusedConv."""

from __future__ import annotations

import numpy as np

from fuseview.fusion.rule import MS_DOMAIN, ONNX_DOMAIN, Match, Replacement, Rule
from fuseview.fusion.rules._common import all_checks, float_input

ACTIVATIONS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid")


def _conv(op, x, bias: bool, w, b=None):
    """Conv(x, w[, b]); w and b are constants when a BatchNormalization is folded into them."""
    if bias:
        return op.Conv(x, w, b, _label="conv")
    return op.Conv(x, w, _label="conv")


def _bn(op, y):
    return op.BatchNormalization(
        y, op.constant("scale"), op.constant("shift"), op.constant("mean"), op.constant("var"), _label="bn"
    )


def _conv_bn_patterns():
    fns = []
    for bias in (True, False):

        def fn(op, x, bias=bias):
            return _bn(op, _conv(op, x, bias, op.constant("w"), op.constant("b")))

        fn.__name__ = f"conv_bn_{int(bias)}"
        fns.append(fn)
    return tuple(fns)


def _conv_act_patterns():
    fns = []
    for act in ACTIVATIONS:
        for bn in (False, True):
            for bias in (True, False):
                for residual in (None, "Add", "Sum"):
                    if residual and act != "Relu":
                        continue  # onnxruntime fuses the residual Add for Relu (ResNet blocks)

                    def fn(op, x, w, b, z, act=act, bn=bn, bias=bias, residual=residual):
                        if bn:
                            w, b = op.constant("w"), op.constant("b")
                        y = _conv(op, x, bias, w, b)
                        if bn:
                            y = _bn(op, y)
                        if residual:
                            y = getattr(op, residual)(y, z, _label="residual")
                        return getattr(op, act)(y, _label="act", _extra_inputs=act == "Clip")

                    parts = ["conv", "bn" * bn, (residual or "").lower(), act.lower(), str(int(bias))]
                    fn.__name__ = "_".join(p for p in parts if p)
                    fns.append(fn)
    return tuple(fns)


def _residual_check(m: Match) -> str | None:
    if "residual" not in m.nodes:
        return None
    sz, sy = m.shape("z"), m.shape(m.node("conv").output[0])
    if sz is None or sy is None or list(sz) != list(sy):
        return (
            f"residual {m['z']} has shape {sz}, the Conv output {sy}: FusedConv adds Z without broadcasting"
        )
    return None


def _bn_check(m: Match) -> str | None:
    if "bn" not in m.nodes:
        return None
    if m.attr("bn", "training_mode", 0):
        return "BatchNormalization in training mode"
    if len([o for o in m.node("bn").output if o]) > 1:
        return "BatchNormalization computes running statistics (extra outputs)"
    w = m.value("w")
    if w is None:
        return f"Conv weight {m['w']} cannot be read"
    for v in ("scale", "shift", "mean", "var"):
        a = m.value(v)
        if a is None or a.shape != (w.shape[0],):
            return f"BatchNormalization {v} {m[v]} is not a vector of {w.shape[0]} channels"
    return None


def _act_check(m: Match) -> str | None:
    act = m.node("act")
    if act.op_type == "Clip":
        for i in act.input[1:]:
            if i and not m.index.is_const(i):
                return f"Clip bound {i} is not a constant"
    return None


def _folded(m: Match) -> tuple[list[str], dict[str, np.ndarray]]:
    """Conv inputs (and new initializers) with the BatchNormalization folded in, if there is one."""
    if "bn" not in m.nodes:
        return [m["x"], m["w"]] + ([m["b"]] if "b" in m.bindings else []), {}
    w = m.value("w").astype(np.float64)
    eps = float(m.attr("bn", "epsilon", 1e-5))
    scale, shift, mean, var = (m.value(v).astype(np.float64) for v in ("scale", "shift", "mean", "var"))
    b = m.value("b").astype(np.float64) if "b" in m.bindings else np.zeros(w.shape[0])
    k = scale / np.sqrt(var + eps)
    w2 = (w * k.reshape((-1,) + (1,) * (w.ndim - 1))).astype(m.value("w").dtype)
    b2 = ((b - mean) * k + shift).astype(m.value("w").dtype)
    base = m.index.name(m.node("conv")).replace("/", "_").strip("_")
    wn, bn = f"{base}_W_bnfolded", f"{base}_B_bnfolded"
    return [m["x"], wn, bn], {wn: w2, bn: b2}


def _conv_attrs(m: Match) -> dict:
    return {a.name: m.index.attr(m.node("conv"), a.name) for a in m.node("conv").attribute}


def _conv_bn_replace(m: Match) -> Replacement:
    inputs, inits = _folded(m)
    return Replacement(inputs, _conv_attrs(m), initializers=inits)


def _conv_act_replace(m: Match) -> Replacement:
    inputs, inits = _folded(m)
    if "residual" in m.nodes:
        inputs = (inputs + [""])[:3] + [m["z"]]
    act = m.node("act")
    attrs = _conv_attrs(m)
    attrs["activation"] = act.op_type
    params: list[float] = []
    if act.op_type == "LeakyRelu":
        params = [float(m.attr("act", "alpha", 0.01))]
    elif act.op_type == "HardSigmoid":
        params = [float(m.attr("act", "alpha", 0.2)), float(m.attr("act", "beta", 0.5))]
    elif act.op_type == "Clip":
        lo, hi = float(np.finfo(np.float32).min), float(np.finfo(np.float32).max)
        if len(act.input) > 1 and act.input[1]:
            lo = float(np.ravel(m.index.const_value(act.input[1]))[0])
        if len(act.input) > 2 and act.input[2]:
            hi = float(np.ravel(m.index.const_value(act.input[2]))[0])
        lo = float(m.attr("act", "min", lo))
        hi = float(m.attr("act", "max", hi))
        params = [lo, hi]
    if params:
        attrs["activation_params"] = params
    return Replacement(inputs, attrs, initializers=inits)


RULES = [
    Rule(
        name="conv_activation",
        description="Conv (+ BatchNorm) (+ residual Add) + Relu/Clip/LeakyRelu/Sigmoid/Tanh -> FusedConv",
        fused_op="FusedConv",
        domain=MS_DOMAIN,
        runs_on=("cpu",),
        patterns=_conv_act_patterns(),
        check=all_checks(float_input("x"), _bn_check, _act_check, _residual_check),
        priority=15,
        replace=_conv_act_replace,
    ),
    Rule(
        name="conv_bn",
        description="Conv + BatchNormalization -> Conv with folded weights",
        fused_op="Conv",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=_conv_bn_patterns(),
        check=_bn_check,
        priority=14,
        replace=_conv_bn_replace,
    ),
]
