"""Stage 1 of attention: the scaled-dot-product core every attention rule builds on.

Anchored on Softmax, the core is

    MatMul(q [* c1], K^T [* c2]) [* c | / c] [+ bias] [+ mask | Where(keep, ., fill)] -> Softmax(-1)
        [-> Where(IsNaN(p), 0, p)] [-> Cast float] -> MatMul(p, v) [-> Reshape to its own shape]

with K^T written as ``Transpose(0,2,3,1)`` of a [B,S,H,D] head split, ``Transpose(0,1,3,2)`` of a [B,H,S,D]
tensor, or the dynamo exporter's flattened ``Reshape(Transpose(Reshape(k, [-1,S,D]), (0,2,1)), [B,H,D,S])``.
Every scalar factor on Q, K or the scores multiplies into one ``scale``; the additive mask (or a boolean one
selected by Where) and its shape are checked against the ``attention_bias`` contract of onnxruntime's
attention ops. Two additive terms in a row (MPNet adds its relative-position bias, then the mask) are one
``attention_bias``, their sum, computed in front of the fused op. The cores of a scan are found once
(``attention_cores(ctx)``, memoised in the ScanContext); the MHA, packed Attention and KV-cache rules then
read the layout around each core. A Softmax that is no core is a near miss with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx

from fuseview.fusion.dtypes import FLOATS, is_float, type_name
from fuseview.fusion.toolkit import Miss, ScanContext, Structure, scalar, single_reader

FLOAT = onnx.TensorProto.FLOAT


@dataclass
class SdpaCore:
    """One scaled-dot-product block: its nodes and what it computes from which tensors."""

    softmax: onnx.NodeProto
    nodes: list[onnx.NodeProto]
    shape_nodes: set[int]
    q: str  # [B,H,S,D] query after its scale factor
    k_bnsh: str | None  # [B,H,T,D] key when K^T is taken per head (else None: k_split)
    k_split: tuple | None  # heads_of() of the [B,S,H,D] key under Transpose(0,2,3,1), or split3d of k_bnsh
    k_transpose: onnx.NodeProto  # the node transposing K (named in near misses)
    v: str  # [B,H,T,D] value
    scale: float
    bias: str | None  # additive mask [B|1,H|1,S,T]
    bias_terms: tuple[str, str] | None  # set when bias is the sum of these two (bias then names the sum)
    # (boolean condition, fill, whether the fill goes where it is true) of a Where-selected mask
    where_mask: tuple[str, float, bool] | None
    pv: onnx.NodeProto  # MatMul(probs, v)
    output: str  # [B,H,S,D] result (after an identity Reshape when there is one)
    guarded: bool = False  # probabilities pass Where(IsNaN(p), 0, p): fully masked rows give 0
    # query heads per key/value head when Q is packed per KV head ([B,H,1,D] -> [B,KVH,R,D], transformers'
    # pack_gqa for one new token) and K, V keep their KVH heads; 1 otherwise
    groups: int = 1
    notes: list[str] = field(default_factory=list)


def where_mask(s: Structure, w: onnx.NodeProto, core: list) -> tuple[onnx.NodeProto, float, tuple]:
    """Scores masked by select: Where(keep, scaled Q.K^T, fill) with a boolean keep and a very negative
    fill. The same after Softmax as adding Where(keep, 0, fill): exp of the filled places is 0 either
    way. Returns (QK MatMul, scale factor, (condition, fill, whether the fill goes where it is true))."""
    cond, x, y = w.input
    fill_if = False  # Where(keep, scores, fill); or Where(drop, fill, scores): fill where cond is true
    fill = scalar(s.d, y)
    if fill is None and scalar(s.d, x) is not None:
        fill, x, fill_if = scalar(s.d, x), y, True
    keep = cond
    if fill is None or not fill <= -1e4:
        raise Miss(f"{w.name}: mask fill is not a constant of -1e4 or below")
    if s.ix.const_dtype(keep) not in (onnx.TensorProto.BOOL, None):
        raise Miss(f"{w.name}: mask condition is not boolean")
    r = s.d.rank(keep)
    if r is None or r > 4 or (r == 4 and s.d.canon(("dim", keep, 2)) == 1) or r < 2:
        raise Miss(f"{w.name}: boolean mask is not [B|1, H|1, S, T] with the query axis")
    probe: list = []
    inner, f = s.scale_mul(x, probe)
    mm = s.prod(inner, "MatMul")
    if mm is None:
        raise Miss(f"{w.name}: the selected scores are not the scaled Q.K^T MatMul")
    core.extend([w] + probe)
    return mm, f, (keep, fill, fill_if)


def nan_guard(s: Structure, t: str) -> list[onnx.NodeProto] | None:
    """[IsNaN, Where] when t is only read by Where(IsNaN(t), 0, t): SDPA's guard for fully masked rows."""
    users = s.ix.consumers.get(t, ())
    if len(users) != 2 or t in s.ix.graph_outputs:
        return None
    isnan = next((u for u in users if u.op_type == "IsNaN"), None)
    where = next((u for u in users if u.op_type == "Where"), None)
    if isnan is None or where is None or list(where.input[::2]) != [isnan.output[0], t]:
        return None
    zero = s.d.const(where.input[1])
    if zero is None or zero.size != 1 or float(np.ravel(zero)[0]) != 0.0:
        return None
    if s.ix.consumers.get(isnan.output[0], ()) != [where]:
        return None
    return [isnan, where]


