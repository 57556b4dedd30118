"""Stage 2 of attention: the heads around an SDPA core -> com.microsoft MultiHeadAttention.

Around each core (``attention_core``) the layout is read:

    q3 -> Reshape[B,S,H,D] -> Transpose(0,2,1,3) -> core(q, K, v) -> Transpose(0,2,1,3) -> Reshape[B,S,H*D]
    k3, v3 the same (K also as Transpose(0,2,3,1) of its [B,S,H,D] split)

and becomes ``MultiHeadAttention(q3, k3, v3, attention_bias=mask, num_heads=H, scale=c)``. The model's own
additive mask tensor is passed unchanged as ``attention_bias``, so causal + padding semantics (right or left
padding) are the original arithmetic. Head count and head size come from the reshape constants and must
agree with the hidden size derived from the weights/splits; the Shape/Gather/Concat subgraphs that only
compute the head reshapes are absorbed into the match. With a KV cache (``K = Concat(past_k, new_k, axis=2)``
per head, the Concat's output being the present key) the Concats join the match and the fused node takes
``past_key``/``past_value`` and writes ``present_key``/``present_value``. Where Q/K/V are only seen as
[B,H,S,D] tensors (Llama: rotary embedding after the head split, repeat_kv for grouped KV) key and value go
in as BNSH tensors and the query is transposed/reshaped back to [B,S,hidden] in front of the fused node; H
and D then come from the inferred shapes and must agree with the Q head split found behind the rotary ops.
A head-split Reshape whose output is also read elsewhere (T5 reads the key's shape for its position bias)
stays in the graph. Anything else is a near miss with a reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import onnx

from fuseview.fusion import dtypes
from fuseview.fusion.dtypes import is_float, type_name
from fuseview.fusion.rule import MS_DOMAIN, Match, NearMiss, Replacement, Rule
from fuseview.fusion.rules.attention_core import FLOAT, SdpaCore, attention_cores
from fuseview.fusion.toolkit import Miss, ScanContext, Structure, single_reader


@dataclass
class AttentionMatch:
    """An exact attention block: the nodes it replaces and what MultiHeadAttention needs."""

    softmax: onnx.NodeProto
    nodes: list[onnx.NodeProto]
    q: str
    k: str
    v: str
    bias: str | None
    num_heads: int
    head_size: int
    scale: float
    output: str  # tensor the fused block produces ([B,S,H*D])
    # (shape tensor, final output) when the merge-heads reshape is re-emitted after the fused node
    reshape_out: tuple[str, str] | None = None
    q_bnsh: bool = False  # q is [B,H,S,D]: the replacement transposes it to [B,S,hidden] first
    # (boolean condition, fill, fill where true): bias = Where(cond, 0, fill) or Where(cond, fill, 0)
    where_mask: tuple[str, float, bool] | None = None
    notes: list[str] = field(default_factory=list)
    # KV cache: (past key, past value, present key, present value), all [B,H,*,D]
    cache: tuple[str, str, str, str] | None = None
    # the core zeroes fully masked rows (NaN guard) and the mask may hold -inf: the fused op gets the mask
    # clamped to float32's lowest and its output is zeroed on the rows the mask hides entirely
    guard: bool = False
    opset: int = 17
    bias_terms: tuple[str, str] | None = None  # bias is their sum, made in front of the fused op
    # query heads per key/value head of a core over unrepeated K/V (packed query): GroupQueryAttention's
    kv_groups: int = 1
    dtype: int = FLOAT  # the onnx float type of Q, K, V (masks and constants made for the op take it too)


def _past_concat(s: Structure, t: str) -> tuple[onnx.NodeProto, str, tuple] | None:
    """(Concat, past, split3d of the new part) when t = Concat(past, Transpose(Reshape(x3)), axis=2)."""
    cat = s.prod(t, "Concat")
    if cat is None or len(cat.input) != 2 or int(s.ix.attr(cat, "axis", 0)) not in (2, -2):
        return None
    if s.d.rank(cat.input[0]) != 4:
        return None
    new = s.split3d(cat.input[1])
    return None if new is None else (cat, cat.input[0], new)


def _cache(s: Structure, c: SdpaCore, core: list, shape_nodes: set) -> tuple | None:
    """The KV-cache form: K and V each the Concat of a past tensor and a head split of the new tokens."""
    if c.k_bnsh is None:
        return None
    pk, pv = _past_concat(s, c.k_bnsh), _past_concat(s, c.v)
    if pk is None or pv is None:
        return None
    (cat_k, past_k, k_split), (cat_v, past_v, v_split) = pk, pv
    core.extend([cat_k, cat_v])
    return k_split, v_split, (past_k, past_v, cat_k.output[0], cat_v.output[0])


def _bias_reads_cache(s: Structure, c: SdpaCore) -> bool:
    """Whether the mask is computed from the concatenated key or value (GPT-2 slices its causal mask to the
    key's length): the fused op cannot write a present tensor its own input reads, so the Concats stay
    and the op takes the concatenated key and value."""
    cats = {x for x in (c.k_bnsh, c.v) if x and s.prod(x, "Concat") is not None}
    if not cats:
        return False  # no cache Concat to reach: the walk back from the mask (up to 400 tensors) is moot
    seen: set[str] = set()
    todo = [t for t in (c.bias, *(c.bias_terms or ())) if t]
    while todo and len(seen) < 400:
        t = todo.pop()
        if t in cats:
            return True
        if t in seen:
            continue
        seen.add(t)
        n = s.d.producer(t)
        if n is not None:
            todo.extend(i for i in s.ix.inputs(n) if i)
    return False


def _keep_shared_splits(ix, core: list, inputs: set[str]) -> None:
    """Leave in the graph the head-split Reshapes of the fused op's inputs that others read too."""
    ids = {id(n) for n in core}
    for n in list(core):
        if n.op_type == "Reshape" and n.input[0] in inputs and n.output[0] not in ix.graph_outputs:
            if any(id(u) not in ids for u in ix.consumers.get(n.output[0], ())):
                core.remove(n)


def _merge_heads(s: Structure, tr_o: onnx.NodeProto, q_ref: str, hidden: int, core: list,
                 shape_nodes: set) -> tuple[str, tuple[str, str] | None]:
    """The Reshape merging the heads back to [B,S,hidden]; (its output, reshape kept after the op)."""
    ix, d = s.ix, s.d
    out_t = tr_o.output[0]
    users = ix.consumers.get(out_t, ())
    merges = [u for u in users if u.op_type == "Reshape" and u.input[0] == out_t]
    if len(merges) != 1 or out_t in ix.graph_outputs:
        raise Miss(f"{tr_o.name}: heads are not merged by one Reshape to [batch, seq, hidden]")
    merge = merges[0]
    vec = d.vec(merge.input[1], probe_nodes := set[int]())
    allow0 = not ix.attr(merge, "allowzero", 0)
    # one -1 among batch and sequence is the other's complement when the last is the hidden size (T5 eager)
    free = vec is not None and len(vec) == 3 and vec[2] == hidden and [vec[0], vec[1]].count(-1) == 1
    ok3 = vec is not None and len(vec) == 3 and all(
        (vec[j] == 0 and allow0) or (vec[j] == -1 and free) or d.same(vec[j], ("dim", out_t, j))
        or d.same(vec[j], ("dim", q_ref, j)) for j in (0, 1)) and (vec[2] == -1 or vec[2] == hidden)
    core.append(merge)
    if ok3:
        shape_nodes |= probe_nodes
        return merge.output[0], None
    if vec is not None and all(isinstance(e, int) for e in vec) and 0 not in vec[2:] and len(users) == 1:
        return merge.output[0], (merge.input[1], merge.output[0])  # e.g. [-1, hidden] before a 2-D Gemm
    raise Miss(f"{merge.name}: merge-heads reshape target not understood")


def match_heads(s: Structure, c: SdpaCore) -> AttentionMatch:
    """The MultiHeadAttention block around a core, or Miss with the reason."""
    ix, d, sm = s.ix, s.d, c.softmax
    core = list(c.nodes)
    shape_nodes = set(c.shape_nodes)
    tr_o = single_reader(ix, c.output)
    if tr_o is None or tr_o.op_type != "Transpose" or s.perm(tr_o) != [0, 2, 1, 3]:
        raise Miss(f"{c.pv.name}: output is not transposed back to [batch, seq, heads, head]")
    core.append(tr_o)
    q_split = s.split3d(c.q)
    if q_split is not None:
        q3, q_nodes, dq, hq, q_shape_nodes = q_split
        core.extend(q_nodes)
        shape_nodes |= q_shape_nodes
    else:
        q3 = None
        hq, dq = s.bnsh_heads(c.q, "Q")
    cache = _cache(s, c, core, shape_nodes) if q3 is not None and not _bias_reads_cache(s, c) else None
    k_split, v_split = (cache[0], cache[1]) if cache else (c.k_split, s.split3d(c.v))
    if k_split is not None and v_split is not None:
        k3, k_nodes, dk, hk, k_sn = k_split
        v3, v_nodes, dv, hv, v_sn = v_split
        core.extend(k_nodes + v_nodes)
        shape_nodes |= k_sn | v_sn
        if not (dq == dk == dv and hq == hk == hv):
            raise Miss(f"{sm.name}: Q/K/V head shapes differ ({hq}x{dq}, {hk}x{dk}, {hv}x{dv})")
        if q3 is not None and not d.same(("dim", q3, 0), ("dim", k3, 0)):
            raise Miss(f"{sm.name}: Q and K batch dims not provably equal")
        if not (d.same(("dim", k3, 0), ("dim", v3, 0)) and d.same(("dim", k3, 1), ("dim", v3, 1))):
            raise Miss(f"{sm.name}: K and V batch/sequence dims not provably equal")
    else:
        if c.k_bnsh is None:
            raise Miss(f"{c.k_transpose.name}: K^T (0,2,3,1) with V not from a head split")
        k3, v3 = c.k_bnsh, c.v  # BNSH key/value, e.g. after rotary or repeat_kv
        for x, what in ((k3, "K"), (v3, "V")):
            h, dd = s.bnsh_heads(x, what)
            if (h * c.groups, dd) != (hq, dq):
                raise Miss(f"{sm.name}: {what} has {h}x{dd} heads, Q has {hq}x{dq} (grouped KV?)")
    kinds = {ix.const_dtype(x) for x in (q3 or c.q, k3, v3)} - {None}
    if any(not is_float(k) for k in kinds) or len(kinds) > 1:
        raise Miss(f"{sm.name}: Q, K, V are {', '.join(sorted(map(type_name, kinds)))}; the fused op takes "
                   "one float type (float32 or float16)")
    if q3 is None:
        ref = s.find_split_back(c.q)
        if ref is None:
            raise Miss(f"{sm.name}: Q is 4-D and its head split cannot be traced back")
        q_ref, _n, d_ref, h_ref, _sn = ref
        # a split of [B,S,H,k*D] per head, Q/K/V sliced from its last axis, is one too (GPT-NeoX)
        if h_ref != hq or d_ref % dq or (d_ref != dq and not _sliced_per_head(s, c.q)):
            raise Miss(f"{sm.name}: Q head split {h_ref}x{d_ref} differs from Q {hq}x{dq}")
    else:
        q_ref = q3
    out_t, reshape_out = _merge_heads(s, tr_o, q_ref, hq * dq, core, shape_nodes)
    guard = _needs_row_guard(s, c)
    _keep_shared_splits(ix, core, {x for x in (q3, k3, v3) if x})
    matched = s.absorb(core, shape_nodes)
    present = set(cache[2][2:]) if cache else set()
    s.check_contained(core, matched, {out_t} | present)
    return AttentionMatch(sm, core, q3 or c.q, k3, v3, c.bias, hq, dq, c.scale, out_t, reshape_out,
                          q_bnsh=q3 is None, where_mask=c.where_mask, cache=cache[2] if cache else None,
                          guard=guard, opset=int(ix.opsets.get("", 17)), bias_terms=c.bias_terms,
                          kv_groups=c.groups, dtype=next(iter(kinds), FLOAT))


def _sliced_per_head(s: Structure, q: str) -> bool:
    """Whether Q's path back to its head split passes a Slice or Split of the last axis (q = qkv[..., :D])."""
    for x in s.behind(q):
        n = s.d.producer(x)
        if n is None or n.op_type not in ("Slice", "Split") or s.d.rank(n.input[0]) != 4:
            continue
        if s.split3d(n.input[0]) is None:
            continue
        axes: list[int] | None
        if n.op_type == "Split":
            axes = [int(s.ix.attr(n, "axis", 0)) % 4]
        else:
            c = s.d.const(n.input[3]) if len(n.input) > 3 and n.input[3] else None
            axes = None if c is None else [int(a) % 4 for a in np.ravel(c)]
        if axes == [3]:
            return True
    return False


def _needs_row_guard(s: Structure, c: SdpaCore) -> bool:
    """Whether the replacement must reproduce the NaN guard: an additive mask may hide a whole row with
    -inf, where the fused kernels would write NaN (which then spreads through every later layer)."""
    if not c.guarded or (c.bias is None and c.where_mask is None):
        return False
    if c.where_mask is not None:
        if not np.isfinite(c.where_mask[1]):
            raise Miss(f"{c.softmax.name}: NaN guard over a mask filled with -inf")
        return False  # a finite fill never hides a row with -inf
    for t in c.bias_terms or (c.bias,):
        shape = s.ix.shape(t)
        if s.d.canon(("dim", t, 1)) != 1 and not (shape is not None and len(shape) == 4 and shape[1] == 1):
            raise Miss(f"{c.softmax.name}: NaN guard over a per-head mask (rows cannot be zeroed after it)")
    return True


def find_attention(ctx: ScanContext) -> tuple[list[AttentionMatch], list[tuple[list[str], str]]]:
    """Exact attention blocks and near misses (matched node names, reason) of a scan; found once per scan."""
    return ctx.memo(find_attention, _find_attention)


def grouped_blocks(ctx: ScanContext) -> list[AttentionMatch]:
    """The blocks whose key/value keep fewer heads than the query (a packed query): GroupQueryAttention's
    to fuse, never MultiHeadAttention's."""
    return [a for a in find_attention(ctx)[0] if a.kv_groups > 1]


def _find_attention(ctx: ScanContext) -> tuple[list[AttentionMatch], list[tuple[list[str], str]]]:
    cores, misses = attention_cores(ctx)
    found: list[AttentionMatch] = []
    misses = list(misses)
    for name, c in cores.items():
        try:
            found.append(match_heads(ctx.structure, c))
        except Miss as exc:
            misses.append(([name], str(exc)))
    return found, misses


def near_misses(ctx: ScanContext) -> list[tuple[list[str], str]]:
    """Why each Softmax that is not fused was left alone."""
    return find_attention(ctx)[1]


def _row_guard(a: AttentionMatch) -> tuple[list[Replacement], str]:
    """The mask clamped to its type's lowest, and [B|1, S, 1] = 1 where a row keeps some key, else 0."""
    b, base = a.bias, a.output + "_guard"
    if b is None:
        raise Miss(f"{a.output}: a row guard needs the block's mask")
    lowest, axes, shape = base + "_lowest", base + "_axes", base + "_rows_shape"
    reduce = Replacement(inputs=[b], attrs={"keepdims": 1}, op="ReduceMax", domain="",
                         outputs=[base + "_max"])
    if a.opset >= 18:
        reduce.inputs.append(axes)
        reduce.initializers[axes] = np.array([-1], np.int64)
    else:
        reduce.attrs["axes"] = [-1]
    # IsInf takes float16 only from opset 20: a float16 row maximum is looked at in float32
    widen16 = [] if a.dtype == dtypes.FLOAT else [
        Replacement(inputs=[base + "_max"], attrs={"to": dtypes.FLOAT}, op="Cast", domain="",
                    outputs=[base + "_max_f"])]
    return [
        Replacement(inputs=[b, lowest], op="Max", domain="", outputs=[base + "_bias"],
                    initializers={lowest: np.array(dtypes.lowest(a.dtype), dtypes.np_dtype(a.dtype))}),
        reduce,
        *widen16,
        Replacement(inputs=[base + ("_max_f" if widen16 else "_max")], attrs={"detect_positive": 0},
                    op="IsInf", domain="", outputs=[base + "_hidden"]),
        Replacement(inputs=[base + "_hidden"], op="Not", domain="", outputs=[base + "_kept"]),
        Replacement(inputs=[base + "_kept"], attrs={"to": a.dtype}, op="Cast", domain="",
                    outputs=[base + "_kept_f"]),
        Replacement(inputs=[base + "_kept_f", shape], op="Reshape", domain="", outputs=[base + "_rows"],
                    initializers={shape: np.array([0, -1, 1], np.int64)}),
    ], base + "_bias"


def guard_output(a: AttentionMatch, reps: list[Replacement]) -> list[Replacement]:
    """With a row guard: the fused op's output renamed, then zeroed on the rows the mask hides."""
    if not a.guard:
        return reps
    # [B, S, hidden]: the block's output, or what the kept 2-D merge Reshape (the last node) reads
    main = a.output if a.reshape_out is None else reps[-1].inputs[0]
    raw = main + "_unguarded"
    for r in reps:
        if r.outputs and main in r.outputs:
            r.outputs = [raw if o == main else o for o in r.outputs]
    mul = Replacement(inputs=[raw, a.output + "_guard_rows"], op="Mul", domain="", outputs=[main])
    return reps + [mul] if a.reshape_out is None else reps[:-1] + [mul, reps[-1]]


def mask_bias(a: AttentionMatch) -> tuple[list[Replacement], str | None]:
    """The additive mask the fused op takes, and the nodes computing it (from a boolean one, or the sum of
    two terms) if needed."""
    total = [] if a.bias_terms is None else [
        Replacement(inputs=list(a.bias_terms), op="Add", domain="", outputs=[a.bias or ""])]
    if a.guard:
        guard, out = _row_guard(a)
        return total + guard, out
    if a.where_mask is None:
        return total, a.bias
    cond, fill, fill_if = a.where_mask
    kind = dtypes.np_dtype(a.dtype)  # the fill as the model holds it (a float16 model's is float16 already)
    zero, fill_t, out = a.output + "_mask_zero", a.output + "_mask_fill", a.output + "_mask_bias"
    inputs = [cond, fill_t, zero] if fill_if else [cond, zero, fill_t]
    node = Replacement(inputs=inputs, op="Where", domain="", outputs=[out],
                       initializers={zero: np.array(0.0, kind), fill_t: np.array(fill, kind)})
    return [node], out


def fused_outputs(a: AttentionMatch, main: str) -> list[str]:
    """The fused node's outputs: the attention output, then the present key/value with a KV cache."""
    return [main, a.cache[2], a.cache[3]] if a.cache else [main]


def replacement_nodes(a: AttentionMatch) -> list[Replacement]:
    """MultiHeadAttention (+ the kept merge-heads Reshape) for one exact match."""
    pre, bias = mask_bias(a)
    q = a.q
    if a.q_bnsh:
        q = a.output + "_query"
        shape = a.output + "_query_shape"
        pre += [Replacement(inputs=[a.q], attrs={"perm": [0, 2, 1, 3]}, op="Transpose", domain="",
                            outputs=[q + "_bsnh"]),
                Replacement(inputs=[q + "_bsnh", shape], op="Reshape", domain="", outputs=[q],
                            initializers={shape: np.array([0, 0, -1], np.int64)})]
    inputs = [q, a.k, a.v] + (["", "", bias or ""] if bias or a.cache else [])
    if a.cache:
        inputs += [a.cache[0], a.cache[1]]
    attrs = {"num_heads": a.num_heads, "scale": float(np.float32(a.scale))}
    if a.reshape_out is None:
        return guard_output(a, pre + [Replacement(inputs=inputs, attrs=attrs, op="MultiHeadAttention",
                                                  domain=MS_DOMAIN, outputs=fused_outputs(a, a.output))])
    mid = a.output + "_mha"
    return pre + [
        Replacement(inputs=inputs, attrs=attrs, op="MultiHeadAttention", domain=MS_DOMAIN,
                    outputs=fused_outputs(a, mid)),
        Replacement(inputs=[mid, a.reshape_out[0]], op="Reshape", domain="", outputs=[a.output])]


def widen(ctx: ScanContext, rule: Rule, build: Callable[[ScanContext, AttentionMatch], tuple | None],
          extra: list[AttentionMatch] | None = None) -> Iterator[Match | NearMiss]:
    """The matches of a rule built over each attention_mha block (and the extra ones): build(ctx, block)
    returns (payload, nodes, outputs), None when the block is not of its kind at all (no near miss),
    or raises Miss (then a near miss at the block's Softmax)."""
    for a in [*ctx.result("attention_mha"), *(extra or ())]:
        name = ctx.index.name(a.softmax)
        try:
            built = build(ctx, a)
        except Miss as exc:
            yield NearMiss(rule.name, (name,), str(exc))
            continue
        if built is None:
            continue
        payload, nodes, outputs = built
        yield Match.custom(rule, ctx.index, nodes, outputs, bindings={"softmax_node": name}, payload=payload)


def _find_matches(ctx: ScanContext) -> Iterator[Match | NearMiss]:
    found, misses = find_attention(ctx)
    for a in found:
        if a.kv_groups > 1:
            continue  # grouped key/value heads: attention_gqa's
        yield Match.custom(RULES[0], ctx.index, a.nodes, fused_outputs(a, a.output),
                           bindings={"softmax_node": ctx.index.name(a.softmax)}, payload=a)
    for nodes, reason in misses:
        yield NearMiss(RULES[0].name, tuple(nodes), reason)


RULES = [
    Rule(
        name="attention_mha",
        description="Q.K^T scale, additive mask, Softmax, .V with head reshapes -> MultiHeadAttention",
        fused_op="MultiHeadAttention",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        find=_find_matches,
        replace=lambda m: replacement_nodes(m.payload),
        priority=100,
    ),
]
