"""Costs per node at the profiled dims: FLOPs, bytes moved and arithmetic intensity (the roofline's x axis).

How it counts (docs/roofline.md): bytes are every distinct input and output of a node at its concrete
shape, weights included (Shape and Size read no data: their output only; a Gather reads the rows it
outputs, not the whole table). FLOPs are the op's definition in elementary operations: a multiply-add is 2,
an elementwise op is its count per output element (`PER_ELEMENT`), Softmax 5 per element (max, subtract,
exp, sum, divide), LayerNormalization 5 + scale + bias per element, attention 2·H per score for Q·Kᵀ,
2·Hv per score for the weights·V and 6 per score (scale and softmax), with the key length past + new.
Ops that move data only (Reshape, Transpose, Concat, ...) have 0 FLOPs; an op not known here counts one
FLOP per output element and says it is estimated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fuseview.graph.inference import shared_inference, substitute
from fuseview.graph.seeds import constant_seeds
from fuseview.graph.shapes import propagate
from fuseview.naming import unique_node_names

Shape = list[int]

# FLOPs per output element of elementwise ops (their definitions in elementary operations)
PER_ELEMENT: dict[str, int] = {
    **dict.fromkeys(("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less", "Greater",
                     "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Not", "Where", "Neg", "Abs",
                     "Sqrt", "Exp", "Log", "Reciprocal", "Erf", "Tanh", "Sigmoid", "Relu", "Sign", "Floor",
                     "Ceil", "Round", "Sin", "Cos", "Clip", "IsNaN", "IsInf", "BitwiseAnd", "BitwiseOr",
                     "BitwiseNot", "BitwiseXor", "Softplus", "Softsign", "Trilu"), 1),
    "LeakyRelu": 2, "PRelu": 2, "Elu": 2, "Selu": 3, "Celu": 3, "ThresholdedRelu": 1, "HardSigmoid": 3,
    "HardSwish": 4, "Swish": 2, "Mish": 4, "QuickGelu": 3,
    "Gelu": 5,  # 0.5·x·(1 + erf(x/√2)): divide, erf, add, multiply, multiply
    "FastGelu": 8,  # 0.5·x·(1 + tanh(0.7978845608·(x + 0.044715·x³))) (+1 with its bias input)
    "BiasGelu": 6,  # x + bias, then Gelu
    "Softmax": 5, "LogSoftmax": 6, "RotaryEmbedding": 3, "CumSum": 1,
}
DATA_ONLY = {"Reshape", "Transpose", "Concat", "Split", "Slice", "Squeeze", "Unsqueeze", "Flatten", "Expand",
             "Identity", "Cast", "CastLike", "Tile", "Pad", "ConstantOfShape", "Range", "Dropout",
             "ScatterND", "ScatterElements", "DepthToSpace", "SpaceToDepth"}
METADATA_ONLY = {"Shape", "Size"}
GATHERS = {"Gather", "GatherElements", "GatherND"}
REDUCE_PER_INPUT = {"ReduceSum": 1, "ReduceMean": 1, "ReduceMax": 1, "ReduceMin": 1, "ReduceProd": 1,
                    "ReduceL1": 2, "ReduceL2": 2, "ReduceSumSquare": 2, "ReduceLogSum": 1,
                    "ReduceLogSumExp": 2, "ArgMax": 1, "ArgMin": 1}
SIMPLIFIED_NORMS = {"SimplifiedLayerNormalization", "RMSNormalization", "SkipSimplifiedLayerNormalization"}
# ops whose time is matrix products: the part a roofline puts near the compute roof; the rest is "non-GEMM"
GEMM_OPS = {"MatMul", "Gemm", "Conv", "ConvTranspose", "FusedMatMul", "FusedGemm", "FusedConv",
            "MatMulInteger", "MatMulIntegerToFloat", "QLinearMatMul", "QLinearConv", "ConvInteger", "Einsum",
            "Attention", "MultiHeadAttention", "GroupQueryAttention", "PackedAttention",
            "PackedMultiHeadAttention", "MatMulNBits", "DynamicQuantizeMatMul"}


@dataclass(frozen=True)
class NodeCost:
    """What one node computes and moves at concrete shapes; estimated when an op or a shape was not known."""

    node: str
    op_type: str
    domain: str
    flops: int
    bytes: int
    estimated: bool

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (0 when nothing moves)."""
        return self.flops / self.bytes if self.bytes else 0.0


