"""Embedding fusion: word + position (+ segment) Gathers, Adds, LayerNormalization -> EmbedLayerNormalization.

    LayerNormalization(Gather(W, input_ids) + Gather(P, arange(S)) [+ Gather(T, token_type_ids)], gamma, beta)

becomes ``EmbedLayerNormalization(int32(input_ids), int32(token_type_ids), W, P, T, gamma, beta)``
(com.microsoft, onnxruntime CPU and CUDA). The kernel reads int32 ids and uses positions 0..S-1, so the rule
inserts the Casts and only matches when the position indices are provably ``arange(S)``: a Slice ``[:, 0:S]``
of a constant ``arange`` buffer (BERT), ``Unsqueeze(Range(0, S, 1))`` or a constant ``arange``. The ids must
be graph inputs (or a no-op Reshape of one to [-1, S], as in dynamo GPT-2 exports). When the embedding sum is
also used elsewhere (the residual stream) the kernel's ``embedding_sum`` output provides it. The
LayerNormalization must be the fused op (the decomposed form is left to the norms rule).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx

from fuseview.fusion.rule import MS_DOMAIN, Match, NearMiss, Replacement, Rule
from fuseview.fusion.toolkit import Miss, ScanContext, Structure

_INT_TYPES = (onnx.TensorProto.INT64, onnx.TensorProto.INT32)


@dataclass
class EmbeddingMatch:
    """An exact embedding block and the inputs EmbedLayerNormalization needs."""

    ln: onnx.NodeProto
    nodes: list[onnx.NodeProto]
    input_ids: str
    segment_ids: str | None
    word: str
    position: str
    segment: str | None
    gamma: str
    beta: str
    epsilon: float
    output: str
    embedding_sum: str | None  # the Add tree's root output when used outside the match
    # (segment table, row) when the segment ids are one constant: that row is folded into the position table
    folded_segment: tuple[str, int] | None = None
    position_ids: str | None = None  # computed position indices (else the kernel's own 0..S-1)


class _Finder(Structure):  # the scan's symbolic dims and producer lookup

    def table(self, t: str) -> tuple[int, int] | None:
        init = self.ix.initializers.get(t)
        if init is None or t in self.ix.graph_inputs or len(init.dims) != 2:
            return None
        return int(init.dims[0]), int(init.dims[1])

    def is_arange_positions(self, t: str, ids: str, walked: set[int]) -> bool:
        """True when tensor t holds [[0, 1, ..., S-1]] with S the sequence length of ids."""
        c = self.d.const(t)
        if c is not None:
            return c.ndim == 2 and c.shape[0] == 1 and np.array_equal(c[0], np.arange(c.shape[1])) \
                and self.d.same(c.shape[1], ("dim", ids, 1))
        seq = ("dim", ids, 1)
        n = self.prod(t, "Slice")
        if n is not None:
            walked.add(id(n))
            buf = self.d.const(n.input[0])
            if buf is None or buf.ndim != 2 or buf.shape[0] != 1 or \
                    not np.array_equal(buf[0], np.arange(buf.shape[1])):
                return False
            starts = self.d.vec(n.input[1], walked)
            ends = self.d.vec(n.input[2], walked)
            axes = self.d.vec(n.input[3], walked) if len(n.input) > 3 and n.input[3] else [0]
            steps = self.d.vec(n.input[4], walked) if len(n.input) > 4 and n.input[4] else [1]
            return starts == [0] and axes in ([1], [-1]) and steps == [1] and ends is not None \
                and len(ends) == 1 and self.d.same(ends[0], seq)
        n = self.prod(t, "Unsqueeze")
        if n is not None:
            walked.add(id(n))
            axes = self.ix.attr(n, "axes")
            if axes is None and len(n.input) > 1:
                axes = self.d.vec(n.input[1], walked)
            r = self.prod(n.input[0], "Range")
            if list(axes or []) != [0] or r is None:
                return False
            walked.add(id(r))
            start, delta = self.d.const(r.input[0]), self.d.const(r.input[2])
            if start is None or delta is None or start.size != 1 or delta.size != 1 or \
                    int(start.ravel()[0]) != 0 or int(delta.ravel()[0]) != 1:
                return False
            limit = r.input[1]
            while (p := self.prod(limit, "Cast", "Squeeze", "Identity")) is not None:
                walked.add(id(p))
                limit = p.input[0]
            v = self.d.vec(limit, walked)
            return v is not None and len(v) == 1 and self.d.same(v[0], seq)
        return False

    def looks_like_embedding(self, t: str) -> bool:
        """An Add (tree) one of whose summands is a Gather from a 2-D table."""
        stack, seen = [t], 0
        while stack and seen < 8:
            x = stack.pop()
            seen += 1
            n = self.prod(x, "Add", "Cast", "Gather")
            if n is None:
                continue
            if n.op_type == "Gather":
                if self.table(n.input[0]) is not None:
                    return True
                continue
            if n.op_type == "Add" and x != t and len(self.ix.consumers.get(x, ())) > 1:
                continue  # a shared sum (residual stream) is not part of this LayerNorm's embedding tree
            stack.extend(n.input if n.op_type == "Add" else n.input[:1])
        return False

    def uniform_ids(self, t: str, walked: set[int]) -> int | None:
        """The one value every element of t holds whatever the batch and sequence, None if not provable.

        BERT exported without token_type_ids reads its segment ids from a zero buffer through
        Expand / Slice / GatherElements: every op on that path only selects or repeats the buffer's values.
        """
        local: set[int] = set()
        for _ in range(16):
            c = self.d.const(t)
            if c is not None:
                flat = np.ravel(c)
                if flat.size == 0 or c.dtype.kind not in "iu" or not np.all(flat == flat[0]):
                    return None
                walked |= local
                return int(flat[0])
            n = self.prod(t, "Expand", "Slice", "GatherElements", "Gather", "Reshape", "Unsqueeze", "Squeeze",
                          "Identity", "Cast", "Tile")
            if n is None:
                return None
            if n.op_type == "Cast" and self.ix.attr(n, "to") not in _INT_TYPES:
                return None
            local.add(id(n))
            t = n.input[0]
        return None

    def ids_source(self, t: str, core: list, walked: set[int]) -> str | None:
        """The graph input holding these ids: t itself, or t = Reshape(input, [-1 | B, S]) (a no-op view)."""
        if t in self.ix.graph_inputs:
            return t
        r = self.prod(t, "Reshape")
        if r is None or r.input[0] not in self.ix.graph_inputs or self.d.rank(r.input[0]) != 2:
            return None
        x = r.input[0]
        local: set[int] = set()
        vec = self.d.vec(r.input[1], local)
        allow0 = not self.ix.attr(r, "allowzero", 0)
        if vec is None or len(vec) != 2:
            return None
        ok0 = vec[0] == -1 or (vec[0] == 0 and allow0) or self.d.same(vec[0], ("dim", x, 0))
        ok1 = (vec[1] == 0 and allow0) or self.d.same(vec[1], ("dim", x, 1))
        if not (ok0 and ok1):
            return None
        if len(self.ix.consumers.get(t, ())) != 1:
            return None
        core.append(r)
        walked |= local
        return x

    def match(self, ln: onnx.NodeProto) -> EmbeddingMatch:
        ix = self.ix
        gamma, beta = self._norm_params(ln)
        root = ln.input[0]
        add = self.prod(root, "Add")
        if add is None:
            raise Miss(f"{ln.name}: input is not an Add of embeddings")
        core = [ln]
        leaves = self._summands(add, core)
        if len(leaves) not in (2, 3):
            raise Miss(f"{ln.name}: {len(leaves)} summands, not word + position [+ segment] embeddings")
        gathers, sizes = self._gathers(ln, leaves, core)
        walked: set[int] = set()
        src = {id(g): self.ids_source(g.input[1], core, walked) for g in gathers}
        direct = [g for g in gathers if src[id(g)] is not None]
        others = [g for g in gathers if src[id(g)] is None]
        if not direct:
            raise Miss(f"{ln.name}: no embedding is indexed by a graph input (ids reshaped or computed)")
        direct.sort(key=lambda g: -sizes[id(g)][0])  # the word table is the largest
        word_g = direct[0]
        ids = src[id(word_g)]
        if ids is None or ix.const_dtype(ids) not in _INT_TYPES or self.d.rank(ids) != 2:
            raise Miss(f"{word_g.name}: ids are not a 2-D integer input")
        seg_g = direct[1] if len(direct) > 1 else None
        const_seg: tuple[onnx.NodeProto, int] | None = None
        if seg_g is None and len(others) == 2:
            const_seg = self._constant_segment(others, ids, walked)
            if const_seg is not None:
                others = [g for g in others if g is not const_seg[0]]
        if len(direct) > 2 or len(others) != 1:
            raise Miss(f"{ln.name}: cannot tell word / position / segment embeddings apart")
        pos_g = others[0]
        position_ids = self._position_ids(pos_g, ids, walked)
        if seg_g is not None:
            self._check_segment_ids(seg_g, src[id(seg_g)], ids)
        # absorb the position-index computation where nothing else reads it
        matched = self.absorb(core, walked)
        self.check_contained(core, matched, {ln.output[0], root})
        used_outside = root in ix.graph_outputs or any(
            id(c) not in matched for c in ix.consumers.get(root, ()))
        eps = float(ix.attr(ln, "epsilon", 1e-5))
        folded = None
        if const_seg is not None:
            folded = (const_seg[0].input[0], const_seg[1])
        return EmbeddingMatch(ln, core, ids, src[id(seg_g)] if seg_g is not None else None, word_g.input[0],
                              pos_g.input[0], seg_g.input[0] if seg_g is not None else None, gamma, beta, eps,
                              ln.output[0], root if used_outside else None, folded, position_ids)

    def _norm_params(self, ln: onnx.NodeProto) -> tuple[str, str]:
        """The LayerNormalization's constant (gamma, beta); Miss unless it is the kernel's form."""
        ix = self.ix
        if len(ln.input) < 3 or not ln.input[2]:
            raise Miss(f"{ln.name}: LayerNormalization without bias")
        gamma, beta = ln.input[1], ln.input[2]
        if not (ix.is_const(gamma) and ix.is_const(beta)):
            raise Miss(f"{ln.name}: scale/bias are not constants")
        axis = int(ix.attr(ln, "axis", -1))
        if axis not in (-1, 2):
            raise Miss(f"{ln.name}: normalizes over axis {axis}, not the hidden axis")
        if len(ln.output) > 1 and any(o for o in ln.output[1:]):
            raise Miss(f"{ln.name}: mean/inv-std outputs are used")
        return gamma, beta

    def _summands(self, add: onnx.NodeProto, core: list) -> list[str]:
        """The leaves of the Add tree under the norm (its inner Adds, read by nothing else, go to core)."""
        ix = self.ix
        leaves: list[str] = []
        stack = [add]
        while stack:
            a = stack.pop()
            core.append(a)
            for x in a.input:
                sub = self.prod(x, "Add")
                if sub is not None and len(ix.consumers.get(x, ())) == 1 and x not in ix.graph_outputs:
                    stack.append(sub)
                else:
                    leaves.append(x)
        return leaves

    def _gathers(
        self, ln: onnx.NodeProto, leaves: list[str], core: list
    ) -> tuple[list[onnx.NodeProto], dict[int, tuple[int, int]]]:
        """Each summand's Gather from a table (through a float Cast) and id(Gather) -> its table's size."""
        gathers = []
        sizes: dict[int, tuple[int, int]] = {}  # id(Gather) -> its table's [rows, width]
        for leaf in leaves:
            t = leaf
            cast = self.prod(t, "Cast")
            if cast is not None and self.ix.attr(cast, "to") == onnx.TensorProto.FLOAT:
                core.append(cast)
                t = cast.input[0]
            g = self.prod(t, "Gather")
            size = self.table(g.input[0]) if g is not None else None
            if g is None or int(self.ix.attr(g, "axis", 0)) != 0 or size is None:
                raise Miss(f"{ln.name}: summand {leaf} is not a Gather from an embedding table")
            sizes[id(g)] = size
            core.append(g)
            gathers.append(g)
        hidden = {sizes[id(g)][1] for g in gathers}
        if len(hidden) != 1:
            raise Miss(f"{ln.name}: embedding tables of different widths {sorted(hidden)}")
        return gathers, sizes

    def _position_ids(self, pos_g: onnx.NodeProto, ids: str, walked: set[int]) -> str | None:
        """None when the positions are 0..S-1 (the kernel's own), else the computed position ids."""
        if self.is_arange_positions(pos_g.input[1], ids, walked):
            return None
        # Computed positions (RoBERTa: cumsum over the padding mask) go in as the kernel's position_ids,
        # which must be [batch | 1, seq] integers like the ids.
        p = pos_g.input[1]
        if self.ix.const_dtype(p) not in _INT_TYPES or self.d.rank(p) != 2 or not (
                self.d.same(("dim", p, 1), ("dim", ids, 1))
                and (self.d.same(("dim", p, 0), ("dim", ids, 0)) or self.d.canon(("dim", p, 0)) == 1)):
            raise Miss(f"{pos_g.name}: position indices are neither 0..S-1 nor [batch, seq] ids")
        return p

    def _check_segment_ids(self, seg_g: onnx.NodeProto, sid: str | None, ids: str) -> None:
        """Miss unless the segment ids are integers of the input ids' [batch, seq]."""
        if self.ix.const_dtype(sid) not in _INT_TYPES or not (
                self.d.same(("dim", sid, 0), ("dim", ids, 0))
                and self.d.same(("dim", sid, 1), ("dim", ids, 1))):
            raise Miss(f"{seg_g.name}: segment ids are not [batch, seq] like the input ids")

    def _constant_segment(self, others: list, ids: str, walked: set) -> tuple[onnx.NodeProto, int] | None:
        """Of two Gathers not indexed by an input: the one reading one constant row (the other: positions)."""
        found = []
        for g in others:
            local: set[int] = set()
            v = self.uniform_ids(g.input[1], local)
            rows = self.table(g.input[0])
            if v is not None and rows is not None and 0 <= v < rows[0]:
                found.append((g, v, local))
        if len(found) != 1:
            return None
        g, v, local = found[0]
        walked |= local
        return g, v


def find_embeddings(ctx: ScanContext) -> tuple[list[EmbeddingMatch], list[tuple[list[str], str]]]:
    """Exact embedding blocks and near misses of a GraphIndex (only LayerNormalizations fed by an Add)."""
    index = ctx.index
    f = _Finder(index, ctx.dims)
    found, misses = [], []
    for ln in index.by_op.get("LayerNormalization", ()):
        if ln.domain not in ("", "ai.onnx") or not f.looks_like_embedding(ln.input[0]):
            continue  # e.g. a residual Add + LayerNorm: SkipLayerNormalization territory
        try:
            found.append(f.match(ln))
        except Miss as exc:
            misses.append(([index.name(ln)], str(exc)))
    return found, misses


def replacement_nodes(e: EmbeddingMatch, index: Any = None) -> list[Replacement]:
    """Casts of the ids to int32 and the EmbedLayerNormalization node."""
    reps = []
    ids32 = e.output + "_input_ids_int32"
    reps.append(Replacement(inputs=[e.input_ids], attrs={"to": onnx.TensorProto.INT32}, op="Cast", domain="",
                            outputs=[ids32]))
    seg32 = ""
    if e.segment_ids:
        seg32 = e.output + "_segment_ids_int32"
        reps.append(Replacement(inputs=[e.segment_ids], attrs={"to": onnx.TensorProto.INT32}, op="Cast",
                                domain="", outputs=[seg32]))
    # onnxruntime's type inference writes output 1 (mask_index) unconditionally, so it is always named.
    outputs = [e.output, e.output + "_mask_index"] + ([e.embedding_sum] if e.embedding_sum else [])
    position = e.position
    inits: dict[str, np.ndarray] = {}
    if e.folded_segment is not None and index is not None:
        table, row = e.folded_segment
        pos = index.const_value(e.position)
        seg = index.const_value(table)
        if pos is None or seg is None:
            raise ValueError(f"{e.output}: embedding tables are not readable")
        position = e.output + "_position_plus_segment"
        inits[position] = (pos + seg[row][None, :]).astype(pos.dtype)
    extra = []
    if e.position_ids:
        pos32 = e.output + "_position_ids_int32"
        reps.append(Replacement(inputs=[e.position_ids], attrs={"to": onnx.TensorProto.INT32}, op="Cast",
                                domain="", outputs=[pos32]))
        extra = ["", pos32]  # no mask, then position_ids
    reps.append(Replacement(
        initializers=inits,
        inputs=[ids32, seg32, e.word, position, e.segment or "", e.gamma, e.beta, *extra],
        attrs={"epsilon": float(np.float32(e.epsilon))}, op="EmbedLayerNormalization", domain=MS_DOMAIN,
        outputs=outputs))
    return reps


def _find_matches(ctx: ScanContext) -> Iterator[Match | NearMiss]:
    found, misses = find_embeddings(ctx)
    for e in found:
        outs = [e.output] + ([e.embedding_sum] if e.embedding_sum else [])
        yield Match.custom(RULES[0], ctx.index, e.nodes, outs,
                           bindings={"layernorm_node": ctx.index.name(e.ln)}, payload=e)
    for nodes, reason in misses:
        yield NearMiss(RULES[0].name, tuple(nodes), reason)


RULES = [
    Rule(
        name="embed_layer_norm",
        description="word + position (+ segment) embedding Gathers + Adds + LayerNorm -> EmbedLayerNorm",
        fused_op="EmbedLayerNormalization",
        domain=MS_DOMAIN,
        runs_on=("cpu", "cuda"),
        find=_find_matches,
        replace=lambda m: replacement_nodes(m.payload, m.index),
        priority=90,
    ),
]
