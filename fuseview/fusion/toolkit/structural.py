"""Structural matching helpers shared by the imperative rules (attention, embeddings, shape chains).

A rule whose match is not a fixed pattern (attention: several layouts, scales, masks and shape subgraphs)
walks the graph with a :class:`Structure`: producers of a given op, Transpose perms, scalar factors, head
splits ``Reshape(x, [B, S, H, D])`` proven with the scan's :class:`SymbolicDims`, and the two checks every
such match needs: ``absorb`` (take in the shape subgraphs only the match reads) and ``check_contained``
(no intermediate is read outside the match). A failed step raises :class:`Miss` with the near-miss reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import onnx

from fuseview.fusion.rule import Miss
from fuseview.fusion.toolkit.dims import SymbolicDims

# ops a head split's tensor passes on its way to the scores: rotary embedding, scales, casts, q|k|v slices
_ELEMENTWISE_OR_ROTARY = ("Add", "Sub", "Mul", "Neg", "Concat", "Slice", "Split", "Cast")


def scalar(dims: SymbolicDims, t: str) -> float | None:
    """The value of a one-element numeric constant tensor, else None."""
    v = dims.const(t)
    if v is None or v.size != 1 or v.dtype.kind not in "fiu":
        return None
    return float(np.ravel(v)[0])


_SCALAR_OPS: dict[str, Callable[[float], float]] = {"Sqrt": lambda x: float(np.sqrt(x)),
                                                    "Reciprocal": lambda x: 1.0 / x}
_SCALAR_BINARY: dict[str, Callable[[float, float], float]] = {
    "Div": lambda x, y: x / y, "Mul": lambda x, y: x * y, "Add": lambda x, y: x + y,
    "Sub": lambda x, y: x - y, "Pow": lambda x, y: x ** y}


def computed_scalar(dims: SymbolicDims, t: str, nodes: list, depth: int = 0) -> float | None:
    """The value of a one-element tensor computed from constants and fixed dims, as torch's sdpa export
    writes its scale (``Sqrt(1 / Sqrt(Shape(q)[-1]))`` on Q and on K); the nodes computing it go in nodes."""
    if (c := scalar(dims, t)) is not None:
        return c
    n = dims.producer(t)
    if n is None or depth > 12 or n.domain not in ("", "ai.onnx"):
        return None
    found: list = []
    value: float | None = None
    if n.op_type in ("Shape", "Slice", "Gather", "Squeeze", "Unsqueeze"):
        vec = dims.vec(t, set())
        v = [dims.canon(e) for e in vec] if vec is not None else None
        if v is None or len(v) != 1 or not isinstance(v[0], int):
            return None
        _shape_nodes(dims, t, set(), found)
        value = float(v[0])
    elif n.op_type == "Cast" or n.op_type in _SCALAR_OPS:
        x = computed_scalar(dims, n.input[0], found, depth + 1)
        value = None if x is None else (x if n.op_type == "Cast" else float(_SCALAR_OPS[n.op_type](x)))
    elif n.op_type in _SCALAR_BINARY and len(n.input) == 2:
        x = computed_scalar(dims, n.input[0], found, depth + 1)
        y = computed_scalar(dims, n.input[1], found, depth + 1)
        if x is None or y is None or (n.op_type == "Div" and y == 0) or (n.op_type == "Pow" and x < 0):
            return None
        value = float(_SCALAR_BINARY[n.op_type](x, y))
    if value is None or not np.isfinite(value):
        return None
    found.append(n)
    nodes.extend(x for x in found if all(x is not y for y in nodes))
    return value


def _shape_nodes(dims: SymbolicDims, t: str, seen: set[int], out: list) -> None:
    """The nodes computing a shape element back to (and with) its Shape nodes."""
    n = dims.producer(t)
    if n is None or id(n) in seen or n.op_type == "Constant":
        return
    seen.add(id(n))
    out.append(n)
    if n.op_type != "Shape":
        for i in dims.ix.inputs(n):
            if i:
                _shape_nodes(dims, i, seen, out)


def single_reader(ix: Any, t: str) -> onnx.NodeProto | None:
    """The one node reading t (None when t has several readers or is a graph output)."""
    users = ix.consumers.get(t, ())
    return users[0] if len(users) == 1 and t not in ix.graph_outputs else None


def shape_inputs_walk(m: Structure, t: str, out: set[int], depth: int = 0) -> None:
    """Ids of the nodes computing a shape tensor, stopping at Shape nodes (never into the data path)."""
    _walk_shape_inputs(m.d.producer, m.ix.inputs, t, out, depth)  # looked up once, not per tensor walked


def _walk_shape_inputs(producer: Callable[[str], onnx.NodeProto | None],
                       inputs: Callable[[onnx.NodeProto], list[str]],
                       t: str, out: set[int], depth: int) -> None:
    n = producer(t)
    if n is None or depth > 30 or id(n) in out or n.op_type == "Constant":
        return  # Constant nodes are not work: apply drops the ones left unread
    out.add(id(n))
    if n.op_type == "Shape":
        return
    for i in inputs(n):
        if i:
            _walk_shape_inputs(producer, inputs, i, out, depth + 1)


class Structure:
    """Graph-walking helpers over one GraphIndex and the scan's SymbolicDims."""

    def __init__(self, ix: Any, dims: SymbolicDims | None = None) -> None:
        self.ix = ix
        self.d = dims if dims is not None else SymbolicDims(ix)
        self.by_id = dict(zip(map(id, ix.nodes), ix.nodes, strict=True))

    def prod(self, t: str, *ops: str) -> onnx.NodeProto | None:
        """The ONNX-domain producer of t when its op is one of ops, else None."""
        n = self.d.producer(t)
        return n if n is not None and n.op_type in ops and n.domain in ("", "ai.onnx") else None

    def perm(self, n: onnx.NodeProto) -> list[int]:
        """A Transpose node's perm as ints ([] when absent)."""
        return [int(p) for p in self.ix.attr(n, "perm", [])]

    def absorb(self, core: list[onnx.NodeProto], extra_ids: Iterable[int]) -> set[int]:
        """Add to core the extra nodes (shape computations) whose outputs only the match reads."""
        ix = self.ix
        matched = {id(n) for n in core}
        # readers come after their producers in graph order: latest first, one pass takes in a whole chain
        # (a next pass looks only at the nodes left out, for graphs whose nodes are not in that order)
        pending = sorted((self.by_id[nid] for nid in extra_ids if nid not in matched), key=ix.position,
                         reverse=True)
        changed = True
        while changed and pending:
            changed = False
            rest = []
            for n in pending:
                if self._read_only_by(n, matched):
                    matched.add(id(n))
                    core.append(n)
                    changed = True
                else:
                    rest.append(n)
            pending = rest
        return matched

    def _read_only_by(self, n: onnx.NodeProto, matched: set[int]) -> bool:
        """Whether every output of n is read, by matched nodes only, and none is a graph output."""
        outputs, consumers = self.ix.graph_outputs, self.ix.consumers
        for o in self.ix.outputs(n):
            if not o:
                continue
            users = consumers.get(o)
            if o in outputs or not users:
                return False
            for c in users:
                if id(c) not in matched:
                    return False
        return True

    def check_contained(self, core: list[onnx.NodeProto], matched: set[int], keep: set[str]) -> None:
        """Raise Miss when an intermediate of the match (not in keep) is a graph output or read outside."""
        ix = self.ix
        outputs, consumers, graph_outputs = ix.outputs, ix.consumers, ix.graph_outputs
        for n in core:
            for o in outputs(n):
                if not o or o in keep:
                    continue
                if o in graph_outputs:
                    raise Miss(f"intermediate {o} is a graph output")
                for c in consumers.get(o, ()):
                    if id(c) not in matched:
                        raise Miss(f"intermediate {o} is also used by {ix.name(c)} outside the match")

    def scale_mul(self, t: str, core: list) -> tuple[str, float]:
        """Strip an optional Mul/Div by a scalar constant; returns (input tensor, factor)."""
        n = self.prod(t, "Mul", "Div")
        if n is None:
            return t, 1.0
        a, b = n.input[0], n.input[1]
        cb = scalar(self.d, b)
        ca = scalar(self.d, a) if n.op_type == "Mul" else None
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
        for x, f in ((a, b), (b, a)) if n.op_type == "Mul" else ((a, b),):
            computed: list = []
            c = computed_scalar(self.d, f, computed)
            if c is not None and (n.op_type == "Mul" or c != 0):
                core.extend([n] + [m for m in computed if all(m is not y for y in core)])
                return x, (c if n.op_type == "Mul" else 1.0 / c)
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

    def behind(self, t: str) -> Iterator[str]:
        """t, then the tensors behind it through elementwise and rotary ops, nearest first (64 at most)."""
        seen = {t}
        queue = [t]
        while queue and len(seen) < 64:
            x = queue.pop(0)
            yield x
            n = self.d.producer(x)
            if n is None or n.op_type not in _ELEMENTWISE_OR_ROTARY:
                continue
            for i in self.ix.inputs(n):
                if i and i not in seen and self.d.const(i) is None:
                    seen.add(i)
                    queue.append(i)

    def find_split_back(self, t: str) -> tuple | None:
        """The nearest head split behind elementwise / rotary ops (used as the batch/seq reference)."""
        return next((res for x in self.behind(t) if (res := self.split3d(x)) is not None), None)

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