def kt_through_3d(s: Structure, t: str, core: list, shape_nodes: set) -> str | None:
    """kh when t = Reshape(Transpose(Reshape(kh, [-1, S, D]), (0, 2, 1)), [B, H, D, S]): kh^T per head
    written over a flattened batch*heads axis (the dynamo exporter's SDPA decomposition)."""
    outer = s.prod(t, "Reshape")
    tr = s.prod(outer.input[0], "Transpose") if outer is not None else None
    inner = s.prod(tr.input[0], "Reshape") if tr is not None else None
    if outer is None or tr is None or inner is None or s.perm(tr) != [0, 2, 1]:
        return None
    kh = inner.input[0]
    local: set[int] = set()
    vin, vout = s.d.vec(inner.input[1], local), s.d.vec(outer.input[1], local)
    if s.d.rank(kh) != 4 or vin is None or vout is None or len(vin) != 3 or len(vout) != 4:
        return None
    dims = [("dim", kh, j) for j in range(4)]
    if not (s.d.same(vin[1], dims[2]) and s.d.same(vin[2], dims[3])):
        return None
    if not all(s.d.same(vout[j], dims[k]) for j, k in ((0, 0), (1, 1), (2, 3), (3, 2))):
        return None
    core.extend([outer, tr, inner])  # check_contained() later rejects intermediates read elsewhere
    shape_nodes |= local
    return kh


def _softmax_axis(s: Structure, sm: onnx.NodeProto) -> None:
    ix = s.ix
    r_sm = s.d.rank(sm.input[0])
    axis = int(ix.attr(sm, "axis", -1 if ix.opsets.get("", 13) >= 13 else 1))
    if r_sm is not None and axis % r_sm != r_sm - 1 or r_sm is None and axis != -1:
        raise Miss(f"{sm.name}: Softmax over axis {axis}, not the key axis")
    if r_sm not in (4, None):
        raise Miss(f"{sm.name}: scores are not 4-D [batch, heads, seq, seq]")
    if ix.opsets.get("", 13) < 13 and axis % 4 != 3:
        raise Miss(f"{sm.name}: opset<13 Softmax flattens from axis {axis}")


def _probs_times_v(s: Structure, sm: onnx.NodeProto, core: list, shape_nodes: set) -> tuple:
    """Forward from Softmax: [NaN guard] [Cast] MatMul(p, v) [identity Reshape]; (MatMul, output)."""
    ix = s.ix
    t = sm.output[0]
    guarded = False
    while True:  # the NaN guard and float Casts (a float32 Softmax of float16 scores), in either order
        guard = None if guarded else nan_guard(s, t)
        nxt = single_reader(ix, t)
        if guard is not None:
            core.extend(guard)
            t, guarded = guard[-1].output[0], True
        elif nxt is not None and nxt.op_type == "Cast":
            if not is_float(ix.attr(nxt, "to")) or ix.const_dtype(t) not in (*FLOATS, None):
                raise Miss(f"{nxt.name}: Cast after Softmax is not between float types")
            core.append(nxt)
            t = nxt.output[0]
        else:
            break
    if nxt is None or nxt.op_type != "MatMul" or nxt.input[0] != t:
        if t in ix.graph_outputs:
            raise Miss(f"intermediate {t} is a graph output")
        raise Miss(f"{sm.name}: probabilities are not used only by MatMul(probs, V)")
    core.append(nxt)
    out = nxt.output[0]
    same = s.identity_reshape_after(out, shape_nodes)
    if same is not None:
        core.append(same)
        out = same.output[0]
    return nxt, out


