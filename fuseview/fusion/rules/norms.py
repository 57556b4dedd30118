"""Decomposed LayerNorm / RMSNorm -> one op; residual Add + LayerNorm -> SkipLayerNormalization."""

from __future__ import annotations

from fuseview.fusion.dtypes import is_float, type_name
from fuseview.fusion.rule import MS_DOMAIN, ONNX_DOMAIN, Match, Replacement, Rule
from fuseview.fusion.rules._common import (
    all_checks,
    float_input,
    is_last_axis,
    last_axis_vector,
    linear_3d,
    linear_3d_check,
    linear_3d_matmul,
    scalar,
)
from fuseview.graph.unify import same_shape

# ---------------------------------------------------------------------------------------- pattern pieces


def _square(op, t):
    """t squared: Pow(t, 2) or Mul(t, t)."""
    return op.Or(op.Pow(t, op.const(2.0), _label="square"), op.Mul(t, t, _label="square"))


def _ln_body(op, x):
    """(x - mean) / sqrt(var + eps) * gamma [+ beta], the division also written as a Reciprocal."""
    mean = op.ReduceMean(x, _label="mean", _extra_inputs=True)
    d = op.Sub(x, mean, _label="sub")
    var = op.ReduceMean(_square(op, d), _label="var", _extra_inputs=True)
    std = op.Sqrt(op.Add(var, op.constant("eps"), _label="add_eps"), _label="sqrt")
    normed = op.Or(op.Div(d, std, _label="div"), op.Mul(d, op.Reciprocal(std), _label="div"))
    scaled = op.Mul(normed, op.constant("gamma"), _label="scale")
    return op.Optional(op.Add(scaled, op.constant("beta"), _label="shift"), scaled)


def _rms_body(op, x, skip: str):
    """x / sqrt(mean(x^2) + eps) * gamma; 1/std as Div, Reciprocal or Div(1, .) (TorchScript's rsqrt);
    optional float Casts around it (transformers' hidden.float() ... .to(input_dtype): float32 -> float32
    or float16 -> float16 is a no-op, float16 -> float32 -> float16 what the fused kernel does inside)."""
    x = op.Optional(op.Cast(x, _label="cast_in", _expose=bool(skip)), x)
    var = op.ReduceMean(_square(op, x), _label="var", _extra_inputs=True)
    std = op.Sqrt(op.Add(var, op.constant("eps"), _label="add_eps"), _label="sqrt")
    normed = op.Or(
        op.Div(x, std, _label="div"),
        op.Mul(x, op.Reciprocal(std, _label="recip"), _label="div"),
        op.Mul(x, op.Div(op.const(1.0), std, _label="recip"), _label="div"),
    )
    normed = op.Optional(op.Cast(normed, _label="cast_out"), normed)
    return op.Mul(normed, op.constant("gamma"), _label="scale")


def _ln_variants(skip: str):
    """The LayerNorm pattern; skip: "" plain, "add" residual Add, "bias" bias Add then residual, "gemm"."""

    def fn(op, a, b, c=None):
        return _ln_body(op, _input(op, a, b, c, skip))

    return [_sig(fn, skip, "ln")]


def _rms_variants(skip: str):
    """The RMSNorm pattern for one skip kind (as _ln_variants)."""

    def fn(op, a, b, c=None):
        return _rms_body(op, _input(op, a, b, c, skip), skip)

    return [_sig(fn, skip, "rms")]


def _input(op, a, b, c, skip):
    if not skip:
        return a
    if skip == "bias":
        return op.Add(op.Add(a, op.constant(c.name), _label="bias_add"), b, _label="skip_add", _expose=True)
    if skip == "gemm":
        return op.Add(linear_3d(op, a), b, _label="skip_add", _expose=True)
    return op.Add(a, b, _label="skip_add", _expose=True)


def _sig(fn, skip, name):
    """Give a pattern function the parameter list its skip kind needs (pattern variables come from names)."""
    if not skip:

        def plain(op, x):
            return fn(op, x, None)

        out = plain
    elif skip in ("add", "gemm"):

        def added(op, a, b):
            return fn(op, a, b)

        out = added
    else:

        def biased(op, a, b, bias):
            return fn(op, a, b, bias)

        out = biased
    out.__name__ = f"{name}_{skip or 'plain'}"
    return out


def _ln_node(op, a, b, c, skip):
    return op.LayerNormalization(
        _input(op, a, b, c, skip), op.constant("gamma"), op.constant("beta"), _label="ln", _extra_inputs=False
    )


def _ln_node_nobeta(op, a, b, c, skip):
    return op.LayerNormalization(_input(op, a, b, c, skip), op.constant("gamma"), _label="ln")


# -------------------------------------------------------------------------------------------------- checks


def _norm_input(m: Match) -> str:
    return "x" if "x" in m.bindings else "a"


