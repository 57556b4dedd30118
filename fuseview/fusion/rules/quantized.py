"""int8 fusions onnxruntime has kernels for.

Dynamic quantization -> DynamicQuantizeMatMul / MatMulIntegerToFloat (com.microsoft); QDQ
(DequantizeLinear -> Conv/MatMul -> QuantizeLinear) -> QLinearConv / QLinearMatMul.
"""

from __future__ import annotations

import numpy as np
import onnx

from fuseview.fusion.rule import MS_DOMAIN, ONNX_DOMAIN, Match, Replacement, Rule
from fuseview.fusion.rules._common import all_checks

INT8 = (onnx.TensorProto.INT8, onnx.TensorProto.UINT8)


# ------------------------------------------------------------------------------------ dynamic quantization
def _int_matmul_to_float(op, a_q, a_zp):
    """MatMulInteger(a_q, w_q, a_zp[, w_zp]) -> Cast(float) -> * (a_scale * w_scale) [+ bias]."""
    mm = op.MatMulInteger(a_q, op.constant("w_q"), a_zp, op.opt(op.constant("w_zp")), _label="matmul")
    cast = op.Cast(mm, _label="cast", _attrs={"to": onnx.TensorProto.FLOAT})
    scaled = op.Mul(cast, op.Mul(op.var("a_scale"), op.constant("w_scale"), _label="scales"), _label="scale")
    return op.Optional(op.Add(scaled, op.constant("bias"), _label="bias_add"), scaled)


def _dynamic_quantize_matmul(op, x):
    a_q, a_scale, a_zp = op.DynamicQuantizeLinear(x, _label="dql", _outputs=3)
    mm = op.MatMulInteger(a_q, op.constant("w_q"), a_zp, op.opt(op.constant("w_zp")), _label="matmul")
    cast = op.Cast(mm, _label="cast", _attrs={"to": onnx.TensorProto.FLOAT})
    scaled = op.Mul(cast, op.Mul(a_scale, op.constant("w_scale"), _label="scales"), _label="scale")
    return op.Optional(op.Add(scaled, op.constant("bias"), _label="bias_add"), scaled)


def _weight_check(m: Match) -> str | None:
    w = m.value("w_q")
    if w is None or w.ndim != 2 or w.dtype not in (np.int8, np.uint8):
        return f"weight {m['w_q']} is not a constant 2-D int8/uint8 matrix"
    n = w.shape[1]
    s = m.value("w_scale")
    if s is None or s.size not in (1, n) or s.dtype != np.float32:
        return f"weight scale {m['w_scale']} is not a float32 scalar or {n} per-column values"
    if "w_zp" in m.bindings:
        z = m.value("w_zp")
        if z is None or z.size not in (1, n) or z.dtype != w.dtype:
            return f"weight zero point {m['w_zp']} does not fit the weight"
    if "bias_add" in m.nodes:
        b = m.value("bias")
        if b is None or b.shape != (n,) or b.dtype != np.float32:
            return f"bias {m['bias']} is not a float32 vector of {n}"
    return None


def _a_scale_check(m: Match) -> str | None:
    shape = m.shape("a_scale")
    if shape is None or list(shape) not in ([], [1]):
        return f"activation scale {m['a_scale']} has shape {shape}; MatMulIntegerToFloat needs a scalar"
    return None


def _dqmm_replace(m: Match) -> Replacement:
    ins = [m["x"], m["w_q"], m["w_scale"], m.bindings.get("w_zp", ""), m.bindings.get("bias", "")]
    while ins and not ins[-1]:
        ins.pop()
    return Replacement(ins)


def _mmitf_replace(m: Match) -> Replacement:
    ins = [m["a_q"], m["w_q"], m["a_scale"], m["w_scale"], m["a_zp"], m.bindings.get("w_zp", ""),
           m.bindings.get("bias", "")]
    while ins and not ins[-1]:
        ins.pop()
    return Replacement(ins)


# ---------------------------------------------------------------------------------------------------- QDQ
def _dq(op, name: str, const: bool = False):
    q = op.constant(f"{name}_q") if const else op.var(f"{name}_q")
    zp = op.opt(op.constant(f"{name}_zp"))
    return op.DequantizeLinear(q, op.constant(f"{name}_scale"), zp, _label=f"dq_{name}")