def _scores(s: Structure, sm: onnx.NodeProto, core: list) -> tuple:
    """Back from Softmax: [Add mask | Where mask] [scale] MatMul; (QK MatMul, scale, bias, where mask)."""
    d, ix = s.d, s.ix
    s_in = sm.input[0]
    cast = s.prod(s_in, "Cast")
    while (cast is not None and is_float(ix.attr(cast, "to")) and single_reader(ix, cast.input[0]) is cast
           and ix.const_dtype(cast.input[0]) in (*FLOATS, None)):
        # T5's scores.float() on float scores (no work), or float16 scores put in float32 for the Softmax
        # (softmax(dtype=float32)): the fused kernels keep their Softmax in float32 themselves
        core.append(cast)
        s_in = cast.input[0]
        cast = s.prod(s_in, "Cast")
    bias = None
    terms: tuple[str, str] | None = None
    where = None
    add = s.prod(s_in, "Add")
    mm_qk = s.prod(s_in, "MatMul")
    scale = 1.0
    if add is not None:
        core.append(add)
        a, b = add.input[0], add.input[1]
        # the scores side is the one leading to the QK MatMul (through one more Add of a bias at most)
        for sc, other in ((a, b), (b, a)):
            inner, f = s.scale_mul(sc, probe := list[onnx.NodeProto]())
            if s.prod(inner, "MatMul") is not None:
                core.extend(probe)
                scale *= f
                mm_qk = s.prod(inner, "MatMul")
                bias = other
                break
            first = s.prod(sc, "Add")
            if first is None or single_reader(ix, sc) is not add:
                continue
            found = _scaled_scores_of(s, first)
            if found is not None:
                (inner_mm, f, probe, first_other) = found
                core.extend([first, *probe])
                scale *= f
                mm_qk = inner_mm
                bias, terms = other, (first_other, other)
                break
        else:
            for sc in (a, b):
                n = s.prod(sc, "Mul", "Div")
                if n is not None and any(s.prod(x, "MatMul") is not None for x in n.input):
                    raise Miss(f"{n.name}: scores scaled by a tensor that is not a scalar constant")
            raise Miss(f"{add.name}: neither operand is the scaled Q.K^T MatMul")
    elif mm_qk is None:
        inner, f = s.scale_mul(s_in, core)
        mm_qk = s.prod(inner, "MatMul")
        scale *= f
        if mm_qk is None:
            w = s.prod(s_in, "Where")
            if w is None:
                raise Miss(f"{sm.name}: Softmax input is not (masked, scaled) Q.K^T")
            mm_qk, f, where = where_mask(s, w, core)
            scale *= f
    at = (add if add is not None else sm).name  # where a mask's near miss is reported
    for t in terms or ((bias,) if bias is not None else ()):
        if d.rank(t) not in (4, None):
            raise Miss(f"{at}: mask is {d.rank(t)}-D; MultiHeadAttention needs [B|1,H|1,S,T]")
        if d.rank(t) is None:
            raise Miss(f"{at}: mask rank unknown")
        kind, scores = ix.const_dtype(t), ix.const_dtype(mm_qk.output[0]) if mm_qk is not None else None
        if kind is not None and (not is_float(kind) or scores not in (None, kind)):
            raise Miss(f"{at}: mask is {type_name(kind)}, the scores {type_name(scores)}; the fused op takes "
                       "the mask in the scores' float type")
    if bias is not None and all(d.canon(("dim", t, 2)) == 1 for t in terms or (bias,)):
        raise Miss(f"{at}: mask is [B,1,1,T]; MultiHeadAttention needs the query axis")
    core.append(mm_qk)
    return mm_qk, scale, bias, where, terms


def _scaled_scores_of(s: Structure, add: onnx.NodeProto) -> tuple | None:
    """(QK MatMul, scale factor, scale nodes, the other operand) when add = scaled Q.K^T + a tensor."""
    for sc, other in ((add.input[0], add.input[1]), (add.input[1], add.input[0])):
        inner, f = s.scale_mul(sc, probe := list[onnx.NodeProto]())
        mm = s.prod(inner, "MatMul")
        if mm is not None:
            return mm, f, probe, other
    return None


def _key(s: Structure, mm_qk: onnx.NodeProto, core: list, shape_nodes: set) -> tuple:
    """K^T of the scores MatMul; (k_bnsh or None, k_split or None, transpose node, factor)."""
    ka, fk = s.scale_mul(mm_qk.input[1], core)
    flat_kt = kt_through_3d(s, ka, core, shape_nodes)
    tr_k = s.prod(ka, "Transpose") if flat_kt is None else None
    if flat_kt is not None:
        kh, fk2 = s.scale_mul(flat_kt, core)
        return kh, s.split3d(kh), s.d.producer(ka), fk * fk2
    if tr_k is None:
        raise Miss(f"{mm_qk.name}: K is not transposed")
    core.append(tr_k)
    if s.perm(tr_k) == [0, 2, 3, 1]:
        k_split = s.heads_of(tr_k.input[0], [tr_k], "K")
        core.remove(tr_k)
        return None, k_split, tr_k, fk
    if s.perm(tr_k) == [0, 1, 3, 2]:
        kh, fk2 = s.scale_mul(tr_k.input[0], core)
        return kh, s.split3d(kh), tr_k, fk * fk2
    raise Miss(f"{tr_k.name}: K transpose perm {s.perm(tr_k)} is not K^T per head")


