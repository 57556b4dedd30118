"""Conv fusions: Conv + BatchNormalization / bias Add -> folded Conv; + activation -> FusedConv."""

from __future__ import annotations

import numpy as np

from fuseview.fusion.rule import MS_DOMAIN, ONNX_DOMAIN, Match, Replacement, Rule
from fuseview.fusion.rules._common import all_checks, float_input

ACTIVATIONS = ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Clip", "HardSigmoid")


def _conv_chain(op, x, bn: bool | None):
    """Conv(x, w[, b]) (+ a per-channel bias Add, Paddle style) (+ BatchNormalization when ``bn`` is
    True; optional when None). Weights must be constants when something is folded into them (checked)."""
    y = op.Conv(x, op.var("w"), op.opt(op.var("b")), _label="conv")
    y = op.Optional(op.Add(y, op.constant("cbias"), _label="bias_add"), y)
    bn_node = op.BatchNormalization(
        y, op.constant("scale"), op.constant("shift"), op.constant("mean"), op.constant("var"), _label="bn"
    )
    return bn_node if bn else op.Optional(bn_node, y)


def _conv_bn(op, x):
    return _conv_chain(op, x, bn=True)


def _conv_bias_add(op, x):
    y = op.Conv(x, op.var("w"), op.opt(op.var("b")), _label="conv")
    return op.Add(y, op.constant("cbias"), _label="bias_add")


def _conv_act(op, x, z):
    y = _conv_chain(op, x, bn=None)
    # onnxruntime's FusedConv adds a residual Z only before Relu (ResNet blocks): checked.
    y = op.Optional(op.AnyOp(("Add", "Sum"), y, z, _label="residual"), y)
    return op.AnyOp(ACTIVATIONS, y, _label="act", _extra_inputs=True)


def _bias_add_check(m: Match) -> str | None:
    if "bias_add" not in m.nodes:
        return None
    w, c = m.value("w"), m.value("cbias")
    if w is None:
        return f"Conv weight {m['w']} is not a constant (the bias Add cannot be folded into it)"
    if c is None:
        return f"Add {m['cbias']} cannot be read"
    ch = w.shape[0]
    rank = w.ndim  # the Conv output has the weight's rank: [N, C_out, spatial...]
    want = (ch,) + (1,) * (rank - 2)
    if c.size != ch or c.ndim > rank or c.ndim < rank - 1 or tuple(c.shape[-(rank - 1) :]) != want:
        return f"Add {m['cbias']} of shape {list(c.shape)} is not a per-channel bias of {ch} channels"
    if "b" in m.bindings and m.value("b") is None:
        return f"Conv bias {m['b']} is not a constant"
    return None


def _fold_check(m: Match) -> str | None:
    if ("bn" in m.nodes or "bias_add" in m.nodes) and m.value("w") is None:
        return f"Conv weight {m['w']} is not a constant (nothing can be folded into it)"
    if "bn" in m.nodes and "b" in m.bindings and m.value("b") is None:
        return f"Conv bias {m['b']} is not a constant"
    return None


def _residual_only_relu(m: Match) -> str | None:
    if "residual" in m.nodes and m.node("act").op_type != "Relu":
        return f"FusedConv adds a residual only before Relu, not {m.node('act').op_type}"
    return None


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
    """Conv inputs (and new initializers) with the bias Add and BatchNormalization folded in, if any."""
    if "bn" not in m.nodes and "bias_add" not in m.nodes:
        return [m["x"], m["w"]] + ([m["b"]] if "b" in m.bindings else []), {}
    w = m.array("w").astype(np.float64)
    b = m.array("b").astype(np.float64) if "b" in m.bindings else np.zeros(w.shape[0])
    if "bias_add" in m.nodes:
        b = b + np.ravel(m.array("cbias")).astype(np.float64)
    base = m.index.name(m.node("conv")).replace("/", "_").strip("_")
    if "bn" not in m.nodes:
        bn = f"{base}_B_addfolded"
        return [m["x"], m["w"], bn], {bn: b.astype(m.array("w").dtype)}
    eps = float(m.attr("bn", "epsilon", 1e-5))
    scale, shift, mean, var = (m.array(v).astype(np.float64) for v in ("scale", "shift", "mean", "var"))
    k = scale / np.sqrt(var + eps)
    w2 = (w * k.reshape((-1,) + (1,) * (w.ndim - 1))).astype(m.array("w").dtype)
    b2 = ((b - mean) * k + shift).astype(m.array("w").dtype)
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
        description="Conv (+ bias Add) (+ BatchNorm) (+ residual Add) + Relu/Clip/LeakyRelu/Sigmoid/Tanh/"
        "HardSigmoid -> FusedConv",
        fused_op="FusedConv",
        domain=MS_DOMAIN,
        runs_on=("cpu",),
        patterns=(_conv_act,),
        check=all_checks(
            float_input("x"), _fold_check, _bias_add_check, _bn_check, _act_check, _residual_only_relu,
            _residual_check,
        ),
        priority=15,
        replace=_conv_act_replace,
    ),
    Rule(
        name="conv_bn",
        description="Conv + BatchNormalization -> Conv with folded weights",
        fused_op="Conv",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_conv_bn,),
        check=all_checks(_fold_check, _bias_add_check, _bn_check),
        priority=14,
        replace=_conv_bn_replace,
    ),
    Rule(
        name="conv_bias_add",
        description="Conv + Add(per-channel constant) (Paddle exports) -> Conv with the bias folded in",
        fused_op="Conv",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=(_conv_bias_add,),
        check=all_checks(_fold_check, _bias_add_check),
        priority=13,
        replace=_conv_bn_replace,
    ),
]