def _qlinear_conv(op):
    y = op.Conv(_dq(op, "x"), _dq(op, "w", const=True), op.opt(_dq(op, "b", const=True)), _label="conv")
    return op.QuantizeLinear(y, op.constant("y_scale"), op.opt(op.constant("y_zp")), _label="q_y")


def _qlinear_matmul(op):
    y = op.MatMul(_dq(op, "x"), _dq(op, "w", const=True), _label="matmul")
    return op.QuantizeLinear(y, op.constant("y_scale"), op.opt(op.constant("y_zp")), _label="q_y")


def _qgemm(op):
    y = op.Gemm(_dq(op, "x"), _dq(op, "w", const=True), op.opt(_dq(op, "b", const=True)), _label="gemm")
    return op.QuantizeLinear(y, op.constant("y_scale"), op.opt(op.constant("y_zp")), _label="q_y")


def _int32_bias_check(m: Match) -> str | None:
    """Reason unless the DequantizeLinear'd bias is int32 with scale x_scale * w_scale and zero point 0."""
    if "dq_b" not in m.nodes:
        return None
    b = m.value("b_q")
    if b is None or b.dtype != np.int32:
        return f"bias {m['b_q']} is not int32 (the QLinear op takes an int32 bias)"
    if "b_zp" in m.bindings and np.any(m.value("b_zp")):
        return "bias has a non-zero zero point"
    want = m.array("x_scale").astype(np.float64) * m.array("w_scale").astype(np.float64)
    got = m.array("b_scale").astype(np.float64)
    if not np.allclose(np.ravel(got), np.ravel(want) * np.ones(np.size(got)), rtol=1e-5):
        return "bias scale is not input scale x weight scale"
    return None


def _qgemm_check(m: Match) -> str | None:
    w = m.value("w_q")
    if w is None or w.dtype != np.int8 or w.ndim != 2:
        return f"Gemm weight {m['w_q']} is not a constant 2-D int8 matrix"
    if m.attr("gemm", "transA", 0) or float(m.attr("gemm", "beta", 1.0)) != 1.0:
        return "Gemm with transA or beta != 1 is not rewritten"
    n = w.shape[0] if m.attr("gemm", "transB", 0) else w.shape[1]
    for name, per in (("x", None), ("w", n), ("y", None)):
        r = _scalar_quant(m, name, per)
        if r:
            return r
    if m.array("w_scale").size > 1:
        return "per-channel Gemm weights are not rewritten"
    return _int32_bias_check(m)


def _qgemm_replace(m: Match) -> Replacement:
    inits = _zero_points(m, ("x", "w", "y"))
    ins = [m["x_q"], m["x_scale"], m["x_zp"], m["w_q"], m["w_scale"], m["w_zp"],
           m["b_q"] if "dq_b" in m.nodes else "", m["y_scale"], m["y_zp"]]
    attrs = {"alpha": float(m.attr("gemm", "alpha", 1.0)), "transB": int(m.attr("gemm", "transB", 0))}
    return Replacement(ins, attrs, initializers=inits)


def _scalar_quant(m: Match, name: str, per_axis: int | None = None) -> str | None:
    """Reason unless ``name``'s scale is a float32 scalar (or ``per_axis`` values), its zero point 8-bit."""
    s = m.value(f"{name}_scale")
    if s is None or s.dtype != np.float32 or s.size not in (1, per_axis or 1):
        return f"{m[f'{name}_scale']} is not a per-tensor float32 scale"
    if f"{name}_zp" in m.bindings:
        z = m.value(f"{name}_zp")
        if z is None or z.dtype not in (np.int8, np.uint8):
            return f"{m[f'{name}_zp']} is not an 8-bit zero point"
    elif f"{name}_q" in m.bindings and m.index.const_dtype(m[f"{name}_q"]) not in (None, *INT8):
        return f"{m[f'{name}_q']} is not 8-bit"
    if s.size > 1:
        rank = m.array(f"{name}_q").ndim
        if m.attr(f"dq_{name}", "axis", 1) not in (0, -rank):
            return f"per-channel {name} quantization is not along the output channels"
    return None


def _qconv_check(m: Match) -> str | None:
    w = m.value("w_q")
    if w is None or w.dtype not in (np.int8, np.uint8):
        return f"Conv weight {m['w_q']} is not a constant int8/uint8 tensor"
    for name, per in (("x", None), ("w", w.shape[0]), ("y", None)):
        r = _scalar_quant(m, name, per)
        if r:
            return r
    return _int32_bias_check(m)


