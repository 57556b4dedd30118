"""Packed attention: an attention block whose Q, K and V are projections of one tensor -> contrib Attention.

    x -> (x @ W_qkv + b, Split) or (x @ Wq + bq, x @ Wk + bk, x @ Wv + bv) -> attention_mha's block

becomes ``Attention(x, W, b, attention_bias=mask, num_heads=H, scale=c)`` (com.microsoft) with the weights
packed [K, 3 x hidden] (columns Q | K | V). One GEMM instead of three, and the projection's and heads'
Reshape shape chains go with the match. Built on the matches of ``attention`` (same checks, same masks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from fuseview.errors import FuseviewError
from fuseview.fusion.graphindex import CONST_READ_LIMIT, GraphIndex
from fuseview.fusion.rule import MS_DOMAIN, Replacement, Rule
from fuseview.fusion.rules.attention_mha import AttentionMatch, guard_output, mask_bias, widen
from fuseview.fusion.toolkit import Miss, ScanContext, shape_inputs_walk


@dataclass
class PackedMatch:
    """An attention block whose Q, K and V come from one projection: contrib Attention does it all."""

    mha: AttentionMatch
    nodes: list[onnx.NodeProto]
    x: str  # [B, S, K] input of the projection
    # the tensors whose columns make W [K, 3 * hidden] (Q | K | V): one packed weight, or three to join.
    # Names, not values: a scan reads no weight, and one packed initializer is reused as it is.
    weight_parts: tuple[str, ...]
    bias: np.ndarray  # [3 * hidden]
    ix: GraphIndex

    def weight(self) -> tuple[str, np.ndarray | None]:
        """(the input name of W, its value if it is a new initializer; None if an existing one is reused)."""
        if len(self.weight_parts) == 1 and self.weight_parts[0] in self.ix.initializers:
            return self.weight_parts[0], None
        values = []
        for t in self.weight_parts:
            v = self.ix.read_once(t)  # mapped weights unmapped after the join
            if v is None:
                raise FuseviewError(f"{self.mha.output}: a projection weight can no longer be read")
            values.append(v)
        return self.mha.output + "_qkv_weight", np.concatenate(values, axis=1)


_FLOATS = (np.dtype(np.float32), np.dtype(np.float16))


def weight_meta(ix: GraphIndex, name: str) -> tuple[tuple[int, ...], np.dtype] | None:
    """(shape, dtype) of a constant weight, read from its declaration when it is an initializer."""
    t = ix.initializers.get(name)
    if t is not None and ix.is_const(name):
        try:
            return tuple(int(d) for d in t.dims), np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.data_type))
        except (KeyError, TypeError, ValueError):
            return None
    v = ix.const_value(name)
    return None if v is None else (tuple(v.shape), v.dtype)


def packed_projection(ctx: ScanContext, a: AttentionMatch) -> PackedMatch:
    """The match widened to one QKV projection (Split of x @ W + b), or Miss saying why not."""
    m, ix = ctx.structure, ctx.index
    if a.q_bnsh:
        raise Miss("Q is only seen per head (rotary or similar): no packed projection")
    if a.cache:
        raise Miss("KV cache: contrib Attention takes one packed past, the model has a key and a value")
    sp = m.prod(a.q, "Split")
    if sp is None:
        return _three_projections(ctx, a)
    if m.prod(a.k, "Split") is not sp or m.prod(a.v, "Split") is not sp:
        raise Miss("Q, K and V are not the outputs of one Split")
    if list(sp.output) != [a.q, a.k, a.v]:
        raise Miss(f"{sp.name}: outputs are not Q, K, V in this order")
    packed = sp.input[0]
    rank = m.d.rank(packed)
    axis = int(ix.attr(sp, "axis", 0))
    if rank != 3 or axis % 3 != 2:
        raise Miss(f"{sp.name}: does not split the last axis of a 3-D tensor")
    hidden = a.num_heads * a.head_size
    sizes = m.d.const(sp.input[1]) if len(sp.input) > 1 and sp.input[1] else ix.attr(sp, "split")
    if sizes is not None and [int(v) for v in np.ravel(sizes)] != [hidden] * 3:
        raise Miss(f"{sp.name}: split sizes {list(np.ravel(sizes))} are not 3 x {hidden}")
    core = [sp]
    shape_ids: set[int] = set()
    add = m.prod(packed, "Add")
    bias = None
    if add is not None:
        for lin, b in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
            bv = m.d.const(b) if b not in ix.initializers else ix.const_value(b)
            if m.prod(lin, "MatMul") is not None and bv is not None and bv.shape == (3 * hidden,):
                core.append(add)
                bias, packed = bv, lin
                break
    r_out = m.prod(packed, "Reshape")
    if r_out is not None and bias is None:
        x, w_name, w, bias = _gemm_projection(ctx, a, r_out, core, shape_ids)
    else:
        mm = m.prod(packed, "MatMul")
        if mm is None:
            raise Miss(f"{sp.name}: input is not a linear projection of one tensor")
        x = mm.input[0]
        w_name = mm.input[1]
        w = weight_meta(ix, w_name)
        core.append(mm)
        if m.d.rank(x) != 3:
            raise Miss(f"{mm.name}: projection input is not [batch, seq, hidden]")
    if w is None or len(w[0]) != 2 or w[0][1] != 3 * hidden or w[1] not in _FLOATS:
        raise Miss(f"{sp.name}: projection weight is not a float32 or float16 [K, 3 x {hidden}] constant")
    if bias is None:
        bias = np.zeros(3 * hidden, w[1])
    if bias.shape != (3 * hidden,) or bias.dtype != w[1]:
        raise Miss(f"{sp.name}: projection bias is not a [3 x {hidden}] vector of the weight's type")
    nodes = list(a.nodes) + core
    for n in a.nodes:
        if n.op_type == "Reshape":
            shape_inputs_walk(m, n.input[1], shape_ids)
    matched = m.absorb(nodes, shape_ids)
    m.check_contained(nodes, matched, {a.output})
    return PackedMatch(a, nodes, x, (w_name,), bias, ix)


_Projection = tuple[str, str, tuple[tuple[int, ...], np.dtype] | None, np.ndarray | None]


def _gemm_projection(
    ctx: ScanContext, a: AttentionMatch, r_out: onnx.NodeProto, core: list, shape_ids: set[int]
) -> _Projection:
    """(x, W's name, W's shape and dtype, b) of a Reshape -> Gemm -> Reshape projection (its nodes go to
    core, its shape inputs to shape_ids), or Miss unless the reshapes only flatten and restore x."""
    m, ix = ctx.structure, ctx.index
    gemm = m.prod(r_out.input[0], "Gemm")
    r_in = m.prod(gemm.input[0], "Reshape") if gemm is not None else None
    if gemm is None or r_in is None:
        raise Miss(f"{r_out.name}: projection is not Reshape -> Gemm -> Reshape")
    for attr, want in (("alpha", 1.0), ("beta", 1.0), ("transA", 0), ("transB", 0)):
        if ix.attr(gemm, attr, want) != want:
            raise Miss(f"{gemm.name}: {attr}={ix.attr(gemm, attr)}; only x @ W + b is packed")
    x = r_in.input[0]
    w_name = gemm.input[1]
    w = weight_meta(ix, w_name)
    bias = ix.const_value(gemm.input[2]) if len(gemm.input) > 2 and gemm.input[2] else None
    sx, sf, so = ix.shape(x), ix.shape(r_in.output[0]), ix.shape(r_out.output[0])
    if sx is None or sf is None or so is None or len(sx) != 3 or w is None or len(w[0]) != 2:
        raise Miss(f"{gemm.name}: shapes around the projection are unknown")
    if list(sf) != [sx[0] * sx[1], sx[2]] or list(so) != [sx[0], sx[1], w[0][1]]:
        raise Miss(f"{gemm.name}: reshapes {sx} -> {sf} -> {so} do not only flatten and restore")
    if not (m.d.same(("dim", x, 0), ("dim", a.q, 0)) or m.d.same(("dim", x, 1), ("dim", a.q, 1))):
        vec = m.d.vec(r_out.input[1], set())
        if vec is None or len(vec) != 3 or not all(m.d.same(vec[j], ("dim", x, j)) for j in (0, 1)):
            raise Miss(f"{r_out.name}: restored leading dims are not provably x's batch and sequence")
    core += [r_out, gemm, r_in]
    for r in (r_in, r_out):
        shape_inputs_walk(m, r.input[1], shape_ids)
    return x, w_name, w, bias


def projection(op, x):
    """x @ W (+ b), W and b constants; the bias Add's operands in either order (Add is commutative)."""
    mm = op.MatMul(x, op.constant("w"), _label="matmul")
    return op.Or(op.Add(mm, op.constant("b"), _label="bias_add"), mm)


