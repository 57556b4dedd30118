"""Attention fusion: scaled-dot-product self-attention blocks -> com.microsoft MultiHeadAttention.

The match is anchored on Softmax and walks outward:

    q3 -> Reshape[B,S,H,D] -> Transpose(0,2,1,3) [-> Mul c1] ----------.
    k3 -> Reshape[B,S,H,D] -> Transpose(0,2,3,1) [-> Mul c2] --------- MatMul -> [Mul c | Div c]
          (or Transpose(0,2,1,3) + Transpose(0,1,3,2))
       -> [Add mask] -> Softmax(-1) [-> Cast float] -> MatMul(., vh) -> Transpose(0,2,1,3) -> Reshape[B,S,H*D]
    v3 -> Reshape[B,S,H,D] -> Transpose(0,2,1,3) = vh

and becomes ``MultiHeadAttention(q3, k3, v3, attention_bias=mask, num_heads=H, scale=c)``. The model's own
additive mask tensor is passed unchanged as ``attention_bias``, so causal + padding semantics (right or left
padding) are the original arithmetic. Head count and head size come from the reshape constants and must
agree with the hidden size derived from the weights/splits; the Shape/Gather/Concat subgraphs that only
compute the head reshapes are absorbed into the match. Where Q/K/V are only seen as [B,H,S,D] tensors (Llama:
rotary embedding after the head split, repeat_kv for grouped KV) key and value go in as BNSH tensors and the
query is transposed/reshaped back to [B,S,hidden] in front of the fused node; H and D then come from the
inferred shapes and must agree with the Q head split found behind the rotary ops. Anything else is a near
miss with a reason (see ``near_misses``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx

from fuseview.fusion.rule import MS_DOMAIN, Match, NearMiss, Replacement, Rule

_FLOAT = onnx.TensorProto.FLOAT
# ops whose output dim i is the input's dim i (same rank, elementwise)
_UNARY_SAME = {"Cast", "Identity", "Relu", "Tanh", "Erf", "Sqrt", "Softmax", "LayerNormalization", "Neg",
               "Sigmoid", "Gelu", "FastGelu", "Dropout", "SimplifiedLayerNormalization", "Exp", "Abs",
               "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "Reciprocal", "Not", "CumSum",
               "IsNaN", "Floor", "Ceil", "Round", "Sign", "Log", "RMSNormalization", "BiasGelu", "QuickGelu"}
_BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Where", "And", "Or", "Xor", "Equal", "Less",
           "Greater", "LessOrEqual", "GreaterOrEqual"}

Dim = Any  # int, ("param", name), ("dim", tensor, i) or None


# --------------------------------------------------------------------------------------- symbolic shapes
class _Dims:
    """Symbolic reasoning about dims and 1-D shape vectors over a GraphIndex (memoised per scan)."""

    def __init__(self, index: Any) -> None:
        self.ix = index
        self._memo: dict[tuple[str, int], Dim] = {}
        self._params: dict[tuple[str, int], Dim] = {}
        self._ranks: dict[str, int | None] = {}
        for vi in list(index.graph.input):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                for i, d in enumerate(vi.type.tensor_type.shape.dim):
                    if d.HasField("dim_value"):
                        self._params[(vi.name, i)] = int(d.dim_value)
                    elif d.dim_param:
                        self._params[(vi.name, i)] = ("param", d.dim_param)

    def producer(self, t: str) -> onnx.NodeProto | None:
        p = self.ix.producer.get(t)
        return None if p is None else p[0]

    def rank(self, t: str, depth: int = 0) -> int | None:
        """Rank of a tensor: inferred, else derived from its producer."""
        if t in self._ranks:
            return self._ranks[t]
        self._ranks[t] = None
        r = self._rank(t, depth)
        self._ranks[t] = r
        return r

    def _rank(self, t: str, depth: int) -> int | None:
        s = self.ix.shape(t)
        if s is not None:
            return len(s)
        if t in self.ix.initializers:
            return len(self.ix.initializers[t].dims)
        for vi in self.ix.graph.input:
            if vi.name == t and vi.type.tensor_type.HasField("shape"):
                return len(vi.type.tensor_type.shape.dim)
        n = self.producer(t)
        if n is None or depth > 400:
            return None
        op, d = n.op_type, depth + 1
        if op in _UNARY_SAME or op == "Split" or (op in ("ReduceMean", "ReduceSum")
                                                   and self.ix.attr(n, "keepdims", 1)):
            return self.rank(n.input[0], d)
        if op == "Transpose":
            perm = self.ix.attr(n, "perm")
            return len(perm) if perm is not None else self.rank(n.input[0], d)
        if op in _BINARY or op in ("MatMul", "FusedMatMul"):
            rs = [self.rank(x, d) for x in n.input if x]
            return None if any(r is None for r in rs) else max(rs)
        if op == "Gemm":
            return 2
        if op == "Reshape":
            v = self.vec(n.input[1], set())
            return None if v is None else len(v)
        if op == "Gather":
            rd, ri = self.rank(n.input[0], d), self.rank(n.input[1], d)
            return None if rd is None or ri is None else rd - 1 + ri
        if op == "Expand":
            v = self.vec_len(n.input[1])
            ri = self.rank(n.input[0], d)
            return None if v is None or ri is None else max(v, ri)
        return None

    def vec_len(self, t: str, depth: int = 0) -> int | None:
        """Length of a 1-D shape vector even when its values are not known."""
        v = self.vec(t, set())
        if v is not None:
            return len(v)
        n = self.producer(t)
        if n is None or depth > 30:
            return None
        if n.op_type in ("Where", "Add", "Mul", "Max", "Min"):
            ls = [self.vec_len(x, depth + 1) for x in n.input[1:] if x] if n.op_type == "Where" else \
                [self.vec_len(x, depth + 1) for x in n.input if x]
            known = [x for x in ls if x is not None and x != 1]
            return known[0] if known and all(k == known[0] for k in known) else None
        if n.op_type in ("Cast", "Identity", "Abs", "Neg") or (n.op_type == "Reshape" and self._flat(n)):
            return self.vec_len(n.input[0], depth + 1)
        if n.op_type == "ConstantOfShape":
            c = self.const(n.input[0])
            return int(np.ravel(c)[0]) if c is not None and c.size == 1 else None
        if n.op_type == "Shape":
            r = self.rank(n.input[0])
            if r is None:
                return None
            start = int(self.ix.attr(n, "start", 0))
            end = self.ix.attr(n, "end", None)
            return len(list(range(r))[start: None if end is None else int(end)])
        return None

    def const(self, t: str) -> np.ndarray | None:
        if t in self.ix.initializers and int(np.prod(self.ix.initializers[t].dims)) > 4096:
            return None  # weights are never shape constants
        return self.ix.const_value(t) if self.ix.is_const(t) else None

    def dim(self, t: str, i: int, depth: int = 0) -> Dim:
        """Canonical token for dim i of tensor t (structural, never from substituted batch/seq values)."""
        key = (t, i)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = ("dim", t, i)  # cycle / depth guard
        val = self._dim(t, i, depth)
        if val is None:
            val = ("dim", t, i)
        self._memo[key] = val
        return val

    def _dim(self, t: str, i: int, depth: int) -> Dim:
        if depth > 400:
            return None
        if (t, i) in self._params:
            return self._params[(t, i)]
        if t in self.ix.initializers:
            dims = self.ix.initializers[t].dims
            return int(dims[i]) if 0 <= i < len(dims) else None
        n = self.producer(t)
        if n is None:
            return None
        op = n.op_type
        d = depth + 1
        if op in _UNARY_SAME:
            return self.dim(n.input[0], i, d)
        r = self.rank(t)
        if op in _BINARY:
            ins = [x for x in n.input if x]
            if r is None:
                return None
            toks = []
            for x in ins:
                rx = self.rank(x)
                if rx is None:
                    return None
                j = i - (r - rx)
                toks.append(1 if j < 0 else self.dim(x, j, d))
            non1 = [tok for tok in toks if tok != 1]
            if not non1:
                return 1
            if all(tok == non1[0] for tok in non1):
                return non1[0]
            return self._unify(non1)
        return self._dim_more(n, op, t, i, r, d)

    def _unify(self, toks: list[Dim]) -> Dim:
        """Broadcast of dims where some are opaque: the one named dim, if every opaque one agrees at the
        chosen dims (equal, or 1 which broadcasts); an opaque dim that differs from it would make the model
        fail at run time, so it cannot silently be another size."""
        named = {tok for tok in toks if isinstance(tok, int) or (isinstance(tok, tuple) and tok[0] != "dim")}
        if len(named) != 1:
            return None
        sym = next(iter(named))
        want = sym if isinstance(sym, int) else self.ix.dims_used.get(sym[1])
        if want is None:
            return None
        for tok in toks:
            if tok == sym:
                continue
            if not (isinstance(tok, tuple) and tok[0] == "dim"):
                return None
            s = self.ix.shape(tok[1])
            got = s[tok[2]] if s is not None and 0 <= tok[2] < len(s) else None
            if got not in (1, want):
                return None
        return sym

    def _dim_more(self, n: onnx.NodeProto, op: str, t: str, i: int, r: int | None, d: int) -> Dim:
        """_dim for the ops after the elementwise ones (split out to keep each function readable)."""
        if op == "Transpose":
            perm = self.ix.attr(n, "perm")
            return None if perm is None or i >= len(perm) else self.dim(n.input[0], int(perm[i]), d)
        if op in ("MatMul", "FusedMatMul") and r is not None:
            a, b = n.input[0], n.input[1]
            ra, rb = self.rank(a), self.rank(b)
            if ra is None or rb is None or ra < 2 or rb < 2:
                return None
            if i == r - 1:
                return self.dim(b, rb - 1, d)
            if i == r - 2:
                return self.dim(a, ra - 2, d)
            if rb == 2:
                return self.dim(a, i - (r - ra), d)
            return None
        if op == "Gemm" and i in (0, 1):
            if i == 0:
                return self.dim(n.input[0], 1 if self.ix.attr(n, "transA", 0) else 0, d)
            return self.dim(n.input[1], 0 if self.ix.attr(n, "transB", 0) else 1, d)
        if op == "Reshape":
            vec = self.vec(n.input[1], set())
            if vec is None or i >= len(vec):
                return None
            e = vec[i]
            if isinstance(e, int):
                if e > 0:
                    return e
                if e == 0 and not self.ix.attr(n, "allowzero", 0):
                    return self.dim(n.input[0], i, d)
                return None
            return None if e is None else self.canon(e, d)
        if op == "Split":
            rin = self.rank(n.input[0])
            if rin is None:
                return None
            axis = int(self.ix.attr(n, "axis", 0)) % rin
            if i != axis:
                return self.dim(n.input[0], i, d)
            k = list(n.output).index(t)
            sizes = self.const(n.input[1]) if len(n.input) > 1 and n.input[1] else None
            if sizes is None:
                sizes = self.ix.attr(n, "split")
            if sizes is not None:
                return int(np.ravel(sizes)[k])
            total = self.dim(n.input[0], axis, d)
            parts = len(n.output)
            if isinstance(total, int) and total % parts == 0:
                return total // parts
            return None
        if op == "Gather":
            axis = int(self.ix.attr(n, "axis", 0))
            ri = self.rank(n.input[1])
            if axis == 0 and ri is not None:
                return self.dim(n.input[1], i, d) if i < ri else self.dim(n.input[0], i - ri + 1, d)
            return None
        if op == "GatherElements":
            return self.dim(n.input[1], i, d)
        if op == "Slice":
            return self._slice_dim(n, i, d)
        if op == "Expand" and r is not None:
            return self._expand_dim(n, i, r, d)
        if op == "ReduceMean" or op == "ReduceSum":
            if not self.ix.attr(n, "keepdims", 1):
                return None
            return self.dim(n.input[0], i, d) if r is not None and self._reduce_keeps(n, i, r) else None
        if op == "Concat" and r is not None:
            axis = int(self.ix.attr(n, "axis", 0)) % r
            return self.dim(n.input[0], i, d) if i != axis else None
        return None

    def _slice_dim(self, n: onnx.NodeProto, i: int, d: int) -> Dim:
        """Dim i of a Slice: the input's dim when axis i is not sliced or is sliced whole."""
        r = self.rank(n.input[0])
        if r is None:
            return None
        starts = self.const(n.input[1])
        ends = self.const(n.input[2])
        axes = self.const(n.input[3]) if len(n.input) > 3 and n.input[3] else None
        steps = self.const(n.input[4]) if len(n.input) > 4 and n.input[4] else None
        if starts is None or (axes is None and len(n.input) > 3 and n.input[3]):
            return None
        axes_l = [int(a) % r for a in np.ravel(axes)] if axes is not None else list(range(np.size(starts)))
        if i not in axes_l:
            return self.dim(n.input[0], i, d)
        k = axes_l.index(i)
        whole = (
            int(np.ravel(starts)[k]) == 0
            and ends is not None
            and int(np.ravel(ends)[k]) >= 2**31 - 1
            and (steps is None or int(np.ravel(steps)[k]) == 1)
        )
        return self.dim(n.input[0], i, d) if whole else None

    def _expand_dim(self, n: onnx.NodeProto, i: int, r: int, d: int) -> Dim:
        """Dim i of Expand(x, shape): broadcast of x's dim and the shape element (-1/1 keep x's dim)."""
        vec = self.vec(n.input[1], set())
        rx = self.rank(n.input[0])
        if vec is None or rx is None:
            return None
        j = i - (r - len(vec))
        e = vec[j] if 0 <= j < len(vec) else 1
        jx = i - (r - rx)
        xd = self.dim(n.input[0], jx, d) if jx >= 0 else 1
        e = self.canon(e, d) if isinstance(e, tuple) else e
        if e in (1, -1):
            return xd
        if xd == 1:
            return e
        return xd if e == xd else None

    def _reduce_keeps(self, n: onnx.NodeProto, i: int, r: int) -> bool:
        axes = self.ix.attr(n, "axes")
        if axes is None and len(n.input) > 1 and n.input[1]:
            v = self.const(n.input[1])
            axes = None if v is None else list(np.ravel(v))
        if axes is None:
            return False
        return i not in {int(a) % r for a in axes}

    def canon(self, e: Dim, depth: int = 0) -> Dim:
        """Canonical form of a vector element."""
        if isinstance(e, tuple) and e[0] == "dim":
            return self.dim(e[1], e[2], depth + 1)
        return e

    def vec(self, t: str, visited: set[int], depth: int = 0) -> list[Dim] | None:
        """Elements of a 1-D int64 shape vector (ints or ("dim", tensor, i)); records the nodes walked."""
        c = self.const(t)
        if c is not None:
            if c.dtype.kind not in "iu" or c.ndim > 1:
                return None
            return [int(x) for x in np.ravel(c)]
        n = self.producer(t)
        if n is None or depth > 50:
            return None
        visited.add(id(n))
        op = n.op_type
        d = depth + 1
        if op == "Shape":
            r = self.rank(n.input[0])
            if r is None:
                return None
            start = int(self.ix.attr(n, "start", 0))
            end = self.ix.attr(n, "end", None)
            idx = list(range(r))[start: None if end is None else int(end)]
            return [("dim", n.input[0], j) for j in idx]
        if op == "Gather":
            if int(self.ix.attr(n, "axis", 0)) != 0:
                return None
            ind = self.const(n.input[1])
            if ind is None:
                return None
            p = self.producer(n.input[0])
            if p is not None and p.op_type == "Shape" and int(self.ix.attr(p, "start", 0)) == 0 \
                    and all(int(j) >= 0 for j in np.ravel(ind)):
                visited.add(id(p))
                return [("dim", p.input[0], int(j)) for j in np.ravel(ind)]
            data = self.vec(n.input[0], visited, d)
            if data is None:
                return None
            try:
                return [data[int(j)] for j in np.ravel(ind)]
            except IndexError:
                return None
        if op in ("Unsqueeze", "Squeeze", "Identity", "Flatten") or (op == "Reshape" and self._flat(n)):
            return self.vec(n.input[0], visited, d)
        if op == "Cast" and self.ix.attr(n, "to") in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            return self.vec(n.input[0], visited, d)
        if op == "Concat":
            out: list[Dim] = []
            for x in n.input:
                v = self.vec(x, visited, d)
                if v is None:
                    return None
                out.extend(v)
            return out
        if op == "Slice" and len(n.input) >= 3:
            data = self.vec(n.input[0], visited, d)
            cs = [self.const(x) if x else None for x in list(n.input[1:5])]
            if data is None or cs[0] is None or cs[1] is None or cs[0].size != 1 or cs[1].size != 1:
                return None
            if len(cs) > 2 and cs[2] is not None and int(np.ravel(cs[2])[0]) not in (0, -1):
                return None
            step = int(np.ravel(cs[3])[0]) if len(cs) > 3 and cs[3] is not None else 1
            start, end = int(np.ravel(cs[0])[0]), int(np.ravel(cs[1])[0])
            return data[slice(start, min(end, 2**62), step)]
        if op in ("Mul", "Add", "Sub") and len(n.input) == 2:
            a, b = self.vec(n.input[0], visited, d), self.vec(n.input[1], visited, d)
            if a is None or b is None or (len(a) != len(b) and 1 not in (len(a), len(b))):
                return None
            size = max(len(a), len(b))
            a, b = (a * size if len(a) == 1 else a), (b * size if len(b) == 1 else b)
            py = {"Mul": lambda x, y: x * y, "Add": lambda x, y: x + y, "Sub": lambda x, y: x - y}[op]
            # an expression of dims: equal only to the same expression (never a number it may happen to be)
            return [py(x, y) if isinstance(x, int) and isinstance(y, int) else ("expr", op, x, y)
                    for x, y in zip(a, b, strict=True)]
        return None

    def _flat(self, n: onnx.NodeProto) -> bool:
        c = self.const(n.input[1])
        return c is not None and np.ravel(c).tolist() in ([-1], [1]) and c.size == 1

    def same(self, a: Dim, b: Dim) -> bool:
        """True when two dims are provably equal."""
        a, b = self.canon(a), self.canon(b)
        if a is None or b is None:
            return False
        return a == b