def tensor_shapes(model: onnx.ModelProto, dims: dict[str, int]) -> dict[str, tuple[Shape, int]]:
    """Concrete shape and element type of the main graph's tensors with the input dims set to `dims`.

    onnx's inference of the model's shared weightless copy with its symbols substituted, then fuseview's
    concrete propagation (graph/shapes.py) for what onnx left symbolic.
    """
    inference = shared_inference(model)
    out: dict[str, tuple[Shape, int]] = {}
    elems: dict[str, int] = {}
    for name, (d, elem) in inference.shapes.items():
        elems[name] = elem
        sub = substitute(d, dims)
        if sub is not None and all(isinstance(x, int) for x in sub):
            out[name] = ([x for x in sub if isinstance(x, int)], elem)
    g = inference.model.graph
    known = {k: v[0] for k, v in out.items()}
    inputs = {vi.name: known[vi.name] for vi in g.input if vi.name in known}
    seeded, small = constant_seeds(g)  # the weightless copy keeps the values of small integer constants only
    inputs.update(seeded)
    for t in g.initializer:
        elems.setdefault(t.name, t.data_type)
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            elems.setdefault(n.output[0], n.attribute[0].t.data_type)
    for name, s in propagate(g, inputs, small, known).items():
        if name not in out and all(isinstance(x, int) for x in s):
            out[name] = (list(s), elems.get(name, 0))
    for n in g.node:  # an output whose type onnx did not infer (a contrib op's): its first input's
        first = out.get(n.input[0]) if n.input else None
        for o in n.output:
            if o in out and not out[o][1] and first is not None:
                out[o] = (out[o][0], first[1])
    return out


def _numel(shape: Shape) -> int:
    return math.prod(shape)


def _itemsize(elem: int) -> int:
    try:
        return int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).itemsize)
    except (KeyError, TypeError, ValueError):
        return 4  # an unknown element type: float32's size


def _attr(node: onnx.NodeProto, name: str, default: Any = None) -> Any:
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