Linear = tuple[str, str, tuple[int, ...], np.ndarray | None, list]


def linear_projection(ctx: ScanContext, t: str) -> Linear | None:
    """(x, W's name, W's shape, b, nodes) when t = x @ W [+ b] with constant float W [K, N] and b [N]."""
    found = ctx.match(projection, at=t)
    if found is None:
        return None
    ix = ctx.index
    w = weight_meta(ix, found["w"])
    if w is None or len(w[0]) != 2 or w[1] not in _FLOATS:
        return None
    if int(np.prod(w[0])) * w[1].itemsize > CONST_READ_LIMIT:
        return None  # applying joins the three weights: each must be one the index will read
    bias = ix.const_value(found["b"]) if "b" in found.binds else None
    if "b" in found.binds and (bias is None or bias.shape != (w[0][1],) or bias.dtype != w[1]):
        return None  # a bias this scan cannot read is not dropped: no packed projection
    return found["x"], found["w"], w[0], bias, found.node_list()


def _three_projections(ctx: ScanContext, a: AttentionMatch) -> PackedMatch:
    """Q, K, V each x @ Wi + bi of the same x: one [K, 3 x hidden] projection."""
    m = ctx.structure
    parts = []
    for t in (a.q, a.k, a.v):
        part = linear_projection(ctx, t)
        if part is None:
            raise Miss("Q, K and V are not constant linear projections (x @ W + b)")
        parts.append(part)
    xs = {p[0] for p in parts}
    if len(xs) != 1:
        raise Miss("Q, K and V are projections of different tensors (cross-attention?)")
    x = parts[0][0]
    if m.d.rank(x) != 3:
        raise Miss("projection input is not [batch, seq, hidden]")
    hidden = a.num_heads * a.head_size
    if any(p[2][1] != hidden or p[2][0] != parts[0][2][0] for p in parts):
        raise Miss(f"projection widths {[list(p[2]) for p in parts]} are not 3 x {hidden}")
    kinds = {meta[1] for meta in (weight_meta(ctx.index, p[1]) for p in parts) if meta is not None}
    if len(kinds) != 1:
        raise Miss("Q, K and V weights are of different float types")
    kind = kinds.pop()
    b = np.concatenate([p[3] if p[3] is not None else np.zeros(hidden, kind) for p in parts])
    nodes = list(a.nodes) + [n for p in parts for n in p[4]]
    shape_ids: set[int] = set()
    for n in a.nodes:
        if n.op_type == "Reshape":
            shape_inputs_walk(m, n.input[1], shape_ids)
    matched = m.absorb(nodes, shape_ids)
    m.check_contained(nodes, matched, {a.output})
    return PackedMatch(a, nodes, x, tuple(p[1] for p in parts), b, m.ix)