# --------------------------------------------------------------------------------------------- matching
class Miss(Exception):
    """A near miss: the reason why a Softmax's neighbourhood is not an exact attention block."""


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


def _scalar(dims: _Dims, t: str) -> float | None:
    v = dims.const(t)
    if v is None or v.size != 1 or v.dtype.kind not in "fiu":
        return None
    return float(np.ravel(v)[0])


def _single(ix: Any, t: str) -> onnx.NodeProto | None:
    users = ix.consumers.get(t, ())
    return users[0] if len(users) == 1 and t not in ix.graph_outputs else None


class _Matcher:
    def __init__(self, ix: Any) -> None:
        self.ix = ix
        self.d = _Dims(ix)
        self.by_id = {id(n): n for n in ix.nodes}

    def prod(self, t: str, *ops: str) -> onnx.NodeProto | None:
        n = self.d.producer(t)
        return n if n is not None and n.op_type in ops and n.domain in ("", "ai.onnx") else None

    def perm(self, n: onnx.NodeProto) -> list[int]:
        return [int(p) for p in self.ix.attr(n, "perm", [])]

    def absorb(self, core: list[onnx.NodeProto], extra_ids) -> set[int]:
        """Add to core the extra nodes (shape computations) whose outputs only the match reads."""
        ix = self.ix
        matched = {id(n) for n in core}
        changed = True
        while changed:
            changed = False
            for nid in extra_ids:
                if nid in matched:
                    continue
                n = self.by_id[nid]
                if all(o not in ix.graph_outputs and ix.consumers.get(o) and
                       all(id(c) in matched for c in ix.consumers[o]) for o in n.output if o):
                    matched.add(nid)
                    core.append(n)
                    changed = True
        return matched

    def check_contained(self, core: list[onnx.NodeProto], matched: set[int], keep: set[str]) -> None:
        """Raise Miss when an intermediate of the match (not in keep) is a graph output or read outside."""
        ix = self.ix
        for n in core:
            for o in n.output:
                if not o or o in keep:
                    continue
                if o in ix.graph_outputs:
                    raise Miss(f"intermediate {o} is a graph output")
                outside = [c for c in ix.consumers.get(o, ()) if id(c) not in matched]
                if outside:
                    raise Miss(f"intermediate {o} is also used by {ix.name(outside[0])} outside the match")

    def scale_mul(self, t: str, core: list) -> tuple[str, float]:
        """Strip an optional Mul/Div by a scalar constant; returns (input tensor, factor)."""
        n = self.prod(t, "Mul", "Div")
        if n is None:
            return t, 1.0
        a, b = n.input[0], n.input[1]
        cb = _scalar(self.d, b)
        ca = _scalar(self.d, a) if n.op_type == "Mul" else None
        if cb is not None:
            if n.op_type == "Div":
                if cb == 0:
                    raise Miss(f"{n.name}: division by zero")
                cb = 1.0 / cb
            core.append(n)
            return a, cb
        if ca is not None:
            core.append(n)
            return b, ca
        return t, 1.0

    def heads(self, t: str, core: list, shape_nodes: set, which: str) -> tuple[str, int, int | None]:
        """Match Reshape(x3, [B,S,H|-1,D]); returns (x3, D, H or None)."""
        r = self.prod(t, "Reshape")
        if r is None:
            raise Miss(f"{which}: no head-split Reshape before the Transpose")
        core.append(r)
        x = r.input[0]
        vec = self.d.vec(r.input[1], shape_nodes)
        if vec is None or len(vec) != 4:
            raise Miss(f"{r.name}: head-split shape is not a known 4-element vector")
        if self.d.rank(x) not in (3, None):
            raise Miss(f"{r.name}: input is not [batch, seq, hidden]")
        allow0 = not self.ix.attr(r, "allowzero", 0)
        hd, dsz = vec[2], vec[3]
        # One -1 in the batch or sequence slot is that dim when every other element is pinned down
        # (dynamo writes [-1, S, H, D] once S is static): the element count then leaves no other value.
        free = [j for j in (0, 1) if vec[j] == -1]
        pinned = isinstance(hd, int) and hd > 0 and isinstance(dsz, int) and dsz > 0 \
            and self.d.canon(("dim", x, 2)) == hd * dsz
        for j in (0, 1):
            e = vec[j]
            if len(free) == 1 and j == free[0] and pinned:
                continue
            if not ((e == 0 and allow0) or self.d.same(e, ("dim", x, j))):
                raise Miss(f"{r.name}: shape element {j} is not dim {j} of its input")
        if not isinstance(dsz, int) or dsz <= 0:
            raise Miss(f"{r.name}: head size is not a constant")
        hidden = self.d.canon(("dim", x, 2))
        if hd == -1:
            if not isinstance(hidden, int):
                raise Miss(f"{r.name}: hidden size unknown, cannot derive the head count")
            if hidden % dsz:
                raise Miss(f"{r.name}: hidden {hidden} not divisible by head size {dsz}")
            h = hidden // dsz
        elif isinstance(hd, int) and hd > 0:
            h = hd
            if isinstance(hidden, int) and hidden != h * dsz:
                raise Miss(f"{r.name}: {h} heads x {dsz} != hidden {hidden}")
        else:
            raise Miss(f"{r.name}: head count is not a constant")
        return x, dsz, h

    def heads_of(self, t: str, nodes: list, which: str) -> tuple:
        """heads() on a [B,S,H,D] tensor, collecting its own nodes and shape nodes."""
        local = list(nodes)
        sn: set[int] = set()
        x3, dsz, h = self.heads(t, local, sn, which)
        return x3, local, dsz, h, sn

    def split3d(self, t4: str) -> tuple | None:
        """(x3, nodes, D, H, shape nodes) when t4 = Transpose(0,2,1,3)(Reshape(x3, [B,S,H,D])), else None."""
        tr = self.prod(t4, "Transpose")
        if tr is None or self.perm(tr) != [0, 2, 1, 3] or self.prod(tr.input[0], "Reshape") is None:
            return None
        try:
            return self.heads_of(tr.input[0], [tr], "split")
        except Miss:
            return None

    def bnsh_heads(self, t: str, what: str) -> tuple[int, int]:
        """(H, D) of a [B,H,S,D] tensor from its inferred shape."""
        s = self.ix.shape(t)
        if s is None or len(s) != 4 or not isinstance(s[1], int) or not isinstance(s[3], int):
            raise Miss(f"{what}: [batch, heads, seq, head] shape of {t} unknown")
        return s[1], s[3]

    def find_split_back(self, t: str) -> tuple | None:
        """The nearest head split behind elementwise / rotary ops (used as the batch/seq reference)."""
        seen = {t}
        queue = [t]
        while queue and len(seen) < 64:
            x = queue.pop(0)
            res = self.split3d(x)
            if res is not None:
                return res
            n = self.d.producer(x)
            if n is None or n.op_type not in ("Add", "Sub", "Mul", "Neg", "Concat", "Slice", "Cast"):
                continue
            for i in n.input:
                if i and i not in seen and self.d.const(i) is None:
                    seen.add(i)
                    queue.append(i)
        return None

    def where_mask(self, w: onnx.NodeProto, core: list) -> tuple[onnx.NodeProto, float, tuple]:
        """Scores masked by select: Where(keep, scaled Q.K^T, fill) with a boolean keep and a very negative
        fill. The same after Softmax as adding Where(keep, 0, fill): exp of the filled places is 0 either
        way. Returns (QK MatMul, scale factor, (condition, fill, whether the fill goes where it is true))."""
        cond, x, y = w.input
        fill_if = False  # Where(keep, scores, fill); or Where(drop, fill, scores): fill where cond is true
        fill = _scalar(self.d, y)
        if fill is None and _scalar(self.d, x) is not None:
            fill, x, fill_if = _scalar(self.d, x), y, True
        keep = cond
        if fill is None or not fill <= -1e4:
            raise Miss(f"{w.name}: mask fill is not a constant of -1e4 or below")
        if self.ix.const_dtype(keep) not in (onnx.TensorProto.BOOL, None):
            raise Miss(f"{w.name}: mask condition is not boolean")
        r = self.d.rank(keep)
        if r is None or r > 4 or (r == 4 and self.d.canon(("dim", keep, 2)) == 1) or r < 2:
            raise Miss(f"{w.name}: boolean mask is not [B|1, H|1, S, T] with the query axis")
        probe: list = []
        inner, f = self.scale_mul(x, probe)
        mm = self.prod(inner, "MatMul")
        if mm is None:
            raise Miss(f"{w.name}: the selected scores are not the scaled Q.K^T MatMul")
        core.extend([w] + probe)
        return mm, f, (keep, fill, fill_if)

    def nan_guard(self, t: str) -> list[onnx.NodeProto] | None:
        """[IsNaN, Where] when t is only read by Where(IsNaN(t), 0, t): SDPA's guard for fully masked rows."""
        users = self.ix.consumers.get(t, ())
        if len(users) != 2 or t in self.ix.graph_outputs:
            return None
        isnan = next((u for u in users if u.op_type == "IsNaN"), None)
        where = next((u for u in users if u.op_type == "Where"), None)
        if isnan is None or where is None or list(where.input[::2]) != [isnan.output[0], t]:
            return None
        zero = self.d.const(where.input[1])
        if zero is None or zero.size != 1 or float(np.ravel(zero)[0]) != 0.0:
            return None
        if self.ix.consumers.get(isnan.output[0], ()) != [where]:
            return None
        return [isnan, where]

    def identity_reshape_after(self, t: str, shape_nodes: set) -> onnx.NodeProto | None:
        """The Reshape reading t whose target is provably t's own shape (TorchScript's SDPA writes
        [B, -1, S, D] after P.V); t's other readers may only be the Shape nodes computing that target."""
        users = self.ix.consumers.get(t, ())
        rest = [u for u in users if u.op_type != "Shape"]
        if len(rest) != 1 or t in self.ix.graph_outputs:
            return None
        n = rest[0]
        local: set[int] = set()
        if not self.identity_reshape(n, local):
            return None
        if any(u.op_type == "Shape" and id(u) not in local for u in users):
            return None
        shape_nodes |= local
        return n

    def identity_reshape(self, n: onnx.NodeProto, shape_nodes: set) -> bool:
        """True when n is a Reshape whose target is provably its input's own shape: every element is
        the input's dim, 0 (copied) or one -1."""
        if n.op_type != "Reshape" or n.domain not in ("", "ai.onnx") or len(n.input) < 2:
            return False
        x = n.input[0]
        local: set[int] = set()
        vec = self.d.vec(n.input[1], local)
        if vec is None or self.d.rank(x) != len(vec):
            return False
        allow0 = not self.ix.attr(n, "allowzero", 0)
        free = 0
        for j, e in enumerate(vec):
            if e == -1:
                free += 1
            elif not ((e == 0 and allow0) or self.d.same(e, ("dim", x, j))):
                return False
        if free > 1:
            return False
        shape_nodes |= local
        return True

    def kt_through_3d(self, t: str, core: list, shape_nodes: set) -> str | None:
        """kh when t = Reshape(Transpose(Reshape(kh, [-1, S, D]), (0, 2, 1)), [B, H, D, S]): kh^T per head
        written over a flattened batch*heads axis (the dynamo exporter's SDPA decomposition)."""
        outer = self.prod(t, "Reshape")
        tr = self.prod(outer.input[0], "Transpose") if outer is not None else None
        inner = self.prod(tr.input[0], "Reshape") if tr is not None else None
        if inner is None or self.perm(tr) != [0, 2, 1]:
            return None
        kh = inner.input[0]
        local: set[int] = set()
        vin, vout = self.d.vec(inner.input[1], local), self.d.vec(outer.input[1], local)
        if self.d.rank(kh) != 4 or vin is None or vout is None or len(vin) != 3 or len(vout) != 4:
            return None
        dims = [("dim", kh, j) for j in range(4)]
        if not (self.d.same(vin[1], dims[2]) and self.d.same(vin[2], dims[3])):
            return None
        if not all(self.d.same(vout[j], dims[k]) for j, k in ((0, 0), (1, 1), (2, 3), (3, 2))):
            return None
        core.extend([outer, tr, inner])  # check_contained() later rejects intermediates read elsewhere
        shape_nodes |= local
        return kh

    def match(self, sm: onnx.NodeProto) -> AttentionMatch:
        ix, d = self.ix, self.d
        core: list[onnx.NodeProto] = [sm]
        shape_nodes: set[int] = set()
        r_sm = d.rank(sm.input[0])
        axis = int(ix.attr(sm, "axis", -1 if ix.opsets.get("", 13) >= 13 else 1))
        if r_sm is not None and axis % r_sm != r_sm - 1 or r_sm is None and axis != -1:
            raise Miss(f"{sm.name}: Softmax over axis {axis}, not the key axis")
        if r_sm not in (4, None):
            raise Miss(f"{sm.name}: scores are not 4-D [batch, heads, seq, seq]")
        if ix.opsets.get("", 13) < 13 and axis % 4 != 3:
            raise Miss(f"{sm.name}: opset<13 Softmax flattens from axis {axis}")
        # ---- forward: [Cast] -> MatMul(probs, vh) -> Transpose -> [Reshape]
        t = sm.output[0]
        guard = self.nan_guard(t)
        if guard is not None:
            core.extend(guard)
            t = guard[-1].output[0]
        nxt = _single(ix, t)
        while nxt is not None and nxt.op_type == "Cast":
            if ix.attr(nxt, "to") != _FLOAT or ix.const_dtype(t) not in (_FLOAT, None):
                raise Miss(f"{nxt.name}: Cast after Softmax changes the type")
            core.append(nxt)
            t = nxt.output[0]
            nxt = _single(ix, t)
        if nxt is None or nxt.op_type != "MatMul" or nxt.input[0] != t:
            if t in ix.graph_outputs:
                raise Miss(f"intermediate {t} is a graph output")
            raise Miss(f"{sm.name}: probabilities are not used only by MatMul(probs, V)")
        mm_v = nxt
        core.append(mm_v)
        tr_o = _single(ix, mm_v.output[0])
        same = self.identity_reshape_after(mm_v.output[0], shape_nodes)
        if same is not None:
            core.append(same)
            tr_o = _single(ix, same.output[0])
        if tr_o is None or tr_o.op_type != "Transpose" or self.perm(tr_o) != [0, 2, 1, 3]:
            raise Miss(f"{mm_v.name}: output is not transposed back to [batch, seq, heads, head]")
        core.append(tr_o)
        # ---- V
        vh = mm_v.input[1]
        v_split = self.split3d(vh)
        # ---- scores: [Add mask] <- [Mul/Div scale] <- MatMul(qh, kt)
        s_in = sm.input[0]
        bias = None
        where_mask = None
        add = self.prod(s_in, "Add")
        mm_qk = self.prod(s_in, "MatMul")
        scale = 1.0
        if add is not None:
            core.append(add)
            a, b = add.input[0], add.input[1]
            # the scores side is the one leading to the QK MatMul
            for sc, other in ((a, b), (b, a)):
                inner, f = self.scale_mul(sc, probe := [])
                if self.prod(inner, "MatMul") is not None:
                    core.extend(probe)
                    scale *= f
                    mm_qk = self.prod(inner, "MatMul")
                    bias = other
                    break
            else:
                for sc in (a, b):
                    n = self.prod(sc, "Mul", "Div")
                    if n is not None and any(self.prod(x, "MatMul") is not None for x in n.input):
                        raise Miss(f"{n.name}: scores scaled by a tensor that is not a scalar constant")
                raise Miss(f"{add.name}: neither operand is the scaled Q.K^T MatMul")
        elif mm_qk is None:
            inner, f = self.scale_mul(s_in, core)
            mm_qk = self.prod(inner, "MatMul")
            scale *= f
            if mm_qk is None:
                w = self.prod(s_in, "Where")
                if w is None:
                    raise Miss(f"{sm.name}: Softmax input is not (masked, scaled) Q.K^T")
                mm_qk, f, where_mask = self.where_mask(w, core)
                scale *= f
        if bias is not None:
            if d.rank(bias) not in (4, None):
                raise Miss(f"{add.name}: mask is {d.rank(bias)}-D; MultiHeadAttention needs [B|1,H|1,S,T]")
            if d.rank(bias) is None:
                raise Miss(f"{add.name}: mask rank unknown")
            if d.canon(("dim", bias, 2)) == 1:
                raise Miss(f"{add.name}: mask is [B,1,1,T]; MultiHeadAttention needs the query axis")
            if ix.const_dtype(bias) not in (_FLOAT, None):
                raise Miss(f"{add.name}: mask is not float32")
        core.append(mm_qk)
        # ---- Q
        qa, fq = self.scale_mul(mm_qk.input[0], core)
        q_split = self.split3d(qa)
        # ---- K^T
        ka, fk = self.scale_mul(mm_qk.input[1], core)
        flat_kt = self.kt_through_3d(ka, core, shape_nodes)
        tr_k = self.prod(ka, "Transpose") if flat_kt is None else None
        if tr_k is None and flat_kt is None:
            raise Miss(f"{mm_qk.name}: K is not transposed")
        if tr_k is not None:
            core.append(tr_k)
        k_split = None
        if flat_kt is not None:
            kh, fk2 = self.scale_mul(flat_kt, core)
            fk *= fk2
            k_split = self.split3d(kh)
            tr_k = self.d.producer(ka)
        elif self.perm(tr_k) == [0, 2, 3, 1]:
            k_split = self.heads_of(tr_k.input[0], [tr_k], "K")
            core.remove(tr_k)
            kh = None
        elif self.perm(tr_k) == [0, 1, 3, 2]:
            kh, fk2 = self.scale_mul(tr_k.input[0], core)
            fk *= fk2
            k_split = self.split3d(kh)
        else:
            raise Miss(f"{tr_k.name}: K transpose perm {self.perm(tr_k)} is not K^T per head")
        scale *= fq * fk
        # ---- layouts: 3-D [B,S,hidden] inputs where the head splits are visible, else BNSH tensors
        if q_split is not None:
            q3, q_nodes, dq, hq, q_shape_nodes = q_split
            core.extend(q_nodes)
            shape_nodes |= q_shape_nodes
            q4 = None
        else:
            q3, q4 = None, qa
            hq, dq = self.bnsh_heads(qa, "Q")
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
            if kh is None:
                raise Miss(f"{tr_k.name}: K^T (0,2,3,1) with V not from a head split")
            k3, v3 = kh, vh  # BNSH key/value, e.g. after rotary or repeat_kv
            for x, what in ((kh, "K"), (vh, "V")):
                h, dd = self.bnsh_heads(x, what)
                if (h, dd) != (hq, dq):
                    raise Miss(f"{sm.name}: {what} has {h}x{dd} heads, Q has {hq}x{dq} (grouped KV?)")
        for x in (q3 or q4, k3, v3):
            if ix.const_dtype(x) not in (_FLOAT, None):
                raise Miss(f"{sm.name}: {x} is not float32 (MultiHeadAttention CPU runs float32)")
        if q3 is None:
            ref = self.find_split_back(qa)
            if ref is None:
                raise Miss(f"{sm.name}: Q is 4-D and its head split cannot be traced back")
            q_ref, _n, d_ref, h_ref, _sn = ref
            if (h_ref, d_ref) != (hq, dq):
                raise Miss(f"{sm.name}: Q head split {h_ref}x{d_ref} differs from Q {hq}x{dq}")
        else:
            q_ref = q3
        # ---- output: merge heads
        out_t = tr_o.output[0]
        reshape_out = None
        users = ix.consumers.get(out_t, ())
        merges = [u for u in users if u.op_type == "Reshape" and u.input[0] == out_t]
        if len(merges) != 1 or out_t in ix.graph_outputs:
            raise Miss(f"{tr_o.name}: heads are not merged by one Reshape to [batch, seq, hidden]")
        merge = merges[0]
        vec = d.vec(merge.input[1], probe_nodes := set())
        allow0 = not ix.attr(merge, "allowzero", 0)
        ok3 = vec is not None and len(vec) == 3 and all(
            (vec[j] == 0 and allow0) or d.same(vec[j], ("dim", out_t, j))
            or d.same(vec[j], ("dim", q_ref, j)) for j in (0, 1)) and (vec[2] == -1 or vec[2] == hq * dq)
        core.append(merge)
        if ok3:
            shape_nodes |= probe_nodes
        elif vec is not None and all(isinstance(e, int) for e in vec) and 0 not in vec[2:] \
                and (len(users) == 1):
            reshape_out = (merge.input[1], merge.output[0])  # e.g. [-1, hidden] before a 2-D Gemm
        else:
            raise Miss(f"{merge.name}: merge-heads reshape target not understood")
        out_t = merge.output[0]
        # ---- absorb shape subgraphs used only by the match
        matched = self.absorb(core, shape_nodes)
        # ---- intermediates must stay inside
        self.check_contained(core, matched, {out_t})
        return AttentionMatch(sm, core, q3 or q4, k3, v3, bias, hq, dq, scale, out_t, reshape_out,
                              q_bnsh=q3 is None, where_mask=where_mask)


