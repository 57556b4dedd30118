"""Constant subgraphs: chains of ops over weights only (Transpose/Cast/Reshape/...) -> one new initializer;
and Reshape targets computed at run time (Shape -> Gather -> Unsqueeze -> Concat) -> a constant with 0/-1."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx

from fuseview.fusion.rule import ONNX_DOMAIN, Match, NearMiss, Replacement, Rule
from fuseview.fusion.toolkit import Miss, ScanContext, shape_inputs_walk

# Ops that are pure functions of their inputs and cheap to evaluate once at fuse time. Not DequantizeLinear:
# folding int8 weights back to float undoes the quantization (and the QDQ -> QLinear* fusions).
FOLDABLE = frozenset(
    {
        "Transpose",
        "Cast",
        "Reshape",
        "Squeeze",
        "Unsqueeze",
        "Identity",
        "Flatten",
        "Concat",
        "Gather",
        "Slice",
        "Expand",
        "Tile",
        "Shape",
        "Size",
        "Neg",
        "Sqrt",
        "Reciprocal",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "ConstantOfShape",
        "Range",
        "Split",
    }
)
# Ops that only relabel a tensor's shape (no arithmetic, no reordering of elements).
ALIASING = frozenset({"Identity", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})
# Ops whose output can be far larger than their inputs.
GROWING = frozenset({"Expand", "Tile", "ConstantOfShape", "Range"})
# Largest tensor constant folding may create (the result becomes an initializer in memory and on disk).
FOLD_LIMIT_BYTES = 64 << 20
# Folding only Constant-node shape arithmetic saves nothing worth a candidate; require a real weight.
MIN_WEIGHT_ELEMENTS = 64


def _find(ctx: ScanContext) -> Iterator[Match | NearMiss]:
    index = ctx.index
    const: set[str] = {t for t in index.initializers if t not in index.graph_inputs}
    weight_derived: set[str] = set()
    t = index.table  # the node fields, read from the protos once
    for op, outs in zip(t.op_types, t.outputs, strict=True):
        if op == "Constant":
            const.update(outs)
    foldable: list[onnx.NodeProto] = []
    for n, op, domain, all_ins, outs in zip(t.nodes, t.op_types, t.domains, t.inputs, t.outputs, strict=True):
        if op == "Constant" or domain not in ("", "ai.onnx") or op not in FOLDABLE:
            continue
        if not all_ins or (all_ins[0] and all_ins[0] not in const):
            continue  # most nodes: the first input is computed (checked before any list is made)
        ins = [i for i in all_ins if i]
        if ins and all(i in const for i in ins):
            const.update(o for o in outs if o)
            foldable.append(n)
            big = any(
                i in index.initializers and _elements(index.initializers[i]) >= MIN_WEIGHT_ELEMENTS
                for i in ins
            )
            if big or any(i in weight_derived for i in ins):
                weight_derived.update(o for o in outs if o)
    # Connected groups of foldable nodes that touch a weight; their outputs used elsewhere are kept.
    ids = {id(n) for n in foldable}
    parent = {id(n): id(n) for n in foldable}

    def root(k):
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for n in foldable:
        for i in index.inputs(n):
            p = index.producer.get(i)
            if p and id(p[0]) in ids:
                parent[root(id(p[0]))] = root(id(n))
    groups: dict[int, list[onnx.NodeProto]] = {}
    for n in foldable:
        groups.setdefault(root(id(n)), []).append(n)
    rule = RULES[0]
    for nodes in groups.values():
        if not any(o in weight_derived for n in nodes for o in n.output):
            continue
        if all(n.op_type in ALIASING for n in nodes):
            continue  # a view of a weight costs nothing at run time; folding it would only copy the weight
        members = {id(n) for n in nodes}
        outs = [
            o
            for n in nodes
            for o in n.output
            if o
            and (o in index.graph_outputs or any(id(c) not in members for c in index.consumers.get(o, ())))
        ]
        if not outs:
            continue
        too_big = _over_fold_limit(index, nodes)
        if too_big:
            yield NearMiss(rule.name, tuple(index.name(n) for n in nodes), too_big)
            continue
        yield Match.custom(rule, index, nodes, outs)


def _over_fold_limit(index, nodes: list[onnx.NodeProto]) -> str | None:
    """Why folding these nodes would make too big a tensor (None when every result is known and small).

    A 64-float weight through Expand/Tile/ConstantOfShape can become gigabytes; evaluating it would eat
    the machine, so a result above FOLD_LIMIT_BYTES, or of unknown size after an op that grows, is refused.
    """
    for n in nodes:
        for o in n.output:
            if not o:
                continue
            size = index.nbytes(o)
            if size is None and n.op_type in GROWING:
                return f"{n.op_type} output {o!r} has an unknown size, so it may pass the fold limit"
            if size is not None and size > FOLD_LIMIT_BYTES:
                return (
                    f"folded tensor {o!r} would take {size / 2**20:.0f} MiB, over the"
                    f" {FOLD_LIMIT_BYTES >> 20} MiB limit for constant folding"
                )
    return None


def _elements(t: onnx.TensorProto) -> int:
    return int(np.prod(t.dims, dtype=np.int64)) if t.dims else 1


def _replace(m: Match) -> Replacement:
    """Evaluate the group once with the reference evaluator; its kept outputs become initializers."""
    from onnx.reference import ReferenceEvaluator

    index = m.index
    nodes = m.node_list
    produced = {o for n in nodes for o in n.output}
    needed = [i for n in nodes for i in n.input if i and i not in produced]
    inits = []
    extra_nodes = []
    for name in dict.fromkeys(needed):
        if name in index.initializers:
            t = onnx.TensorProto()
            t.CopyFrom(index.initializers[name])
            if t.data_location == onnx.TensorProto.EXTERNAL:
                t = onnx.numpy_helper.from_array(index.const_value(name), name)
            inits.append(t)
        else:
            extra_nodes.append(index.producer[name][0])
    g = onnx.helper.make_graph(
        extra_nodes + nodes,
        "fold",
        [],
        [onnx.helper.make_value_info(o, onnx.TypeProto()) for o in m.outputs],
        inits,
    )
    model = onnx.helper.make_model(
        g, opset_imports=list(index.model.opset_import), ir_version=index.model.ir_version
    )
    values = ReferenceEvaluator(model).run(None, {})
    return Replacement(
        [], op="", initializers={o: np.asarray(v) for o, v in zip(m.outputs, values, strict=False)}
    )


# ------------------------------------------------------------------------------------- shape chains
def constant_target(m: Any, reshape: onnx.NodeProto, walked: set[int]) -> list[int] | None:
    """A constant Reshape target equal to the computed one for every input shape, or None.

    Each element of the computed vector must be a positive constant, the data input's own dim at that
    position (-> 0, copied by Reshape), or the one element left (-> -1, fixed by the element count, since
    every other element is the original's). Empty tensors (a 0 dim) are the exception -1 cannot express.
    """
    vec = m.d.vec(reshape.input[1], walked)
    if vec is None:
        return None
    allow0 = not m.ix.attr(reshape, "allowzero", 0)
    data = reshape.input[0]
    rank = m.d.rank(data)
    target: list[int] = []
    free = 0
    for j, e in enumerate(vec):
        ce = m.d.canon(e) if isinstance(e, tuple) else e
        if isinstance(ce, int) and ce > 0:
            target.append(ce)
        elif isinstance(ce, int) and ce == 0 and allow0:
            target.append(0)
        elif allow0 and rank is not None and j < rank and m.d.same(ce, ("dim", data, j)):
            target.append(0)
        elif (ce == -1 or not isinstance(ce, int)) and not free:
            free = 1
            target.append(-1)
        else:
            return None  # a negative size, or a second free element: no element after it can help
    return target


def _find_shape_chains(ctx: ScanContext) -> Iterator[Match]:
    index, m = ctx.index, ctx.structure
    # Reshapes inside an attention match go with it (and skipping them keeps big scans fast).
    in_attention = {id(n) for a in ctx.result("attention_mha") for n in a.nodes}
    for r in index.by_op.get("Reshape", ()):
        if r.domain not in ("", "ai.onnx") or len(r.input) < 2 or index.is_const(r.input[1]):
            continue
        if id(r) in in_attention:
            continue
        target = constant_target(m, r, set())
        if target is None:
            continue
        shape_ids: set[int] = set()
        shape_inputs_walk(m, r.input[1], shape_ids)
        nodes = [r]
        matched = m.absorb(nodes, shape_ids)
        if len(nodes) == 1:
            continue  # the chain is shared with other nodes: folding this one target removes nothing
        try:
            m.check_contained(nodes, matched, {r.output[0]})
        except Miss:
            continue
        yield Match.custom(RULES[1], index, nodes, [r.output[0]], bindings={"reshape_node": index.name(r)},
                           payload=(index.name(r), target))


def _replace_shape_chain(m: Match) -> Replacement:
    name, target = m.payload
    r = next(n for n in m.node_list if n.op_type == "Reshape" and m.index.name(n) == name)
    const = r.output[0] + "_target"
    return Replacement(
        [r.input[0], const],
        op="Reshape",
        domain="",
        outputs=[r.output[0]],
        initializers={const: np.array(target, np.int64)},
    )


def _find_copies(ctx: ScanContext) -> Iterator[Match]:
    """Concats of one input: a copy of it (TorchScript's cat of a one-tensor list, e.g. transformers 5's
    cache length read from the first layer's past), which onnxruntime runs as a memcpy every step."""
    index = ctx.index
    for n in index.by_op.get("Concat", ()):
        if n.domain in ("", "ai.onnx") and len(n.input) == 1 and n.input[0] and n.output[0]:
            yield Match.custom(RULES[2], index, [n], [n.output[0]], bindings={"concat": index.name(n)},
                               payload=n.input[0])


RULES = [
    Rule(
        name="fold_constants",
        description="ops computed from weights only (Transpose/Cast/Reshape/...) -> initializer",
        fused_op="initializer",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda", "reference"),
        find=_find,
        replace=_replace,
        priority=0,
    ),
    Rule(
        name="shape_chain",
        description="Reshape target computed by Shape/Gather/Unsqueeze/Concat -> constant with 0 and -1",
        fused_op="Reshape",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda", "reference"),
        find=_find_shape_chains,
        replace=_replace_shape_chain,
        requires=("attention_mha",),
        priority=1,
    ),
    Rule(
        name="copy_concat",
        description="Concat of one input (a copy of it) -> Identity, which onnxruntime removes",
        fused_op="Identity",
        domain=ONNX_DOMAIN,
        runs_on=("cpu", "cuda", "reference"),
        find=_find_copies,
        replace=lambda m: Replacement([m.payload], op="Identity", domain="", outputs=list(m.outputs)),
        priority=0,
    ),
]
