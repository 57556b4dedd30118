"""The one symbolic dims engine of structural rules: dims and 1-D shape vectors as canonical tokens.

``SymbolicDims(index).dim(t, i)`` is a token for dim ``i`` of tensor ``t`` that two tensors share exactly when
the graph makes those dims equal for every input (an int, ``("param", name)`` for a declared input dim, or
``("dim", tensor, i)`` for one that is only known as itself); ``vec(t)`` reads a shape vector computed by
Shape/Gather/Concat/... as such tokens. Everything is structural (never the scan's substituted batch or
sequence values), so a proof holds for every input size. Made once per scan by the ScanContext.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

# ops whose output dim i is the input's dim i (same rank, elementwise)
UNARY_SAME = {"Cast", "Identity", "Relu", "Tanh", "Erf", "Sqrt", "Softmax", "LayerNormalization", "Neg",
              "Sigmoid", "Gelu", "FastGelu", "Dropout", "SimplifiedLayerNormalization", "Exp", "Abs",
              "SkipLayerNormalization", "SkipSimplifiedLayerNormalization", "Reciprocal", "Not", "CumSum",
              "IsNaN", "Floor", "Ceil", "Round", "Sign", "Log", "RMSNormalization", "BiasGelu", "QuickGelu",
              "Cos", "Sin"}
BINARY = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Where", "And", "Or", "Xor", "Equal", "Less",
          "Greater", "LessOrEqual", "GreaterOrEqual"}

# the producers whose output GraphIndex.is_const may call constant (every other computed tensor is not)
_CONST_OPS = frozenset({"Constant", "Identity", "ConstantOfShape"})

Dim = Any  # int, ("param", name), ("dim", tensor, i) or None


# --------------------------------------------------------------------------------------- symbolic shapes
# a shape expression of two fixed sizes, as an ONNX int64 op computes it (sizes are never negative)
_FOLD = {"Mul": lambda x, y: x * y, "Add": lambda x, y: x + y, "Sub": lambda x, y: x - y,
         "Div": lambda x, y: x // y}

class SymbolicDims:
    """Symbolic reasoning about dims and 1-D shape vectors over a GraphIndex (memoised per scan)."""

    def __init__(self, index: Any) -> None:
        self.ix = index
        self._memo: dict[tuple[str, int], Dim] = {}
        self._params: dict[tuple[str, int], Dim] = {}
        self._ranks: dict[str, int | None] = {}
        self._vecs: dict[str, tuple[list[Dim] | None, frozenset[int]]] = {}
        self._reduced: dict[tuple[int, int], frozenset[int] | None] = {}
        # each node's inputs as the index's table read them (a upb field read costs a dict lookup's several
        # times over, and the walks read a node's inputs once per dim asked)
        table = index.table
        self._ins: dict[int, list[str]] = dict(zip(map(id, table.nodes), table.inputs, strict=True))
        self._producers: dict[str, tuple[onnx.NodeProto, int]] = index.producer
        self._inits: dict[str, onnx.TensorProto] = index.initializers
        self._input_ranks: dict[str, int] = {}
        for vi in list(index.graph.input):
            if vi.type.tensor_type.HasField("shape"):
                self._input_ranks.setdefault(vi.name, len(vi.type.tensor_type.shape.dim))
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                for i, d in enumerate(vi.type.tensor_type.shape.dim):
                    if d.HasField("dim_value"):
                        self._params[(vi.name, i)] = int(d.dim_value)
                    elif d.dim_param:
                        self._params[(vi.name, i)] = ("param", d.dim_param)

    def producer(self, t: str) -> onnx.NodeProto | None:
        """The node producing t (None for inputs and initializers)."""
        p = self._producers.get(t)
        return None if p is None else p[0]

    def rank(self, t: str, depth: int = 0) -> int | None:
        """Rank of a tensor: inferred, else derived from its producer."""
        got = self._ranks.get(t, -1)
        if got != -1:
            return got
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
        if t in self._input_ranks:
            return self._input_ranks[t]
        n = self.producer(t)
        if n is None or depth > 400:
            return None
        op, d, ins = n.op_type, depth + 1, self._ins[id(n)]
        if op in UNARY_SAME or op == "Split" or (op in ("ReduceMean", "ReduceSum")
                                                   and self.ix.attr(n, "keepdims", 1)):
            return self.rank(ins[0], d)
        if op == "Transpose":
            perm = self.ix.attr(n, "perm")
            return len(perm) if perm is not None else self.rank(ins[0], d)
        if op in BINARY or op in ("MatMul", "FusedMatMul"):
            rs = [self.rank(x, d) for x in self.ix.inputs(n) if x]
            known = [r for r in rs if r is not None]
            return None if len(known) < len(rs) else max(known)
        if op == "Gemm":
            return 2
        if op == "Reshape":
            v = self._vec_walk(ins[1])[0]
            return None if v is None else len(v)
        if op == "Gather":
            rd, ri = self.rank(ins[0], d), self.rank(ins[1], d)
            return None if rd is None or ri is None else rd - 1 + ri
        if op == "Expand":
            n_shape = self.vec_len(ins[1])
            ri = self.rank(ins[0], d)
            return None if n_shape is None or ri is None else max(n_shape, ri)
        return None

    def vec_len(self, t: str, depth: int = 0) -> int | None:
        """Length of a 1-D shape vector even when its values are not known."""
        v = self._vec_walk(t)[0]
        if v is not None:
            return len(v)
        n = self.producer(t)
        if n is None or depth > 30:
            return None
        ins = self._ins[id(n)]
        if n.op_type in ("Where", "Add", "Mul", "Max", "Min"):
            ls = [self.vec_len(x, depth + 1) for x in ins[1:] if x] if n.op_type == "Where" else \
                [self.vec_len(x, depth + 1) for x in self.ix.inputs(n) if x]
            known = [x for x in ls if x is not None and x != 1]
            return known[0] if known and all(k == known[0] for k in known) else None
        if n.op_type in ("Cast", "Identity", "Abs", "Neg") or (n.op_type == "Reshape" and self._flat(n)):
            return self.vec_len(ins[0], depth + 1)
        if n.op_type == "ConstantOfShape":
            c = self.const(ins[0])
            return int(np.ravel(c)[0]) if c is not None and c.size == 1 else None
        if n.op_type == "Shape":
            r = self.rank(ins[0])
            if r is None:
                return None
            start = int(self.ix.attr(n, "start", 0))
            end = self.ix.attr(n, "end", None)
            return len(list(range(r))[start: None if end is None else int(end)])
        return None

    def const(self, t: str) -> np.ndarray | None:
        """A small constant's value (shape constants; weights over 4096 elements are never read)."""
        if t in self.ix.initializers and math.prod(self.ix.initializers[t].dims) > 4096:
            return None  # weights are never shape constants
        return self.ix.const_value(t) if self.ix.is_const(t) else None

    def dim(self, t: str, i: int, depth: int = 0) -> Dim:
        """Canonical token for dim i of tensor t (structural, never from substituted batch/seq values)."""
        key = (t, i)
        val = self._memo.get(key)  # never None: a dim with no derivation is its own token
        if val is not None:
            return val
        self._memo[key] = ("dim", t, i)  # cycle / depth guard
        val = self._dim(key, depth)
        if val is None:  # no structural derivation: a size onnx inferred as fixed is one all the same
            val = self.ix.static_dim(t, i)
        if val is None:
            val = ("dim", t, i)
        self._memo[key] = val
        return val

    def _dim(self, key: tuple[str, int], depth: int) -> Dim:
        if depth > 400:
            return None
        t, i = key
        param = self._params.get(key)
        if param is not None:
            return param
        init = self._inits.get(t)
        if init is not None:
            dims = init.dims
            return int(dims[i]) if 0 <= i < len(dims) else None
        p = self._producers.get(t)
        if p is None:
            return None
        n = p[0]
        op = n.op_type
        d = depth + 1
        memo = self._memo
        if op in UNARY_SAME:
            x = self._ins[id(n)][0]
            tok = memo.get((x, i))
            return tok if tok is not None else self.dim(x, i, d)
        ranks = self._ranks
        r = ranks.get(t, -1)
        if r == -1:
            r = self.rank(t)
        if op in BINARY:
            if r is None:
                return None
            non1 = []  # the inputs' dims that are not 1 (a broadcast 1, or an axis the input lacks)
            # their memos read here: most inputs' are known
            for x in self._ins[id(n)]:
                if not x:
                    continue
                rx = ranks.get(x, -1)
                if rx == -1:
                    rx = self.rank(x)
                if rx is None:
                    return None
                j = i - (r - rx)
                if j < 0:
                    continue
                tok = memo.get((x, j))
                if tok is None:
                    tok = self.dim(x, j, d)
                if tok != 1:
                    non1.append(tok)
            if not non1:
                return 1
            if non1.count(non1[0]) == len(non1):
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
        ins = self._ins[id(n)]
        if op == "Transpose":
            perm = self.ix.attr(n, "perm")
            return None if perm is None or i >= len(perm) else self.dim(ins[0], int(perm[i]), d)
        if op in ("MatMul", "FusedMatMul") and r is not None:
            a, b = ins[0], ins[1]
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
                return self.dim(ins[0], 1 if self.ix.attr(n, "transA", 0) else 0, d)
            return self.dim(ins[1], 0 if self.ix.attr(n, "transB", 0) else 1, d)
        if op == "Reshape":
            return self._reshape_dim(n, i, d)
        if op == "Unsqueeze" and r is not None:
            axes = self.ix.attr(n, "axes")
            if axes is None and len(ins) > 1 and ins[1]:
                c = self.const(ins[1])
                axes = None if c is None else np.ravel(c).tolist()
            if axes is None:
                return None
            axes_l = sorted(int(a) % r for a in axes)
            return 1 if i in axes_l else self.dim(ins[0], i - sum(a < i for a in axes_l), d)
        if op == "Split":
            return self._split_dim(n, t, i, d)
        if op == "Gather":
            axis = int(self.ix.attr(n, "axis", 0))
            ri = self.rank(ins[1])
            if axis == 0 and ri is not None:
                return self.dim(ins[1], i, d) if i < ri else self.dim(ins[0], i - ri + 1, d)
            return None
        if op == "GatherElements":
            return self.dim(ins[1], i, d)
        if op == "Slice":
            return self._slice_dim(n, i, d)
        if op == "Expand" and r is not None:
            return self._expand_dim(n, i, r, d)
        if op == "ReduceMean" or op == "ReduceSum":
            if not self.ix.attr(n, "keepdims", 1):
                return None
            return self.dim(ins[0], i, d) if r is not None and self._reduce_keeps(n, i, r) else None
        if op == "Concat" and r is not None:
            return self._concat_dim(n, i, r, d)
        return None

    def _reshape_dim(self, n: onnx.NodeProto, i: int, d: int) -> Dim:
        """Dim i of a Reshape's output: its target's element i (0 copies the input's, -1 what is left)."""
        ins = self._ins[id(n)]
        vec = self._vec_walk(ins[1])[0]
        if vec is None or i >= len(vec):
            return None
        e = vec[i]
        if isinstance(e, int):
            if e > 0:
                return e
            if e == 0 and not self.ix.attr(n, "allowzero", 0):
                return self.dim(ins[0], i, d)
            return self._reshape_free(n, vec, i, d) if e == -1 else None
        return None if e is None else self.canon(e, d)

    def _split_dim(self, n: onnx.NodeProto, t: str, i: int, d: int) -> Dim:
        """Dim i of the Split output t: the input's, or along the axis its part's size (given or equal)."""
        ins = self._ins[id(n)]
        rin = self.rank(ins[0])
        if rin is None:
            return None
        axis = int(self.ix.attr(n, "axis", 0)) % rin
        if i != axis:
            return self.dim(ins[0], i, d)
        k = self.ix.outputs(n).index(t)
        sizes = self.const(ins[1]) if len(ins) > 1 and ins[1] else None
        if sizes is None:
            sizes = self.ix.attr(n, "split")
        if sizes is not None:
            return int(np.ravel(sizes)[k])
        total = self.dim(ins[0], axis, d)
        n_out = len(n.output)
        if isinstance(total, int) and total % n_out == 0:
            return total // n_out
        return None

    def _concat_dim(self, n: onnx.NodeProto, i: int, r: int, d: int) -> Dim:
        """Dim i of a Concat's output: the first input's, or along the axis the sum of the parts."""
        ins = self._ins[id(n)]
        axis = int(self.ix.attr(n, "axis", 0)) % r
        if i != axis:
            return self.dim(ins[0], i, d)
        parts = [self.dim(x, i, d) for x in self.ix.inputs(n) if x]
        total = parts[0]
        for p in parts[1:]:  # the sum of the parts (KV cache: past + new)
            both = isinstance(total, int) and isinstance(p, int)
            total = total + p if both else ("expr", "Add", total, p)
        return total

    def _reshape_free(self, n: onnx.NodeProto, vec: list[Dim], i: int, d: int) -> Dim:
        """The -1 element of a Reshape target: what the element count leaves once the other elements are
        cancelled against the input's dims (the same symbolic dims, then the products of the numbers)."""
        ins = self._ins[id(n)]
        rin = self.rank(ins[0])
        if rin is None or vec.count(-1) != 1:
            return None
        allow0 = not self.ix.attr(n, "allowzero", 0)
        have = [self.dim(ins[0], j, d) for j in range(rin)]
        if any(x is None for x in have):
            return None
        known = 1
        for j, e in enumerate(vec):
            if j == i:
                continue
            e = self.dim(ins[0], j, d) if e == 0 and allow0 else self.canon(e, d)
            if isinstance(e, int):
                if e <= 0:
                    return None
                known *= e
            elif e is not None and e in have:  # [B, -1, H, D] of [B, S, H*D]: B cancels B
                have.remove(e)
            else:
                return None
        free = [x for x in have if not isinstance(x, int)]
        rest = math.prod([x for x in have if isinstance(x, int)])  # sizes: far below 2**63
        if not free:
            return rest // known if rest % known == 0 else None
        if len(free) != 1:
            return None
        return free[0] if rest == known else None

    def _slice_dim(self, n: onnx.NodeProto, i: int, d: int) -> Dim:
        """Dim i of a Slice: the input's dim when axis i is not sliced or is sliced whole."""
        ins = self._ins[id(n)]
        r = self.rank(ins[0])
        if r is None:
            return None
        starts = self.const(ins[1])
        ends = self.const(ins[2])
        axes = self.const(ins[3]) if len(ins) > 3 and ins[3] else None
        steps = self.const(ins[4]) if len(ins) > 4 and ins[4] else None
        if starts is None or (axes is None and len(ins) > 3 and ins[3]):
            return None
        axes_l = [int(a) % r for a in np.ravel(axes)] if axes is not None else list(range(np.size(starts)))
        if i not in axes_l:
            return self.dim(ins[0], i, d)
        k = axes_l.index(i)
        whole = (
            int(np.ravel(starts)[k]) == 0
            and ends is not None
            and int(np.ravel(ends)[k]) >= 2**31 - 1
            and (steps is None or int(np.ravel(steps)[k]) == 1)
        )
        if whole:
            return self.dim(ins[0], i, d)
        size = self.dim(ins[0], i, d)
        if not isinstance(size, int) or ends is None:
            return None
        # a known size sliced by constants (a packed QKV projection split on its last axis: Phi-3)
        step = 1 if steps is None else int(np.ravel(steps)[k])
        if step == 0:
            return None
        return len(range(*slice(int(np.ravel(starts)[k]), int(np.ravel(ends)[k]), step).indices(size)))

    def _expand_dim(self, n: onnx.NodeProto, i: int, r: int, d: int) -> Dim:
        """Dim i of Expand(x, shape): broadcast of x's dim and the shape element (-1/1 keep x's dim)."""
        ins = self._ins[id(n)]
        vec = self._vec_walk(ins[1])[0]
        rx = self.rank(ins[0])
        if vec is None or rx is None:
            return None
        j = i - (r - len(vec))
        e = vec[j] if 0 <= j < len(vec) else 1
        jx = i - (r - rx)
        xd = self.dim(ins[0], jx, d) if jx >= 0 else 1
        e = self.canon(e, d) if isinstance(e, tuple) else e
        if e in (1, -1):
            return xd
        if xd == 1:
            return e
        return xd if e == xd else None

    def _reduce_keeps(self, n: onnx.NodeProto, i: int, r: int) -> bool:
        key = (id(n), r)
        reduced = self._reduced.get(key, ())  # the node's reduced axes, read once for all its dims
        if reduced == ():
            ins = self._ins[id(n)]
            axes = self.ix.attr(n, "axes")
            if axes is None and len(ins) > 1 and ins[1]:
                v = self.const(ins[1])
                axes = None if v is None else list(np.ravel(v))
            reduced = self._reduced[key] = None if axes is None else frozenset(int(a) % r for a in axes)
        return reduced is not None and i not in reduced

    def canon(self, e: Dim, depth: int = 0) -> Dim:
        """Canonical form of a vector element."""
        if isinstance(e, tuple) and e[0] == "dim":
            return self.dim(e[1], e[2], depth + 1)
        if isinstance(e, tuple) and e[0] == "expr" and depth < 50:
            x, y = self.canon(e[2], depth + 1), self.canon(e[3], depth + 1)
            if isinstance(x, int) and isinstance(y, int) and (e[1] != "Div" or y > 0):
                return _FOLD[e[1]](x, y)  # both sides fixed sizes: the expression is a number
            return ("expr", e[1], x, y)
        return e

    def vec(self, t: str, visited: set[int], depth: int = 0) -> list[Dim] | None:
        """Elements of a 1-D int64 shape vector (ints or ("dim", tensor, i)); records the nodes walked."""
        if depth:
            return self._vec(t, visited, depth)
        # rules read the same shape vectors again and again (each Reshape's target, per rule): a walk from
        # the top is the same whoever asks, so its elements and the nodes it walked are kept
        hit = self._vec_walk(t)
        visited.update(hit[1])
        return None if hit[0] is None else list(hit[0])

    def _vec_walk(self, t: str) -> tuple[list[Dim] | None, frozenset[int]]:
        """vec(t) from the top and the nodes it walked, kept (the dims engine reads the list, never changes
        it, and needs no walked nodes: it reads this without a copy)."""
        hit = self._vecs.get(t)
        if hit is None:
            walked: set[int] = set()
            hit = (self._vec(t, walked, 0), frozenset(walked))
            self._vecs[t] = hit
        return hit

    def _vec(self, t: str, visited: set[int], depth: int) -> list[Dim] | None:
        n = self.producer(t)
        op = None if n is None else n.op_type
        # only these can be constant (GraphIndex.is_const): never ask of the Shape/Gather/... outputs walked
        if n is None or op in _CONST_OPS or t in self._inits:
            c = self.const(t)
            if c is not None:
                if c.dtype.kind not in "iu" or c.ndim > 1:
                    return None
                return c.ravel().tolist()  # Python ints
        if n is None or depth > 50:
            return None
        ins = self._ins[id(n)]
        visited.add(id(n))
        d = depth + 1
        if op == "Shape":
            r = self.rank(ins[0])
            if r is None:
                return None
            start = int(self.ix.attr(n, "start", 0))
            end = self.ix.attr(n, "end", None)
            idx = list(range(r))[start: None if end is None else int(end)]
            return [("dim", ins[0], j) for j in idx]
        if op == "Gather":
            if int(self.ix.attr(n, "axis", 0)) != 0:
                return None
            ind = self.const(ins[1])
            if ind is None:
                return None
            picks = [int(j) for j in ind.ravel().tolist()]
            p = self.producer(ins[0])
            if p is not None and p.op_type == "Shape" and int(self.ix.attr(p, "start", 0)) == 0 \
                    and all(j >= 0 for j in picks):
                visited.add(id(p))
                of = self._ins[id(p)][0]
                return [("dim", of, j) for j in picks]
            data = self._vec(ins[0], visited, d)
            if data is None:
                return None
            try:
                return [data[j] for j in picks]
            except IndexError:
                return None
        if op in ("Unsqueeze", "Squeeze", "Identity", "Flatten") or (op == "Reshape" and self._flat(n)):
            return self._vec(ins[0], visited, d)
        if op == "Cast" and self.ix.attr(n, "to") in (onnx.TensorProto.INT64, onnx.TensorProto.INT32):
            return self._vec(ins[0], visited, d)
        if op == "Concat":
            out: list[Dim] = []
            for x in ins:
                v = self._vec(x, visited, d)
                if v is None:
                    return None
                out.extend(v)
            return out
        if op == "Slice" and len(ins) >= 3:
            data = self._vec(ins[0], visited, d)
            cs = [self.const(x) if x else None for x in ins[1:5]]
            if data is None or cs[0] is None or cs[1] is None or cs[0].size != 1 or cs[1].size != 1:
                return None
            if len(cs) > 2 and cs[2] is not None and int(np.ravel(cs[2])[0]) not in (0, -1):
                return None
            step = int(np.ravel(cs[3])[0]) if len(cs) > 3 and cs[3] is not None else 1
            start, end = int(np.ravel(cs[0])[0]), int(np.ravel(cs[1])[0])
            return data[slice(start, min(end, 2**62), step)]
        if op == "Where":
            return self._where_vec(n, visited, d)
        if op in ("Mul", "Add", "Sub", "Div") and len(ins) == 2:
            a, b = self._vec(ins[0], visited, d), self._vec(ins[1], visited, d)
            if a is None or b is None or (len(a) != len(b) and 1 not in (len(a), len(b))):
                return None
            size = max(len(a), len(b))
            a, b = (a * size if len(a) == 1 else a), (b * size if len(b) == 1 else b)
            if op == "Div" and any(isinstance(y, int) and y <= 0 for y in b):
                return None  # sizes are never negative: a division by 0 or less is no size
            py = _FOLD[op]
            # an expression of dims: equal only to the same expression (never a number it may happen to be)
            return [py(x, y) if isinstance(x, int) and isinstance(y, int) else ("expr", op, x, y)
                    for x, y in zip(a, b, strict=True)]
        return None

    def _where_vec(self, n: onnx.NodeProto, visited: set[int], depth: int) -> list[Dim] | None:
        """Where(Equal(v, -1), ones, v), torch's expand(-1) handling: v itself when no element of v can
        be -1 (every element a dim or a non-negative number)."""
        ins = self._ins[id(n)]
        eq = self.producer(ins[0])
        v = ins[2]
        if eq is None or eq.op_type != "Equal" or v not in eq.input:
            return None
        other = eq.input[1] if eq.input[0] == v else eq.input[0]
        if self._fill_value(other) != -1:
            return None
        vec = self._vec(v, visited, depth)
        if vec is None or any(isinstance(e, int) and e < 0 for e in vec):
            return None
        return vec

    def _fill_value(self, t: str) -> float | None:
        """The one value every element of t holds: a constant, ConstantOfShape(value) or its scalar Mul."""
        c = self.const(t)
        if c is not None:
            flat = np.ravel(c)
            return float(flat[0]) if flat.size and np.all(flat == flat[0]) else None
        n = self.producer(t)
        if n is None:
            return None
        if n.op_type == "ConstantOfShape":
            value = self.ix.attr(n, "value")
            return 0.0 if value is None else float(np.ravel(numpy_helper.to_array(value))[0])
        ins = self._ins[id(n)]
        if n.op_type == "Mul" and len(ins) == 2:
            a, b = self._fill_value(ins[0]), self._fill_value(ins[1])
            return None if a is None or b is None else a * b
        return None

    def _flat(self, n: onnx.NodeProto) -> bool:
        ins = self._ins[id(n)]
        c = self.const(ins[1])
        return c is not None and np.ravel(c).tolist() in ([-1], [1]) and c.size == 1

    def same(self, a: Dim, b: Dim) -> bool:
        """True when two dims are provably equal."""
        a, b = self.canon(a), self.canon(b)
        if a is None or b is None:
            return False
        return a == b