def _decomposed_check(m: Match) -> str | None:
    x = _norm_input(m)
    if "rmsop" in m.nodes:
        n = m.node("rmsop")
        rank = m.rank(n.input[0])
        axis = m.attr("rmsop", "axis", -1)
        if axis != -1 and (rank is None or axis != rank - 1):
            return f"{n.op_type} axis {axis} is not the last axis"
        if m.attr("rmsop", "stash_type", 1) != 1:
            return f"{n.op_type} computes in another type (stash_type); the fused kernel uses float32"
        if len(n.output) > 1 and any(n.output[1:]):
            return f"{n.op_type}'s inverse-RMS output is used"
        return None
    if "ln" in m.nodes:
        axis = m.attr("ln", "axis", -1)
        rank = m.rank(m.node("ln").input[0])
        if axis != -1 and (rank is None or axis != rank - 1):
            return f"LayerNormalization axis {axis} is not the last axis"
        return None
    if "mean" in m.nodes:
        r = is_last_axis(m, "mean", m.node("mean").input[0])
        if r:
            return r
    r = is_last_axis(m, "var", m.node("var").input[0])
    if r:
        return r
    eps = scalar(m, "eps")
    if eps is None or not 0 < eps < 1e-2:
        return f"epsilon {m['eps']} is not a small positive scalar"
    del x
    return None


def _affine_check(m: Match) -> str | None:
    label = next(lb for lb in ("scale", "ln", "rmsop") if lb in m.nodes)
    x = m.node(label).input[0]
    for v in ("gamma", "beta"):
        if v in m.bindings:
            r = last_axis_vector(m, v, x)
            if r:
                return r
    return None


def _skip_check(m: Match) -> str | None:
    _inp, skip = _skip_inputs(m)
    add = m.node("skip_add")
    main = add.input[0] if add.input[1] == skip else add.input[1]
    sa, sb = m.shape(main), m.shape(skip)
    if sa is None or sb is None or len(sa) != 3:
        return f"residual Add inputs have shapes {sa} and {sb}; SkipLayerNormalization needs 3-D input"
    if not (
        same_shape(sa, sb)
        or (len(sb) == 3 and sb[0] == 1 and same_shape(sb[1:], sa[1:]))
        or (len(sb) == 2 and same_shape(sb, sa[1:]))
    ):
        return f"residual Add inputs have shapes {sa} and {sb}; the skip must match the input"
    r = linear_3d_check(m)
    if r:
        return r
    if "bias" in m.bindings:
        if m.value("bias") is None:
            return f"{m['bias']} is not a constant bias"
        return last_axis_vector(m, "bias", main)
    return None


def _casts_check(m: Match) -> str | None:
    """Reason unless the Casts around a norm are float Casts and the norm gives its input's float type."""
    ix = m.index
    for label in ("cast_in", "cast_out"):
        if label in m.nodes and not is_float(m.attr(label, "to")):
            return f"{ix.name(m.nodes[label])} casts to {type_name(m.attr(label, 'to'))}, not a float type"
    inputs = [m[v] for v in ("x", "a", "b") if v in m.bindings]
    root = m.nodes[next(lb for lb in ("rmsop", "scale") if lb in m.nodes)].output[0]
    want, got = ix.const_dtype(inputs[0]), ix.const_dtype(root)
    if want is not None and got is not None and want != got:
        return f"the norm reads {type_name(want)} and gives {type_name(got)}; the fused op keeps its input's"
    exposed = m.exposed.get("cast_in")
    if exposed and ix.const_dtype(exposed) not in (None, want):
        kind = type_name(ix.const_dtype(exposed))
        return f"the residual stream reads {exposed}, the {kind} Cast of the sum"
    return None


def _not_centered(m: Match) -> str | None:
    """An RMSNorm over x - mean(x) is the tail of a LayerNorm: leave it to the LayerNorm rules."""
    p = m.index.producer.get(m["x"])
    if p and p[0].op_type == "Sub":
        q = m.index.producer.get(p[0].input[1])
        if q and q[0].op_type == "ReduceMean" and q[0].input[0] == p[0].input[0]:
            return f"{m['x']} is centred (x - mean(x)): this is the tail of a LayerNorm"
    return None


def _eps(m: Match) -> float:
    for label in ("ln", "rmsop"):
        if label in m.nodes:
            return float(m.attr(label, "epsilon", 1e-5))
    return m.number("eps")


def _beta(m: Match) -> list[str]:
    return [m["beta"]] if "beta" in m.bindings else []


def _ln_replace(m: Match) -> Replacement:
    return Replacement([m["x"], m["gamma"], *_beta(m)], {"axis": -1, "epsilon": _eps(m)})


def _rms_replace(m: Match) -> Replacement:
    if m.index.opsets.get("", 0) >= 23:
        return Replacement([m["x"], m["gamma"]], {"axis": -1, "epsilon": _eps(m)}, op="RMSNormalization")
    return Replacement([m["x"], m["gamma"]], {"axis": -1, "epsilon": _eps(m)})


def _skip_inputs(m: Match) -> tuple[str, str]:
    """Input and skip in the Add's own operand order (the skip may broadcast over batch, not the input)."""
    add = m.node("skip_add")
    first, second = add.input[0], add.input[1]
    for label in ("bias_add", "reshape_out"):
        if label in m.nodes:
            inner = m.node(label).output[0]
            other = second if first == inner else first
            return m["a"], other
    return first, second


