"""Stage 3 of attention: grouped-query attention (Llama, Qwen, Mistral) -> com.microsoft GroupQueryAttention.

Over an ``attention_mha`` block whose key and value are ``repeat_kv`` of fewer heads,

    kv [B, KVH, T, D] -> Unsqueeze(2) -> Expand [B, KVH, R, T, D] -> Reshape [B, KVH*R, T, D]

(kv being ``Concat(past, new, axis=2)`` with a KV cache, the Concat's output the present tensor) the block
becomes ``GroupQueryAttention(query, key, value, past_key, past_value, seqlens_k, total_sequence_length,
attention_bias=mask, num_heads=H, kv_num_heads=KVH, scale=c, causal=0)``: the key/value heads are shared
by the kernel instead of being copied, and with a cache it writes the present key/value. ``causal=0`` with
the model's own additive mask as ``attention_bias`` keeps the model's arithmetic for every mask (causal,
right or left padding); ``seqlens_k`` is then total length - 1 for every row (onnxruntime's contract for
unpadded rows). Where the mask is evaluated causal (``attention_causal``) the op gets ``causal=1`` instead,
onnxruntime's faster path, with the same mask. ``attention_gqa`` leaves the rotary embedding in the graph
(the key is taken after it, transposed back to [B, S, KVH*D]); ``attention_gqa_rotary`` folds a rotate_half
rotary on Q and K into the op (``do_rotary=1`` with cos/sin caches computed from the graph, see
``attention_rotary``) where the model's positions are past + arange(new). The ``_qkv`` forms also join the
three projections x @ Wq, x @ Wk, x @ Wv (+ b) into one MatMul feeding the op's packed query (key and value
omitted), as onnxruntime-genai's builder does. The forms overlap; the scan offers them all, packed first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from fuseview.errors import FuseviewError
from fuseview.fusion import dtypes
from fuseview.fusion.rule import MS_DOMAIN, Replacement, Rule
from fuseview.fusion.rules.attention_causal import mask_is_causal
from fuseview.fusion.rules.attention_mha import AttentionMatch, grouped_blocks, guard_output, mask_bias, widen
from fuseview.fusion.rules.attention_packed import linear_projection, weight_meta
from fuseview.fusion.rules.attention_rotary import Rotary, match_rotary, rotary_caches
from fuseview.fusion.toolkit import Miss, ScanContext, Structure, shape_inputs_walk

INT32 = onnx.TensorProto.INT32


@dataclass
class GqaMatch:
    """An attention block with shared key/value heads: what GroupQueryAttention needs."""

    mha: AttentionMatch
    nodes: list[onnx.NodeProto]
    kv_heads: int
    key: str  # [B, KVH, S, D] new key heads (after rotary), or the [B, S, KVH*D] split input
    key_3d: bool
    value: str
    value_3d: bool
    past: tuple[str, str] | None  # past key, past value [B, KVH, P, D]
    present: tuple[str, str] | None  # the model's present key and value (the fused op writes them)
    # outputs of Shape nodes outside the block that read the repeated key or value (Optimum's Llama sizes its
    # mask by the repeated key): the replacement computes [B, H, P + S, D] for them from the new heads and
    # the past, so the mask never waits on the fused op's own outputs
    repeat_shapes: tuple[str, ...] = ()
    # set when the rotary embedding folds in (attention_gqa_rotary): the query and key before it, each
    # [B, S, N*D] (a head split taken back) or [B, N, S, D], and the cos/sin caches [max_seq, D/2]
    rotary: RotaryFold | None = None
    # where seqlens_k / total_sequence_length read the batch, new-token and past lengths: a fixed size, or
    # (tensor, axis) of the first graph input holding the same dim, so that every layer's lengths are the
    # same nodes and are computed once (fusion.shared_work); the block's own tensors where none does
    sources: dict[str, int | tuple[str, int]] = field(default_factory=dict)
    # set by the packed rules (attention_gqa_qkv, attention_gqa_rotary_qkv): the three projections as one
    packed: PackedQkv | None = None
    # the model's mask hides every later key (attention_causal): causal=1, onnxruntime's faster path
    causal: bool = False


@dataclass
class RotaryFold:
    """What GroupQueryAttention's own rotary (do_rotary=1) takes instead of the rotated heads."""

    query: str
    query_3d: bool
    key: str
    key_3d: bool
    cos_cache: np.ndarray
    sin_cache: np.ndarray