def packed_replacement(p: PackedMatch) -> list[Replacement]:
    """contrib Attention(x, W, b, attention_bias) (+ the kept merge-heads Reshape) for one packed match."""
    a = p.mha
    w_name, w_value = p.weight()
    b_name = a.output + "_qkv_bias"
    inits = {b_name: p.bias} if w_value is None else {w_name: w_value, b_name: p.bias}
    pre, bias = mask_bias(a)
    inputs = [p.x, w_name, b_name] + (["", "", bias] if bias else [])
    attrs = {"num_heads": a.num_heads, "scale": float(np.float32(a.scale))}
    if a.reshape_out is None:
        return guard_output(a, pre + [
            Replacement(
                inputs=inputs,
                attrs=attrs,
                op="Attention",
                domain=MS_DOMAIN,
                outputs=[a.output],
                initializers=inits,
            )
        ])
    mid = a.output + "_attention"
    return pre + [
        Replacement(
            inputs=inputs, attrs=attrs, op="Attention", domain=MS_DOMAIN, outputs=[mid], initializers=inits
        ),
        Replacement(inputs=[mid, a.reshape_out[0]], op="Reshape", domain="", outputs=[a.output]),
    ]


def _packed(ctx: ScanContext, a: AttentionMatch) -> tuple:
    p = packed_projection(ctx, a)
    return p, p.nodes, [a.output]


RULES: list[Rule] = [
    Rule(
        name="attention_packed",
        description="one Q|K|V projection (x @ W + b, Split) + attention -> contrib Attention",
        fused_op="Attention",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        find=lambda ctx: widen(ctx, RULES[0], _packed),
        replace=lambda m: packed_replacement(m.payload),
        requires=("attention_mha",),
        priority=110,
    ),
]