class _Costing:
    """FLOPs of one node from the concrete shapes of its inputs and outputs."""

    def __init__(self, node: onnx.NodeProto, shapes: dict[str, tuple[Shape, int]]) -> None:
        self.n = node
        self.shapes = shapes

    def inp(self, i: int) -> Shape | None:
        """Shape of input i (None when absent or unknown)."""
        if i >= len(self.n.input) or not self.n.input[i]:
            return None
        s = self.shapes.get(self.n.input[i])
        return None if s is None else s[0]

    def out(self, i: int = 0) -> Shape | None:
        """Shape of output i."""
        if i >= len(self.n.output) or not self.n.output[i]:
            return None
        s = self.shapes.get(self.n.output[i])
        return None if s is None else s[0]

    def flops(self) -> int | None:
        """FLOPs by the op's definition; None when it is not known here or a shape is missing."""
        op, n = self.n.op_type, self.n
        out = self.out()
        if op in METADATA_ONLY or op in DATA_ONLY or op in GATHERS:
            return 0
        if op in ("MatMul", "FusedMatMul", "MatMulInteger", "MatMulIntegerToFloat"):
            a = self.inp(0)
            trans_a = op == "FusedMatMul" and _attr(n, "transA", 0) and a is not None and len(a) > 1
            k_axis = -2 if trans_a else -1
            return None if a is None or out is None else 2 * a[k_axis] * _numel(out) + (
                _numel(out) if op == "MatMulIntegerToFloat" and self.inp(5) is not None else 0)
        if op in ("Gemm", "FusedGemm"):
            a, b = self.inp(0), self.inp(1)
            if a is None or b is None or out is None:
                return None
            k = a[0] if _attr(n, "transA", 0) else a[1]
            return 2 * k * _numel(out) + (_numel(out) if self.inp(2) is not None else 0) + (
                _numel(out) if op == "FusedGemm" else 0)
        if op in ("Conv", "FusedConv", "ConvInteger"):
            w = self.inp(1)
            if w is None or out is None:
                return None
            per_out = 2 * _numel(w[1:])  # Cin/groups · kernel multiply-adds per output element
            return per_out * _numel(out) + (_numel(out) if self.inp(2) is not None else 0) + (
                _numel(out) if op == "FusedConv" else 0)
        if op in ("MultiHeadAttention", "GroupQueryAttention", "Attention"):
            return self.attention()
        if op in ("LayerNormalization", "SimplifiedLayerNormalization", "RMSNormalization",
                  "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "EmbedLayerNormalization"):
            return self.norm(op)
        if op in REDUCE_PER_INPUT:
            x = self.inp(0)
            return None if x is None else REDUCE_PER_INPUT[op] * _numel(x)
        if op in ("Sum", "Mean") and out is not None:
            return (len([i for i in n.input if i]) - 1 + (op == "Mean")) * _numel(out)
        if op in PER_ELEMENT and out is not None:
            extra = 1 if op == "FastGelu" and self.inp(1) is not None else 0
            return (PER_ELEMENT[op] + extra) * _numel(out)
        return None

    def norm(self, op: str) -> int | None:
        """Normalizations per element: LayerNorm 5 (mean, subtract, square, sum, multiply by 1/σ) + scale
        (+ bias); RMS/Simplified 3 (square, sum, multiply) + scale; Skip* add the skip (and bias) first;
        EmbedLayerNormalization adds its embeddings (2, or 3 with segments) before a LayerNorm with bias."""
        out = self.out()
        if out is None:
            return None
        e = _numel(out)
        if op == "EmbedLayerNormalization":
            return e * ((3 if self.inp(1) is not None and self.inp(3) is not None else 2) - 1 + 7)
        simplified = op in SIMPLIFIED_NORMS
        per = 4 if simplified else 6
        if op.startswith("Skip"):  # inputs: input, skip, gamma, (beta,) bias
            beta = not simplified and self.inp(3) is not None
            bias = self.inp(3 if simplified else 4) is not None
            return e * (per + beta + 1 + bias)
        beta = not simplified and self.inp(2) is not None
        return e * (per + beta)

    def attention(self) -> int | None:
        """Attention: B·N·S·T scores, each 2·H (Q·Kᵀ) + 2·Hv (weights·V) + 6 (scale, softmax) + 1 with a
        mask or bias, T = past + new keys; the contrib Attention also projects its input (2·Din per output
        of the QKV weights, + bias)."""
        n, op = self.n, self.n.op_type
        heads = int(_attr(n, "num_heads", 0) or _attr(n, "q_num_heads", 0) or 0)
        q = self.inp(0)
        if q is None:
            return None
        extra = 0
        if op == "Attention" and n.domain == "com.microsoft":
            w = self.inp(1)
            if w is None or heads <= 0:
                return None
            b, s = q[0], q[1]
            sizes = _attr(n, "qkv_hidden_sizes", None) or [w[1] // 3] * 3
            dq, dv = int(sizes[0]), int(sizes[2])
            extra = 2 * b * s * q[2] * w[1] + (b * s * w[1] if self.inp(2) is not None else 0)
            past = self.inp(4)
            t = s + (past[3] if past is not None else 0)
            masked = self.inp(3) is not None or self.inp(5) is not None
            scores = b * heads * s * t
            return extra + scores * (2 * dq // heads + 2 * dv // heads + 6 + masked)
        if op == "Attention":  # ONNX opset 23: Q [B, N, S, H] or [B, S, N·H]
            k, v = self.inp(1), self.inp(2)
            if k is None or v is None:
                return None
            if len(q) == 4:
                b, heads, s, h = q
                hv = v[3]
                t = k[2]
            else:
                b, s = q[0], q[1]
                kv_heads = int(_attr(n, "kv_num_heads", heads) or heads)
                if heads <= 0:
                    return None
                h, hv, t = q[2] // heads, v[2] // kv_heads, k[1]
            past = self.inp(4)
            t += past[2] if past is not None else 0
            masked = self.inp(3) is not None
            return b * heads * s * t * (2 * h + 2 * hv + 6 + masked)
        if heads <= 0:
            return None
        b, s = q[0], q[1]
        k, v = self.inp(1), self.inp(2)
        if op == "GroupQueryAttention":
            kv_heads = int(_attr(n, "kv_num_heads", heads) or heads)
            h = q[2] // (heads + 2 * kv_heads) if k is None else q[2] // heads
            present = self.out(1)
            past = self.inp(3)
            t = present[2] if present is not None else s + (past[2] if past is not None else 0)
            return b * heads * s * t * (4 * h + 6)
        # MultiHeadAttention: key/value [B, L, D] (or [B, N, L, H] already split), past_key [B, N, P, H]
        if len(q) == 5:  # packed QKV [B, S, N, 3, H]
            h = hv = q[4]
            t = s
        else:
            if k is None or v is None:
                return None
            h = q[2] // heads
            hv = v[-1] if len(v) == 4 else v[2] // heads
            t = k[2] if len(k) == 4 else k[1]
        past = self.inp(6)
        if past is not None and not (k is not None and len(k) == 4):
            t += past[2]
        bias = self.inp(3)
        if bias is not None:
            extra = b * s * heads * h + b * (t - (past[2] if past is not None else 0)) * heads * (h + hv)
        masked = self.inp(4) is not None or self.inp(5) is not None
        return extra + b * heads * s * t * (2 * h + 2 * hv + 6 + masked)


def _bytes(node: onnx.NodeProto, shapes: dict[str, tuple[Shape, int]]) -> tuple[int, bool]:
    """Bytes read and written: each distinct input once, every output; (bytes, all shapes known)."""
    known = True

    def size(name: str) -> int:
        nonlocal known
        s = shapes.get(name)
        if s is None:
            known = False
            return 0
        return _numel(s[0]) * _itemsize(s[1])

    outs = sum(size(o) for o in node.output if o)
    if node.op_type in METADATA_ONLY:
        return outs, known
    names = list(dict.fromkeys(i for i in node.input if i))
    if node.op_type in GATHERS and names:  # the rows it gathers (as many bytes as it writes), and the indices
        return outs + outs + sum(size(i) for i in names[1:]), known
    return outs + sum(size(i) for i in names), known


def node_costs(model: onnx.ModelProto, dims: dict[str, int]) -> dict[str, NodeCost]:
    """Node name -> FLOPs, bytes and intensity of every node of the main graph at the given input dims.

    `dims` are resolved dims (fuseview.dims.resolve_dims), as a profile report's inputs hold them. The one
    cost function of the CLI, the window and the API.
    """
    shapes = tensor_shapes(model, dims)
    out: dict[str, NodeCost] = {}
    for n, name in zip(model.graph.node, unique_node_names(model.graph.node), strict=True):
        if n.op_type == "Constant":
            continue  # onnxruntime makes it an initializer: it never runs
        try:
            flops = _Costing(n, shapes).flops()
        except (IndexError, TypeError, ValueError, ZeroDivisionError):  # shapes that do not fit the op
            flops = None
        if flops is not None and flops < 0:
            flops = None  # a shape with an unresolved (-1) dim: estimated, never a negative count
        nbytes, known = _bytes(n, shapes)
        estimated = flops is None or not known or nbytes < 0
        if flops is None:
            s = shapes.get(n.output[0]) if n.output else None
            flops = max(_numel(s[0]), 0) if s is not None else 0
        out[name] = NodeCost(name, n.op_type, n.domain, int(flops), max(int(nbytes), 0), estimated)
    return out


def is_gemm(op_type: str) -> bool:
    """True for ops whose time is matrix products (MatMul, Gemm, Conv, attention): the rest is non-GEMM."""
    return op_type in GEMM_OPS


def non_gemm_share(nodes: list[dict]) -> float:
    """Share of the summed per-node medians spent outside GEMM ops (fuseview.stats' shares)."""
    from fuseview.stats import by_median

    # 20,000 shares summed drift past 1 by a few ulps: the report's [0, 1] check refused its own profile
    share = math.fsum(share for n, share in by_median(nodes) if not is_gemm(n["op_type"]))
    return min(1.0, max(0.0, share))


def bound(intensity: float, machine: dict) -> str:
    """"memory" when the intensity is left of the ridge point (bandwidth caps it), else "compute"."""
    return "compute" if intensity * machine["peak_gbps"] >= machine["peak_gflops"] else "memory"


def roofline_rows(costs: dict[str, NodeCost], nodes: list[dict], machine: dict) -> list[dict]:
    """One roofline point per profiled node that has a cost: FLOPs, bytes, median time, achieved rates."""
    from fuseview.stats import TIME_KEY

    rows = []
    for n in nodes:
        c = costs.get(n["name"])
        if c is None:
            continue
        t = float(n[TIME_KEY])
        attainable = min(machine["peak_gflops"], c.intensity * machine["peak_gbps"])
        achieved = c.flops / t / 1e3 if t > 0 else 0.0
        rows.append({
            "node": c.node, "op_type": c.op_type, "domain": c.domain, "flops": c.flops, "bytes": c.bytes,
            "intensity": c.intensity, "time_us": t, "achieved_gflops": achieved,
            "achieved_gbps": c.bytes / t / 1e3 if t > 0 else 0.0, "bound": bound(c.intensity, machine),
            # achieved over what the roofs allow at this intensity: 1 is on the roof
            "roof_fraction": achieved / attainable if attainable > 0 else None,
            "estimated": c.estimated,
        })
    return rows


def model_roofline(model: onnx.ModelProto, dims: dict[str, int], nodes: list[dict], machine: dict) -> dict:
    """A profiled model's roofline section: the machine, a point per node, and the non-GEMM share."""
    try:
        costs = node_costs(model, dims)
    except Exception as exc:  # noqa: BLE001 - a model we cannot cost still gets its profile
        return {"machine": machine, "nodes": [], "non_gemm_share": non_gemm_share(nodes), "flops": 0,
                "bytes": 0, "note": f"no costs: {exc}"}
    return {
        "machine": machine,
        "nodes": roofline_rows(costs, nodes, machine),
        "non_gemm_share": non_gemm_share(nodes),
        "flops": sum(c.flops for c in costs.values()),
        "bytes": sum(c.bytes for c in costs.values()),
    }