@dataclass
class PackedQkv:
    """One projection x @ [Wq | Wk | Wv] (+ [bq | bk | bv]): GroupQueryAttention's packed query, key and
    value omitted. Weight names, not values: a scan reads no weight; the bias is small and read."""

    x: str
    weights: tuple[str, str, str]
    bias: np.ndarray | None  # [Nq + Nk + Nv], zeros where a projection has none; None when none has one
    ix: Any

    def weight(self) -> np.ndarray:
        """[Wq | Wk | Wv], read when the fusion is applied."""
        values = [self.ix.read_once(t) for t in self.weights]
        if any(v is None for v in values):
            raise FuseviewError(f"{self.x}: a projection weight can no longer be read")
        return np.concatenate(values, axis=1)


def _axes(s: Structure, n: onnx.NodeProto) -> list[int] | None:
    ax = s.ix.attr(n, "axes")
    if ax is None and len(n.input) > 1 and n.input[1]:
        v = s.d.const(n.input[1])
        ax = None if v is None else np.ravel(v).tolist()
    return None if ax is None else [int(a) for a in ax]


def repeat_kv(op, kv):
    """Hugging Face's repeat_kv: Unsqueeze(kv, 2) -> Expand([B, KVH, R, T, D]) -> Reshape([B, KVH*R, T, D])
    (the axes an attribute or an input, by opset); the shapes are proven by unrepeat, not by the pattern."""
    u = op.Unsqueeze(kv, op.opt(op.var("axes")), _label="unsqueeze")
    return op.Reshape(op.Expand(u, op.var("expand_shape"), _label="expand"), op.var("merge_shape"),
                      _label="merge")


def _repeats(ctx: ScanContext, t: str) -> bool:
    """t looks like repeat_kv, proven or not."""
    return ctx.match(repeat_kv, at=t) is not None


def unrepeat(
    ctx: ScanContext, t: str, heads: int, head_size: int, nodes: list, shape_ids: set
) -> tuple[str, int]:
    """(kv, KVH) when t = Reshape(Expand(Unsqueeze(kv, 2), [B, KVH, R, T, D]), [B, KVH*R, T, D])."""
    s = ctx.structure
    found = ctx.match(repeat_kv, at=t)
    r, e, u = (found.node(x) for x in ("merge", "expand", "unsqueeze")) if found else (None, None, None)
    if r is None or e is None or u is None or _axes(s, u) != [2]:
        raise Miss(f"{t}: key/value heads are not repeat_kv (Unsqueeze(2), Expand, Reshape)")
    kv = u.input[0]
    shape = s.ix.shape(kv)
    if shape is None or len(shape) != 4 or not isinstance(shape[1], int):
        raise Miss(f"{u.name}: key/value heads [B, KVH, T, D] unknown")
    kvh = shape[1]
    if kvh <= 0 or heads % kvh or kvh == heads:
        raise Miss(f"{u.name}: {kvh} key/value heads for {heads} query heads is no grouping")
    local: set[int] = set()
    ev, rv = s.d.vec(e.input[1], local), s.d.vec(r.input[1], local)
    if ev is None or rv is None or len(ev) != 5 or len(rv) != 4:
        raise Miss(f"{e.name}: repeat_kv shapes are not known vectors")
    rep = heads // kvh
    own = [("dim", kv, j) for j in range(4)]
    sizes = [None, kvh, None, head_size]  # what the inferred shapes say the head axes hold
    for j, got in enumerate(ev):
        if j == 2:
            ok = s.d.same(got, rep)
        else:
            k = j if j < 2 else j - 1
            ok = got in (1, -1) or s.d.same(got, own[k]) or (sizes[k] is not None and s.d.same(got, sizes[k]))
        if not ok:
            raise Miss(f"{e.name}: Expand element {j} is not the key/value's own dim (repeat_kv)")
    merged = {heads, ("expr", "Mul", s.d.canon(own[1]), rep), ("expr", "Mul", rep, s.d.canon(own[1]))}
    free = [j for j, got in enumerate(rv) if got == -1]
    for j, got in enumerate(rv):
        if j == 1:
            ok = s.d.canon(got) in merged
        else:
            ok = s.d.same(got, own[j]) or (j == 3 and s.d.same(got, head_size))
        if not (ok or (got == -1 and len(free) == 1)):
            raise Miss(f"{r.name}: reshape element {j} does not merge the repeated heads")
    nodes.extend([r, e, u])
    walked: set[int] = set()  # a fresh walk: vec() records nodes without their inputs
    for n in (e, r):
        shape_inputs_walk(s, n.input[1], walked)
    shape_ids |= local | walked
    return kv, kvh