def _skip_replace(m: Match) -> Replacement | list[Replacement]:
    inp, skip = _skip_inputs(m)
    pre = []
    if "gemm" in m.nodes:
        mm, inp = linear_3d_matmul(m, inp)
        pre = [mm]
    ln_like = "ln" in m.nodes
    gamma = m["gamma"]
    beta = m.bindings.get("beta", "")
    inputs = [inp, skip, gamma, beta]
    if "bias" in m.bindings:
        inputs.append(m["bias"])
    while inputs and not inputs[-1]:
        inputs.pop()
    outs = [m.node("ln" if ln_like else _root_label(m)).output[0]]
    exposed = m.exposed.get("skip_add")
    if exposed:
        outs += ["", "", exposed]
    return pre + [Replacement(inputs, {"epsilon": _eps(m)}, outputs=outs)]


def _skip_rms_replace(m: Match) -> Replacement:
    inp, skip = _skip_inputs(m)
    outs = [m.node("rmsop" if "rmsop" in m.nodes else "scale").output[0]]
    # The residual stream may read the sum itself or its float32 Cast (a no-op on float32): same values.
    exposed = m.exposed.get("cast_in") or m.exposed.get("skip_add")
    if exposed:
        outs += ["", "", exposed]
    inputs = [inp, skip, m["gamma"]] + ([m["bias"]] if "bias" in m.bindings else [])
    return Replacement(inputs, {"epsilon": _eps(m)}, outputs=outs)


def _one_exposed(m: Match) -> str | None:
    if len(m.exposed) > 1:
        return "both the residual sum and its Cast are used later; the fused op returns only one"
    return None


def _root_label(m: Match) -> str:
    return "shift" if "shift" in m.nodes else "scale"


def _skip_patterns(kind: str):
    fns = list(_ln_variants(kind))
    for node_fn in (_ln_node, _ln_node_nobeta):

        def fn(op, a, b, c=None, node_fn=node_fn):
            return node_fn(op, a, b, c, kind)

        fns.append(_sig(fn, kind, node_fn.__name__.strip("_")))
    return tuple(fns)


def _rms_op_node(op_name: str):
    """Residual Add feeding an RMSNorm that is already one op: RMSNormalization (opset 23) or
    SimplifiedLayerNormalization (onnxruntime's, in the default domain)."""

    def node(op, a, b, c, skip):
        return getattr(op, op_name)(_input(op, a, b, c, skip), op.constant("gamma"), _label="rmsop")

    node.__name__ = f"_{op_name}"
    return node


def _skip_rms_patterns(kind: str):
    fns = list(_rms_variants(kind))
    for op_name in ("RMSNormalization", "SimplifiedLayerNormalization"):
        node_fn = _rms_op_node(op_name)

        def fn(op, a, b, c=None, node_fn=node_fn):
            return node_fn(op, a, b, c, kind)

        fns.append(_sig(fn, kind, op_name.lower()))
    return tuple(fns)


RULES = [
    Rule(
        name="skip_layer_norm",
        description="residual Add + LayerNorm -> SkipLayerNormalization",
        fused_op="SkipLayerNormalization",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=_skip_patterns("add"),
        check=all_checks(float_input("a", "b"), _skip_check, _decomposed_check, _affine_check),
        priority=30,
        replace=_skip_replace,
    ),
    Rule(
        name="skip_layer_norm_bias",
        description="bias Add + residual Add + LayerNorm -> SkipLayerNormalization",
        fused_op="SkipLayerNormalization",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=_skip_patterns("bias") + _skip_patterns("gemm"),
        check=all_checks(float_input("a", "b"), _skip_check, _decomposed_check, _affine_check),
        priority=31,
        replace=_skip_replace,
    ),
    Rule(
        name="layer_norm",
        description="ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add -> LayerNormalization",
        fused_op="LayerNormalization",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=tuple(_ln_variants("")),
        check=all_checks(float_input("x"), _decomposed_check, _affine_check),
        priority=20,
        replace=_ln_replace,
    ),
    Rule(
        name="skip_rms_norm",
        description="residual Add + RMSNorm -> SkipSimplifiedLayerNormalization",
        fused_op="SkipSimplifiedLayerNormalization",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=_skip_rms_patterns("add"),
        check=all_checks(_one_exposed, float_input("a", "b"), _casts_check, _skip_check, _decomposed_check,
                         _affine_check),
        priority=29,
        replace=_skip_rms_replace,
    ),
    Rule(
        name="rms_norm",
        description="Pow/ReduceMean/Add/Sqrt/Div (or Reciprocal)/Mul -> SimplifiedLayerNormalization",
        fused_op="SimplifiedLayerNormalization",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda"),
        patterns=tuple(_rms_variants("")),
        check=all_checks(float_input("x"), _casts_check, _decomposed_check, _affine_check),
        exclude=lambda m: _not_centered(m) is not None,
        priority=19,
        replace=_rms_replace,
    ),
]