def match_core(s: Structure, sm: onnx.NodeProto) -> SdpaCore:
    """The core around one Softmax, or Miss with the reason."""
    core: list[onnx.NodeProto] = [sm]
    shape_nodes: set[int] = set()
    _softmax_axis(s, sm)
    pv, out = _probs_times_v(s, sm, core, shape_nodes)
    guarded = any(n.op_type == "IsNaN" for n in core)
    mm_qk, scale, bias, where, terms = _scores(s, sm, core)
    qa, fq = s.scale_mul(mm_qk.input[0], core)
    groups = 1
    packed = packed_query(s, qa, out, core, shape_nodes)
    if packed is not None:
        qa, out, groups = packed
        qa, fq2 = s.scale_mul(qa, core)
        fq *= fq2
        for t in terms or ((bias,) if bias is not None else ()):
            shape = s.ix.shape(t)
            one_head = shape is not None and len(shape) == 4 and shape[1] == 1
            if s.d.canon(("dim", t, 1)) != 1 and not one_head:
                raise Miss(f"{sm.name}: per-head mask over a query packed per key/value head")
    kh, k_split, tr_k, fk = _key(s, mm_qk, core, shape_nodes)
    if terms is not None:
        bias = pv.output[0] + "_attention_bias"  # the sum, made in front of the fused op
    return SdpaCore(sm, core, shape_nodes, qa, kh, k_split, tr_k, pv.input[1], scale * fq * fk, bias,
                    terms, where, pv, out, guarded, groups)


def packed_query(s: Structure, qa: str, out: str, core: list, shape_nodes: set
                 ) -> tuple[str, str, int] | None:
    """(query [B,H,S,D], unpacked output [B,H,S,D], R) when the query is packed per key/value head and the
    output unpacked back, as transformers' ``pack_gqa`` writes it for one new token:

        Reshape(q, [B, H/R, R, D]) -> core over [B, KVH, T, D] keys -> Reshape(o, [B, -1, S, D])

    The pack holds only where S is 1 (H*S*D elements into H*D), so the original runs only there, and there
    it is grouped-query attention with query head h reading key/value head h // R."""
    pack = s.prod(qa, "Reshape")
    if pack is None or s.d.rank(pack.input[0]) != 4:
        return None
    q = pack.input[0]
    local: set[int] = set()
    vec = s.d.vec(pack.input[1], local)
    heads, size = s.d.canon(("dim", q, 1)), s.d.canon(("dim", q, 3))
    if vec is None or len(vec) != 4 or not isinstance(heads, int) or not isinstance(vec[2], int):
        return None
    r = vec[2]
    allow0 = not s.ix.attr(pack, "allowzero", 0)
    if r < 2 or heads % r or s.d.canon(vec[1]) != heads // r:
        return None
    if not ((vec[0] == 0 and allow0) or s.d.same(vec[0], ("dim", q, 0))) or s.d.canon(vec[3]) != size:
        return None
    users = s.ix.consumers.get(out, ())
    rest = [u for u in users if u.op_type != "Shape"]
    if len(rest) != 1 or rest[0].op_type != "Reshape" or out in s.ix.graph_outputs:
        return None
    unpack = rest[0]
    uvec = s.d.vec(unpack.input[1], local)
    if uvec is None or len(uvec) != 4:
        return None
    batch_ok = (uvec[0] == 0 and not s.ix.attr(unpack, "allowzero", 0)) or any(
        s.d.same(uvec[0], ("dim", x, 0)) for x in (out, q))
    heads_ok = uvec[1] == -1 or s.d.canon(uvec[1]) == heads
    if not (batch_ok and heads_ok and s.d.same(uvec[2], ("dim", q, 2)) and s.d.canon(uvec[3]) == size):
        return None
    if any(u.op_type == "Shape" and id(u) not in local for u in users):
        return None
    core.extend([pack, unpack])
    shape_nodes |= local
    return q, unpack.output[0], r


def _find_cores(ctx: ScanContext) -> tuple[dict[str, SdpaCore], list[tuple[list[str], str]]]:
    index, s = ctx.index, ctx.structure
    found: dict[str, SdpaCore] = {}
    misses: list[tuple[list[str], str]] = []
    for sm in index.by_op.get("Softmax", ()):
        if sm.domain not in ("", "ai.onnx"):
            continue
        try:
            found[index.name(sm)] = match_core(s, sm)
        except Miss as exc:
            misses.append(([index.name(sm)], str(exc)))
    return found, misses


def attention_cores(ctx: ScanContext) -> tuple[dict[str, SdpaCore], list[tuple[list[str], str]]]:
    """The scan's cores by Softmax name and the near misses (node names, reason); found once per scan."""
    return ctx.memo(attention_cores, _find_cores)