def _new_heads(s: Structure, kv: str, nodes: list) -> tuple[str, str | None, str | None]:
    """(new-token heads, past, present) of kv: Concat(past, new, axis=2) with a cache, else kv itself."""
    cat = s.prod(kv, "Concat")
    if cat is not None and len(cat.input) == 2 and int(s.ix.attr(cat, "axis", 0)) in (2, -2):
        nodes.append(cat)
        return cat.input[1], cat.input[0], cat.output[0]
    return kv, None, None


def match_gqa(ctx: ScanContext, a: AttentionMatch) -> GqaMatch:
    """The GroupQueryAttention block over an attention_mha match, or Miss with the reason."""
    s = ctx.structure
    nodes = list(a.nodes)
    shape_ids: set[int] = set()
    if a.cache is not None:
        raise Miss("key/value are full heads with a cache: MultiHeadAttention takes them")
    if a.kv_groups > 1:  # the core already reads the key/value heads unrepeated (a packed query)
        kv_k, kvh, kv_v, kvh_v = a.k, a.num_heads // a.kv_groups, a.v, a.num_heads // a.kv_groups
    else:
        kv_k, kvh = unrepeat(ctx, a.k, a.num_heads, a.head_size, nodes, shape_ids)
        kv_v, kvh_v = unrepeat(ctx, a.v, a.num_heads, a.head_size, nodes, shape_ids)
    if kvh != kvh_v:
        raise Miss(f"{a.softmax.name}: key has {kvh} heads, value {kvh_v}")
    k_new, past_k, present_k = _new_heads(s, kv_k, nodes)
    v_new, past_v, present_v = _new_heads(s, kv_v, nodes)
    if (past_k is None) != (past_v is None):
        raise Miss(f"{a.softmax.name}: only one of key and value has a cache")
    for x in (past_k, past_v):
        if x is not None and s.d.rank(x) != 4:
            raise Miss(f"{x}: past is not [B, KVH, P, D]")
    k_split, v_split = s.split3d(k_new), s.split3d(v_new)
    for split in (k_split, v_split):
        if split is not None:
            nodes.extend(split[1])
            shape_ids |= split[4]
    key, value = (k_split[0] if k_split else k_new), (v_split[0] if v_split else v_new)
    for n in list(nodes):
        if n.op_type == "Reshape":
            shape_inputs_walk(s, n.input[1], shape_ids)
    shapes = _repeat_shape_readers(s, a, nodes, k_split is None)
    matched = s.absorb(nodes, shape_ids)
    present = {x for x in (present_k, present_v) if x}
    s.check_contained(nodes, matched, {a.output} | present | set(shapes))
    seq_axis = 2 if a.q_bnsh else 1
    v_seq = 1 if v_split is None and s.d.rank(v_new) == 3 else 2  # the value is never rotated: read it too
    found = {"batch": dim_source(s, a.q, 0) or dim_source(s, v_new, 0),
             "new": dim_source(s, a.q, seq_axis) or dim_source(s, v_new, v_seq),
             "past": None if past_k is None else dim_source(s, past_k, 2)}
    sources = {k: v for k, v in found.items() if v is not None}
    return GqaMatch(a, nodes, kvh, key, k_split is not None, value, v_split is not None,
                    (past_k, past_v) if past_k and past_v else None,
                    (present_k, present_v) if present_k and present_v else None,
                    tuple(shapes), sources=sources, causal=mask_is_causal(ctx, a))


