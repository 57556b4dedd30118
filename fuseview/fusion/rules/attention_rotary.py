"""Stage 4 of attention: the rotary embedding in front of a GroupQueryAttention block, folded into it.

Over a ``match_gqa`` block whose query and new key heads are Hugging Face's rotate_half rotary

    x [B, N, S, D] -> Add(Mul(x, Unsqueeze(cos, 1)),
                          Mul(Concat(Neg(x[..., D/2:]), x[..., :D/2]), Unsqueeze(sin, 1)))

the GroupQueryAttention takes the heads before the rotary and rotates them itself (``do_rotary=1``,
``rotary_interleaved=0``) with ``cos_cache`` / ``sin_cache`` initializers ``[ROTARY_CACHE_LEN, D/2]``.
onnxruntime's kernel reads row ``past + i`` of the caches for the i-th new token (the past length is what
``seqlens_k`` says: total - 1, for every row) and ignores a ``position_ids`` input on the first prompt. So
the rotary folds only where the model's own positions are ``past + arange(new)`` whatever the inputs hold:

* the cos/sin computation may read the graph inputs only through ``Shape`` (positions computed from the
  cache length, as transformers' ``cache_position``): a ``position_ids`` input, or an attention mask read
  for its values (left padding), is a near miss;
* the computation is evaluated (onnxruntime, on the cone of nodes behind cos/sin) at past 0 and
  ``ROTARY_CACHE_LEN`` new tokens, which gives the caches, and at (past, new) = (0, 1), (1, 16), (64, 1),
  (64, 16), (5, 3), each of which must be rows ``past ... past + new - 1`` of them: positions
  ``past + arange(new)`` on those shapes;
* both halves of cos/sin are equal (rotate_half duplicates the frequencies) and cos^2 + sin^2 = 1 (no
  attention scaling, which the kernel cannot apply).

A total length beyond ``ROTARY_CACHE_LEN`` makes onnxruntime refuse the run ("cos_cache dimension 0 shall
not be less than total_sequence_length"), never a wrong answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper

from fuseview.dims import cache_dims, declared_dim, dim_key, dim_keys, dim_kind, resolve_dims
from fuseview.fusion.toolkit import Miss, Structure
from fuseview.fusion.toolkit.structural import computed_scalar

ROTARY_CACHE_LEN = 4096  # rows of cos_cache / sin_cache: the longest past + new the fused model runs
_PROBES = ((0, 1), (1, 16), (64, 1), (64, 16), (5, 3))


@dataclass
class Rotary:
    """One rotated [B, N, S, D] tensor: its input before the rotary, the cos/sin it reads, its nodes."""

    x: str
    cos: str
    sin: str
    nodes: list[onnx.NodeProto]
    shape_ids: set[int]


def _commuted(s: Structure, t: str, op: str) -> tuple[onnx.NodeProto, str, str] | None:
    n = s.prod(t, op)
    return None if n is None or len(n.input) != 2 else (n, n.input[0], n.input[1])


def _slice_bounds(s: Structure, n: onnx.NodeProto, nodes: list) -> tuple[int, int, int] | None:
    """(start, end, axis) of a one-axis Slice with step 1 whose bounds are constants or fixed dims."""
    if len(n.input) < 3:
        return None
    vals: list[int | None] = []
    for i in (1, 2, 3, 4):
        if i >= len(n.input) or not n.input[i]:
            vals.append(None)
            continue
        v = computed_scalar(s.d, n.input[i], nodes)
        if v is None:
            return None
        vals.append(int(v))
    start, end, axis, step = vals
    if (step or 1) != 1 or start is None or end is None:
        return None
    rank = s.d.rank(n.input[0])
    axis = -1 if axis is None else axis
    if rank is not None and axis >= 0:
        axis -= rank
    return start, end, axis


def _unsqueezed(s: Structure, t: str) -> str | None:
    """c when t = Unsqueeze(c, [1]) (cos/sin [B, S, D] broadcast over the heads). The Unsqueeze stays out of
    the match: exporters share it between layers; once every reader is fused it is dead and goes."""
    u = s.prod(t, "Unsqueeze")
    if u is None:
        return None
    axes = s.ix.attr(u, "axes")
    if axes is None and len(u.input) > 1:
        v = s.d.const(u.input[1])
        axes = None if v is None else np.ravel(v).tolist()
    if axes is None or [int(a) for a in axes] != [1]:
        return None
    return u.input[0]


def _rotate_half(s: Structure, t: str, head: int, nodes: list, shape_nodes: list) -> str | None:
    """x when t = Concat(Neg(x[..., D/2:]), x[..., :D/2], axis=-1)."""
    cat = s.prod(t, "Concat")
    if cat is None or len(cat.input) != 2 or int(s.ix.attr(cat, "axis", 0)) not in (-1, 3):
        return None
    neg = s.prod(cat.input[0], "Neg")
    hi = s.prod(neg.input[0], "Slice") if neg is not None else None
    lo = s.prod(cat.input[1], "Slice")
    if hi is None or lo is None or hi.input[0] != lo.input[0]:
        return None
    half = head // 2
    bh, bl = _slice_bounds(s, hi, shape_nodes), _slice_bounds(s, lo, shape_nodes)
    if bh is None or bl is None or bh[2] != -1 or bl[2] != -1:
        return None
    if bh[0] != half or bh[1] < head or bl[0] != 0 or bl[1] != half:
        return None
    nodes.extend([cat, neg, hi, lo])
    return lo.input[0]


def match_rotary(s: Structure, t: str, head: int) -> Rotary | None:
    """The rotate_half rotary producing the [B, N, S, D] tensor t, or None when t is not one."""
    add = _commuted(s, t, "Add")
    if add is None or head % 2:
        return None
    for m1, m2 in ((add[1], add[2]), (add[2], add[1])):
        a, b = _commuted(s, m1, "Mul"), _commuted(s, m2, "Mul")
        if a is None or b is None:
            continue
        for x, c in ((a[1], a[2]), (a[2], a[1])):
            for rh, sn in ((b[1], b[2]), (b[2], b[1])):
                nodes: list = [add[0], a[0], b[0]]
                shape_nodes: list = []
                if _rotate_half(s, rh, head, nodes, shape_nodes) != x:
                    continue
                cos, sin = _unsqueezed(s, c), _unsqueezed(s, sn)
                if cos is None or sin is None:
                    continue
                return Rotary(x, cos, sin, nodes, {id(n) for n in shape_nodes})
    return None


def _cone(s: Structure, outputs: list[str], values: bool = False) -> tuple[list[onnx.NodeProto], set[str]]:
    """The nodes computing outputs from graph inputs and constants (graph order), and the graph inputs read;
    with values, only what reaches them through data (not through Shape)."""
    seen: set[int] = set()
    inputs: set[str] = set()
    stack = list(outputs)
    while stack:
        t = stack.pop()
        n = s.d.producer(t)
        if n is None:
            if t in s.ix.graph_inputs and not s.ix.is_const(t):
                inputs.add(t)
            continue
        if id(n) in seen:
            continue
        seen.add(id(n))
        if not (values and n.op_type == "Shape"):
            stack.extend(i for i in s.ix.inputs(n) if i)
    # graph order: the cone's own nodes sorted by position (not a pass over every node of the graph)
    return sorted((s.by_id[i] for i in seen), key=s.ix.position), inputs


def probe_feeds(model: onnx.ModelProto, inputs: set[str], past: int, new: int) -> dict[str, np.ndarray]:
    """Zeros for the inputs at `past` cached and `new` tokens (the model's own dims)."""
    cache = cache_dims(model)
    if cache is None:  # no cache: every dim but the batch is the tokens'
        dims = {k: new for k in dim_keys(model) if dim_kind(k) != "batch"}
    elif cache.new is None:
        raise Miss("rotary: the model's new-token dim is not known")
    else:
        dims = resolve_dims(model, {**{k: past for k in cache.past}, cache.new: new})
    feeds = {}
    for vi in model.graph.input:
        if vi.name not in inputs:
            continue
        tt = vi.type.tensor_type
        shape = []
        for j, d in enumerate(tt.shape.dim):
            dd = declared_dim(d)
            shape.append(dd if isinstance(dd, int) else dims.get(dim_key(vi.name, j, dd), 1))
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        feeds[vi.name] = np.zeros(shape, dtype)
    return feeds


def cone_session(s: Structure, outputs: list[str], what: str) -> tuple[Any, set[str], set[str], dict]:
    """(onnxruntime session, graph inputs read, inputs read for their values, zero feeds of weights only
    measured by Shape) over the nodes computing outputs: evaluated at probe shapes (probe_feeds)."""
    import onnxruntime as ort  # the fusion layer evaluates constant subgraphs with the runtime it targets

    nodes, inputs = _cone(s, outputs)
    value_nodes, read = _cone(s, outputs, values=True)
    g = s.ix.graph
    by_value = {i for n in value_nodes for i in n.input}
    inits, shaped = [], {}  # weights only measured by Shape (the embedding table) go in as zeros
    for t in sorted({i for n in nodes for i in n.input} & set(s.ix.initializers)):
        if t in by_value:
            v = s.ix.const_value(t)
            if v is None:
                raise Miss(f"{what}: constant {t} could not be read")
            inits.append(onnx.numpy_helper.from_array(v, t))
        else:
            proto = s.ix.initializers[t]
            shaped[t] = np.zeros(list(proto.dims), onnx.helper.tensor_dtype_to_np_dtype(proto.data_type))
    kinds = [s.ix.const_dtype(x) or s.ix.elem_type(x) or onnx.TensorProto.FLOAT for x in outputs]
    outs = [onnx.helper.make_tensor_value_info(x, k, None) for x, k in zip(outputs, kinds, strict=True)]
    ins = [vi for vi in g.input if vi.name in inputs] + [
        onnx.helper.make_tensor_value_info(t, s.ix.initializers[t].data_type, list(z.shape))
        for t, z in shaped.items()]
    sub = onnx.helper.make_model(onnx.helper.make_graph(nodes, what, ins, outs, inits),
                                 opset_imports=list(s.ix.model.opset_import))
    sub.ir_version = s.ix.model.ir_version
    try:
        sess = ort.InferenceSession(sub.SerializeToString(), providers=["CPUExecutionProvider"])
    except (ort.capi.onnxruntime_pybind11_state.Fail, ort.capi.onnxruntime_pybind11_state.InvalidArgument,
            ort.capi.onnxruntime_pybind11_state.RuntimeException, ValueError) as exc:
        raise Miss(f"{what} could not be evaluated: {str(exc)[:120]}") from None
    return sess, inputs, read, shaped


def rotary_caches(s: Structure, cos: str, sin: str, head: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(cos_cache, sin_cache [ROTARY_CACHE_LEN, D/2], cone node names) for the model's cos/sin, or Miss."""
    import onnxruntime as ort

    nodes, _inputs = _cone(s, [cos, sin])
    _nodes, read = _cone(s, [cos, sin], values=True)
    for t in sorted(read):
        raise Miss(f"rotary positions read the values of {t}: GroupQueryAttention's rotary takes them as "
                   "past + arange(new) (onnxruntime ignores position_ids on the first prompt), so a "
                   "left-padded batch would differ")
    model = s.ix.model
    sess, inputs, _read, shaped = cone_session(s, [cos, sin], "rotary cos/sin")
    try:
        full_c, full_s = sess.run(None, probe_feeds(model, inputs, 0, ROTARY_CACHE_LEN) | shaped)
        cached = cache_dims(model) is not None
        for past, new in _PROBES:
            if past and not cached:
                continue
            c, sn = sess.run(None, probe_feeds(model, inputs, past, new) | shaped)
            want = slice(past, past + new)
            if c.shape[-2] != new or not (np.allclose(c, full_c[..., want, :], atol=1e-5)
                                          and np.allclose(sn, full_s[..., want, :], atol=1e-5)):
                raise Miss(f"rotary positions are not past + arange(new) (at past {past}, new {new})")
    except (ort.capi.onnxruntime_pybind11_state.Fail, ort.capi.onnxruntime_pybind11_state.InvalidArgument,
            ort.capi.onnxruntime_pybind11_state.RuntimeException, ValueError) as exc:
        raise Miss(f"rotary cos/sin could not be evaluated: {str(exc)[:120]}") from None
    if full_c.ndim != 3 or full_c.shape[-1] != head or full_c.shape[-2] != ROTARY_CACHE_LEN:
        raise Miss(f"rotary cos is not [batch, seq, {head}]")
    half = head // 2
    c0, s0 = full_c[0], full_s[0]
    if not (np.array_equal(c0[:, :half], c0[:, half:]) and np.array_equal(s0[:, :half], s0[:, half:])):
        raise Miss("rotary cos/sin halves differ: not rotate_half's duplicated frequencies")
    c0, s0 = c0.astype(np.float32), s0.astype(np.float32)
    if not np.allclose(c0 * c0 + s0 * s0, 1.0, atol=max(1e-4, 4 * float(np.finfo(full_c.dtype).eps))):
        raise Miss("rotary cos/sin are scaled (cos^2 + sin^2 != 1): GroupQueryAttention cannot apply it")
    return (np.ascontiguousarray(c0[:, :half], np.float32), np.ascontiguousarray(s0[:, :half], np.float32),
            [n.output[0] for n in nodes])