def shape_inputs_walk(m: _Matcher, t: str, out: set[int], depth: int = 0) -> None:
    """Ids of the nodes computing a shape tensor, stopping at Shape nodes (never into the data path)."""
    n = m.d.producer(t)
    if n is None or depth > 30 or id(n) in out or n.op_type == "Constant":
        return  # Constant nodes are not work: apply drops the ones left unread
    out.add(id(n))
    if n.op_type == "Shape":
        return
    for i in n.input:
        if i:
            shape_inputs_walk(m, i, out, depth + 1)


def matcher_for(index: Any) -> _Matcher:
    """One matcher per scanned index, so the rules share its memoised symbolic dims.

    Kept on the index itself (a weak-keyed cache would keep the index alive through the matcher).
    """
    m = getattr(index, "_fuseview_matcher", None)
    if m is None:
        m = _Matcher(index)
        index._fuseview_matcher = m
    return m


def find_attention(index: Any) -> tuple[list[AttentionMatch], list[tuple[list[str], str]]]:
    """Exact attention blocks and near misses (matched node names, reason) of a GraphIndex."""
    m = matcher_for(index)
    found: list[AttentionMatch] = []
    misses: list[tuple[list[str], str]] = []
    for sm in index.by_op.get("Softmax", ()):
        if sm.domain not in ("", "ai.onnx"):
            continue
        try:
            found.append(m.match(sm))
        except Miss as exc:
            misses.append(([index.name(sm)], str(exc)))
    return found, misses