def dim_source(s: Structure, t: str, axis: int) -> int | tuple[str, int] | None:
    """Where dim `axis` of t can be read once for the whole model: its size when fixed, else the first
    graph input (and axis) the dims engine proves holds the same dim; None when neither is known."""
    tok = s.d.dim(t, axis)
    if isinstance(tok, int):
        return tok
    if tok is not None:
        for vi in s.ix.graph.input:
            if not vi.type.HasField("tensor_type") or not vi.type.tensor_type.HasField("shape"):
                continue
            for i in range(len(vi.type.tensor_type.shape.dim)):
                if s.d.same(s.d.dim(vi.name, i), tok):
                    return vi.name, i
    return None


def _repeat_shapes_of(s: Structure, t: str, nodes: list) -> list[onnx.NodeProto]:
    ids = {id(n) for n in nodes}
    return [u for u in s.ix.consumers.get(t, ()) if id(u) not in ids and u.op_type == "Shape"
            and not any(a.name in ("start", "end") for a in u.attribute)]


def _repeat_shape_readers(s: Structure, a: AttentionMatch, nodes: list, bnsh: bool) -> list[str]:
    """Whole-shape Shape nodes outside the block reading the repeated key/value: they join the block (their
    outputs are then written by the replacement). Only where the new key goes in as [B, KVH, S, D] heads."""
    if a.kv_groups > 1 or not bnsh:
        return []
    readers = _repeat_shapes_of(s, a.k, nodes) + _repeat_shapes_of(s, a.v, nodes)
    nodes.extend(readers)
    return [n.output[0] for n in readers]


def _to_bsh(t: str, out: str) -> list[Replacement]:
    """[B, N, S, D] -> [B, S, N*D]."""
    shape = out + "_shape"
    return [Replacement(inputs=[t], attrs={"perm": [0, 2, 1, 3]}, op="Transpose", domain="",
                        outputs=[out + "_bsnh"]),
            Replacement(inputs=[out + "_bsnh", shape], op="Reshape", domain="", outputs=[out],
                        initializers={shape: np.array([0, 0, -1], np.int64)})]


def _lengths(g: GqaMatch, query: str, base: str) -> list[Replacement]:
    """seqlens_k ([B] int32, total - 1 per row) and total_sequence_length (int32 scalar), read from the
    shared sources (GqaMatch.sources) where the match found them, else from the block's own tensors."""
    def size(src: int | tuple[str, int], out: str) -> Replacement:
        if isinstance(src, int):  # a fixed size: a constant, no Shape at run time
            fixed = np.array([src], np.int64)
            return Replacement(inputs=[], op="", domain="", outputs=[], initializers={out: fixed})
        return Replacement(inputs=[src[0]], attrs={"start": src[1], "end": src[1] + 1}, op="Shape", domain="",
                           outputs=[out])

    src = g.sources
    reps = [size(src.get("new", (query, 1)), base + "_new_len"), size(src.get("batch", (query, 0)),
                                                                      base + "_batch")]
    total = base + "_new_len"
    if g.past is not None:
        reps += [size(src.get("past", (g.past[0], 2)), base + "_past_len"),
                 Replacement(inputs=[base + "_past_len", base + "_new_len"], op="Add", domain="",
                             outputs=[base + "_total_len"])]
        total = base + "_total_len"
    one, scalar = base + "_one", base + "_scalar_shape"
    reps += [
        Replacement(inputs=[total], attrs={"to": INT32}, op="Cast", domain="", outputs=[base + "_total32"]),
        Replacement(inputs=[base + "_total32", one], op="Sub", domain="", outputs=[base + "_last"],
                    initializers={one: np.array([1], np.int32)}),
        Replacement(inputs=[base + "_last", base + "_batch"], op="Expand", domain="",
                    outputs=[base + "_seqlens_k"]),
        Replacement(inputs=[base + "_total32", scalar], op="Reshape", domain="",
                    outputs=[base + "_total_sequence_length"],
                    initializers={scalar: np.array([], np.int64)}),
    ]
    return reps