def _qmatmul_check(m: Match) -> str | None:
    w = m.value("w_q")
    if w is None or w.dtype not in (np.int8, np.uint8) or w.ndim != 2:
        return f"MatMul weight {m['w_q']} is not a constant 2-D int8/uint8 matrix"
    for name in ("x", "w", "y"):
        r = _scalar_quant(m, name)
        if r:
            return r
    return None


def _qconv_replace(m: Match) -> Replacement:
    inits = _zero_points(m, ("x", "w", "y"))
    ins = [m["x_q"], m["x_scale"], m["x_zp"], m["w_q"], m["w_scale"], m["w_zp"], m["y_scale"], m["y_zp"]]
    if "dq_b" in m.nodes:
        ins.append(m["b_q"])
    attrs = {a.name: m.index.attr(m.node("conv"), a.name) for a in m.node("conv").attribute}
    return Replacement(ins, attrs, initializers=inits)


def _qmatmul_replace(m: Match) -> Replacement:
    inits = _zero_points(m, ("x", "w", "y"))
    ins = [m["x_q"], m["x_scale"], m["x_zp"], m["w_q"], m["w_scale"], m["w_zp"], m["y_scale"], m["y_zp"]]
    return Replacement(ins, initializers=inits)


def _zero_points(m: Match, names: tuple[str, ...]) -> dict[str, np.ndarray]:
    """QLinear ops need every zero point: a missing one is 0 of the tensor's type (uint8 by default)."""
    extra = {}
    for name in names:
        if f"{name}_zp" not in m.bindings:
            q = m.bindings.get(f"{name}_q")
            dt = m.index.const_dtype(q) if q else None
            np_dt = np.int8 if dt == onnx.TensorProto.INT8 else np.uint8
            zname = f"{m.index.name(m.node('q_y'))}_{name}_zero_point".replace("/", "_").strip("_")
            extra[zname] = np.zeros((), np_dt)
            m.bindings[f"{name}_zp"] = zname
    return extra


RULES = [
    Rule(
        name="dynamic_quantize_matmul",
        description="DynamicQuantizeLinear + MatMulInteger + Cast + scale Mul (+ bias) -> "
        "DynamicQuantizeMatMul",
        fused_op="DynamicQuantizeMatMul",
        domain=MS_DOMAIN,
        runs_on=("cpu",),
        patterns=(_dynamic_quantize_matmul,),
        check=_weight_check,
        priority=12,
        replace=_dqmm_replace,
    ),
    Rule(
        name="matmul_integer_to_float",
        description="MatMulInteger + Cast + scale Mul (+ bias Add) -> MatMulIntegerToFloat",
        fused_op="MatMulIntegerToFloat",
        domain=MS_DOMAIN,
        runs_on=("cpu",),
        patterns=(_int_matmul_to_float,),
        check=all_checks(_weight_check, _a_scale_check),
        priority=11,
        replace=_mmitf_replace,
    ),
    Rule(
        name="qlinear_conv",
        description="DequantizeLinear -> Conv -> QuantizeLinear (QDQ) -> QLinearConv",
        fused_op="QLinearConv",
        domain=ONNX_DOMAIN,
        runs_on=("cpu",),
        patterns=(_qlinear_conv,),
        check=_qconv_check,
        priority=12,
        replace=_qconv_replace,
    ),
    Rule(
        name="qgemm",
        description="DequantizeLinear -> Gemm -> QuantizeLinear (QDQ) -> QGemm",
        fused_op="QGemm",
        domain=MS_DOMAIN,
        runs_on=("cpu",),
        patterns=(_qgemm,),
        check=_qgemm_check,
        priority=12,
        replace=_qgemm_replace,
    ),
    Rule(
        name="qlinear_matmul",
        description="DequantizeLinear -> MatMul -> QuantizeLinear (QDQ) -> QLinearMatMul",
        fused_op="QLinearMatMul",
        domain=ONNX_DOMAIN,
        runs_on=("cpu",),
        patterns=(_qlinear_matmul,),
        check=_qmatmul_check,
        priority=12,
        replace=_qmatmul_replace,
    ),
]