def near_misses(index: Any) -> list[tuple[list[str], str]]:
    """Why each Softmax that is not fused was left alone."""
    return find_attention(index)[1]


def mask_bias(a: AttentionMatch) -> tuple[list[Replacement], str | None]:
    """The additive mask the fused op takes, and the node computing it from a boolean one if needed."""
    if a.where_mask is None:
        return [], a.bias
    cond, fill, fill_if = a.where_mask
    zero, fill_t, out = a.output + "_mask_zero", a.output + "_mask_fill", a.output + "_mask_bias"
    inputs = [cond, fill_t, zero] if fill_if else [cond, zero, fill_t]
    node = Replacement(inputs=inputs, op="Where", domain="", outputs=[out],
                       initializers={zero: np.array(0.0, np.float32), fill_t: np.array(fill, np.float32)})
    return [node], out


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
    inputs = [q, a.k, a.v] + (["", "", bias] if bias else [])
    attrs = {"num_heads": a.num_heads, "scale": float(np.float32(a.scale))}
    if a.reshape_out is None:
        return pre + [Replacement(inputs=inputs, attrs=attrs, op="MultiHeadAttention", domain=MS_DOMAIN,
                                  outputs=[a.output])]
    mid = a.output + "_mha"
    return pre + [
        Replacement(inputs=inputs, attrs=attrs, op="MultiHeadAttention", domain=MS_DOMAIN, outputs=[mid]),
        Replacement(inputs=[mid, a.reshape_out[0]], op="Reshape", domain="", outputs=[a.output])]


# Matches of the latest scans, so replace() does not walk the graph again.
_FOUND: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def attention_matches(index: Any) -> dict[str, AttentionMatch]:
    """The exact attention blocks of a graph by Softmax name (found once per index, shared by the rules)."""
    if index not in _FOUND:
        found, _ = find_attention(index)
        _FOUND[index] = {index.name(a.softmax): a for a in found}
    return _FOUND[index]


def _replace(m: Match) -> list[Replacement]:
    a = attention_matches(m.index).get(m.bindings["softmax_node"])
    if a is None:
        raise ValueError(f"attention match at {m.bindings['softmax_node']} is gone")
    return replacement_nodes(a)


def _find_matches(index: Any) -> Iterator[Match | NearMiss]:
    found, misses = find_attention(index)
    _FOUND[index] = {index.name(a.softmax): a for a in found}
    for name, a in _FOUND[index].items():
        yield Match.custom(RULES[0], index, a.nodes, [a.output], bindings={"softmax_node": name})
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
        replace=_replace,
        priority=100,
    ),
]