def _repeat_shape_values(g: GqaMatch, base: str) -> list[Replacement]:
    """[B, H, P + S, D] (the repeated key's shape) for each Shape output the block took over."""
    if not g.repeat_shapes:
        return []

    def part(x: str, start: int, out: str) -> Replacement:
        return Replacement(inputs=[x], attrs={"start": start, "end": start + 1}, op="Shape", domain="",
                           outputs=[out])

    heads, length = base + "_rep_heads", base + "_rep_new"
    reps = [part(g.key, 0, base + "_rep_b"), part(g.key, 2, length), part(g.key, 3, base + "_rep_d")]
    if g.past is not None:
        reps += [part(g.past[0], 2, base + "_rep_past"),
                 Replacement(inputs=[base + "_rep_past", length], op="Add", domain="",
                             outputs=[base + "_rep_t"])]
        length = base + "_rep_t"
    out = g.repeat_shapes[0]
    reps.append(Replacement(inputs=[base + "_rep_b", heads, length, base + "_rep_d"], attrs={"axis": 0},
                            op="Concat", domain="", outputs=[out],
                            initializers={heads: np.array([g.mha.num_heads], np.int64)}))
    reps += [Replacement(inputs=[out], op="Identity", domain="", outputs=[o]) for o in g.repeat_shapes[1:]]
    return reps


def _packed_projection(p: PackedQkv, base: str) -> list[Replacement]:
    """x @ [Wq | Wk | Wv] (+ [bq | bk | bv]) into base_qkv."""
    weight, out = base + "_qkv_weight", base + "_qkv"
    mm = out if p.bias is None else base + "_qkv_mm"
    reps = [Replacement(inputs=[p.x, weight], op="MatMul", domain="", outputs=[mm],
                        initializers={weight: p.weight()})]
    if p.bias is not None:
        bias = base + "_qkv_bias"
        reps.append(Replacement(inputs=[mm, bias], op="Add", domain="", outputs=[out],
                                initializers={bias: p.bias}))
    return reps


def _heads_3d(g: GqaMatch, base: str, pre: list[Replacement]) -> tuple[str, str, str]:
    """Query, key and value as [B, S, N*D] (a Transpose + Reshape appended to pre where they are heads)."""
    a, r = g.mha, g.rotary
    query, q_3d = (a.q, not a.q_bnsh) if r is None else (r.query, r.query_3d)
    if not q_3d:
        query = base + "_query"
        pre += _to_bsh(a.q if r is None else r.query, query)
    key, value = (g.key, g.value) if r is None else (r.key, g.value)
    if not (g.key_3d if r is None else r.key_3d):
        key = base + "_key"
        pre += _to_bsh(g.key if r is None else r.key, key)
    if not g.value_3d:
        value = base + "_value"
        pre += _to_bsh(g.value, value)
    return query, key, value


def gqa_replacement(g: GqaMatch) -> list[Replacement]:
    """Query/key/value to [B, S, hidden], the lengths, GroupQueryAttention (+ the kept merge Reshape)."""
    a = g.mha
    base = a.output + "_gqa"
    pre, bias = mask_bias(a)
    r = g.rotary
    if g.packed is not None:
        query, key, value = base + "_qkv", "", ""
        pre += _packed_projection(g.packed, base)
    else:
        query, key, value = _heads_3d(g, base, pre)
    pre += _lengths(g, query, base)
    pre += _repeat_shape_values(g, base)
    past = list(g.past) if g.past else ["", ""]
    caches = ["", ""]
    attrs = {"num_heads": a.num_heads, "kv_num_heads": g.kv_heads, "scale": float(np.float32(a.scale)),
             "causal": int(g.causal)}
    if r is not None:
        kind = dtypes.np_dtype(a.dtype)  # the caches take the query's type
        caches = [base + "_cos_cache", base + "_sin_cache"]
        pre.append(Replacement(inputs=[], op="", domain="", outputs=[],
                               initializers={caches[0]: r.cos_cache.astype(kind),
                                             caches[1]: r.sin_cache.astype(kind)}))
        attrs.update(do_rotary=1, rotary_interleaved=0)
    inputs = [query, key, value, *past, base + "_seqlens_k", base + "_total_sequence_length",
              *caches, "", bias or ""]
    present = list(g.present) if g.present else [base + "_present_key", base + "_present_value"]
    main = a.output if a.reshape_out is None else base + "_out"
    reps = pre + [Replacement(inputs=inputs, attrs=attrs, op="GroupQueryAttention", domain=MS_DOMAIN,
                              outputs=[main, *present])]
    if a.reshape_out is not None:
        reps.append(Replacement(inputs=[main, a.reshape_out[0]], op="Reshape", domain="", outputs=[a.output]))
    return guard_output(a, reps)


def _gqa(ctx: ScanContext, a: AttentionMatch) -> tuple | None:
    if a.cache is not None or not (a.kv_groups > 1 or _repeats(ctx, a.k)):
        return None  # full key/value heads: MultiHeadAttention's block, not a grouped one
    g = match_gqa(ctx, a)
    return g, g.nodes, [a.output, *(g.present or ()), *g.repeat_shapes]


def _heads_in(s: Structure, r: Rotary, nodes: list, shape_ids: set) -> tuple[str, bool]:
    """The rotary's input as GroupQueryAttention reads it: [B, S, N*D] when it is a head split, else heads."""
    split = s.split3d(r.x)
    if split is None:
        return r.x, False
    nodes.extend(split[1])
    shape_ids |= split[4]
    return split[0], True


def _gqa_rotary(ctx: ScanContext, a: AttentionMatch) -> tuple | None:
    s = ctx.structure
    if a.cache is not None or not a.q_bnsh or not (a.kv_groups > 1 or _repeats(ctx, a.k)):
        return None
    g = match_gqa(ctx, a)
    if g.key_3d:
        return None
    rq, rk = match_rotary(s, a.q, a.head_size), match_rotary(s, g.key, a.head_size)
    if rq is None or rk is None:
        return None  # no rotate_half rotary on both: attention_gqa's block as it is
    if a.head_size % 16:  # onnxruntime's kernel: "head_size shall be a multiple of 16" with do_rotary
        raise Miss(f"head size {a.head_size} is not a multiple of 16: onnxruntime's rotary refuses it")
    if (rq.cos, rq.sin) != (rk.cos, rk.sin):
        raise Miss("query and key are rotated by different cos/sin")
    cos, sin, _ = ctx.memo(("rotary_caches", rq.cos, rq.sin),
                           lambda c: _caches_or_miss(c.structure, rq.cos, rq.sin, a.head_size))
    if cos is None:
        raise Miss(str(sin))
    if g.repeat_shapes:  # their [B, H, P + S, D] is computed from the rotated key, which the fold removes
        raise Miss("the repeated key's shape is read outside the block")
    nodes, shape_ids = list(g.nodes), set(rq.shape_ids | rk.shape_ids)
    for n in rq.nodes + rk.nodes:
        if all(n is not m for m in nodes):
            nodes.append(n)
    query, q3 = _heads_in(s, rq, nodes, shape_ids)
    key, k3 = _heads_in(s, rk, nodes, shape_ids)
    matched = s.absorb(nodes, shape_ids)
    outputs = [a.output, *(g.present or ()), *g.repeat_shapes]
    s.check_contained(nodes, matched, set(outputs))
    g.nodes, g.rotary = nodes, RotaryFold(query, q3, key, k3, cos, sin)
    return g, nodes, outputs


def _pack(ctx: ScanContext, g: GqaMatch, q: str, k: str, v: str, shape_ids: set[int],
          outputs: list[str]) -> tuple:
    """The block widened to its three projections, joined into one (GqaMatch.packed), or Miss: query, key
    and value [B, S, N*D] each x @ W (+ b) of one x, float weights of one type."""
    s, a = ctx.structure, g.mha
    parts = [linear_projection(ctx, t) for t in (q, k, v)]
    if any(p is None for p in parts):
        raise Miss("query, key and value are not constant projections x @ W (+ b)")
    found = [p for p in parts if p is not None]
    if len({p[0] for p in found}) != 1:
        raise Miss("query, key and value are projections of different tensors")
    widths = [a.num_heads * a.head_size] + [g.kv_heads * a.head_size] * 2
    if [p[2][1] for p in found] != widths or len({p[2][0] for p in found}) != 1:
        raise Miss(f"projection widths {[list(p[2]) for p in found]} are not {widths} over one input width")
    kinds = {_dtype(s, p[1]) for p in found}
    if len(kinds) != 1:
        raise Miss("query, key and value weights are of different float types")
    kind = kinds.pop()
    bias = None
    if any(p[3] is not None for p in found):
        bias = np.concatenate([p[3] if p[3] is not None else np.zeros(w, kind) for p, w in zip(found, widths,
                                                                                              strict=True)])
    nodes = list(g.nodes)
    for p in found:
        nodes += [n for n in p[4] if all(n is not m for m in nodes)]
    matched = s.absorb(nodes, shape_ids)
    s.check_contained(nodes, matched, set(outputs))
    g.nodes = nodes
    g.packed = PackedQkv(found[0][0], (found[0][1], found[1][1], found[2][1]), bias, s.ix)
    return g, nodes, outputs


def _dtype(s: Structure, weight: str) -> np.dtype:
    """A projection weight's numpy dtype (linear_projection has read its declaration)."""
    meta = weight_meta(s.ix, weight)
    assert meta is not None
    return np.dtype(meta[1])


def _gqa_qkv(ctx: ScanContext, a: AttentionMatch) -> tuple | None:
    """attention_gqa's block with the three projections packed (no rotary between them and the op)."""
    built = _gqa(ctx, a)
    if built is None:
        return None
    g, nodes, outputs = built
    if not (g.key_3d and g.value_3d):
        return None  # key heads rotated outside the op: the rotary rules' block, or no packed form
    query, shape_ids = a.q, set()
    if a.q_bnsh:
        split = ctx.structure.split3d(a.q)
        if split is None:
            raise Miss("query is not a head split of a [batch, seq, heads*head] projection")
        g.nodes = nodes + [n for n in split[1] if all(n is not m for m in nodes)]
        query, shape_ids = split[0], set(split[4])
    return _pack(ctx, g, query, g.key, g.value, shape_ids, outputs)


def _gqa_rotary_qkv(ctx: ScanContext, a: AttentionMatch) -> tuple | None:
    """The rotary block with its three projections packed into one MatMul (GroupQueryAttention's packed
    query, key and value omitted, rotated inside the op)."""
    built = _gqa_rotary(ctx, a)
    if built is None:
        return None
    g, _nodes, outputs = built
    r = g.rotary
    assert r is not None
    if not (r.query_3d and r.key_3d and g.value_3d):
        raise Miss("query, key and value are not all [batch, seq, heads*head] projections")
    return _pack(ctx, g, r.query, r.key, g.value, set(), outputs)


def _caches_or_miss(s: Structure, cos: str, sin: str, head: int) -> tuple:
    try:
        return rotary_caches(s, cos, sin, head)
    except Miss as exc:  # memoised for every layer reading the same cos/sin
        return None, str(exc), None


Build = Callable[[ScanContext, AttentionMatch], tuple | None]


def _gqa_rule(index: int, name: str, description: str, build: Build, priority: int) -> Rule:
    """One GroupQueryAttention rule over the grouped attention blocks; build(ctx, block) as in widen()."""
    return Rule(
        name=name,
        description=description,
        fused_op="GroupQueryAttention",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        find=lambda ctx: widen(ctx, RULES[index], build, grouped_blocks(ctx)),
        replace=lambda m: gqa_replacement(m.payload),
        requires=("attention_mha",),
        priority=priority,
    )


RULES = [
    _gqa_rule(0, "attention_gqa",
              "attention with repeat_kv shared key/value heads (+ KV cache) -> GroupQueryAttention",
              _gqa, 105),
    _gqa_rule(1, "attention_gqa_rotary",
              "rotary on Q, K + grouped-query attention -> GroupQueryAttention(do_rotary=1)",
              _gqa_rotary, 107),
    # the packed forms first: one MatMul instead of three, and the op's packed input (docs/decoders.md)
    _gqa_rule(2, "attention_gqa_rotary_qkv",
              "attention_gqa_rotary with Q, K, V projections packed into one MatMul (as genai does)",
              _gqa_rotary_qkv, 108),
    _gqa_rule(3, "attention_gqa_qkv",
              "attention_gqa with Q, K, V projections (+ bias) packed into one MatMul, packed input",
              _gqa_qkv, 106),
]
