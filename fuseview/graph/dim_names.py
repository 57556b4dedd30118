"""Shapes onnx's inference leaves unknown or names `unk__N`, written with the model's own dim names.

onnx's inference stops at custom-domain ops (a fused model's com.microsoft nodes) and at shape arithmetic
(TorchScript's Shape -> Gather -> Concat -> Reshape), where it invents `unk__35`. fuseview's concrete
propagation (graph/shapes.py) follows both. Run twice, with the model's symbolic input dims set to two
different sets of numbers, each dim that follows one input dim in both runs is that dim's name (`seq`),
one that is the same number in both is that number, and c·a·b products read `batch*seq`, `12*seq`.
No weights are read: initializers give their dims, Constant nodes their small integer values.
"""

from __future__ import annotations

import re

import onnx

from fuseview.graph.document import Dim

_UNK = re.compile(r"unk__\d+")
# values the symbolic dims take in the two runs: distinct primes, unlike the model's own sizes
_RUN_A = (7, 11, 13, 17, 19, 23, 29, 31)
_RUN_B = (37, 41, 43, 47, 53, 59, 61, 67)

Types = dict[str, tuple[str | None, tuple[Dim, ...] | None]]


def unknown_shape(shape: tuple[Dim, ...] | None) -> bool:
    """True when a shape, or one of its dims, is unknown (None, or a name onnx made up: unk__N)."""
    return shape is None or any(d is None or (isinstance(d, str) and _UNK.fullmatch(d)) for d in shape)


def _name(a: int, b: int, va: dict[str, int], vb: dict[str, int]) -> Dim:
    """The dim that is `a` in run A and `b` in run B: a number, a symbol, or c·s·t of symbols."""
    if a == b:
        return a
    for s in va:
        if a == va[s] and b == vb[s]:
            return s
    for s in va:
        if a % va[s] == 0 and b % vb[s] == 0 and a // va[s] == b // vb[s]:
            return f"{a // va[s]}*{s}"
    for s in va:
        for t in va:
            if s < t and a == va[s] * va[t] and b == vb[s] * vb[t]:
                return f"{s}*{t}"
    return None


def name_dims(g: onnx.GraphProto, types: Types) -> int:
    """Fill in `types` (name -> (dtype, shape)) where onnx left a shape unknown; returns how many changed."""
    from fuseview.graph.seeds import constant_seeds
    from fuseview.graph.shapes import propagate
    from fuseview.graph.table import NodeTable

    inputs = [vi.name for vi in g.input]
    symbols: list[str] = []
    for name in inputs:
        for d in (types.get(name, (None, None))[1] or ()):
            if isinstance(d, str) and d not in symbols:
                symbols.append(d)
    outputs = [o for n in g.node for o in n.output if o]
    if len(symbols) > len(_RUN_A) or not any(unknown_shape(types.get(o, (None, None))[1]) for o in outputs):
        return 0
    const_shapes, values = constant_seeds(g)
    known: dict[str, list[int]] = {}
    for k, (_, s) in types.items():
        if (numbers := _concrete(s, {})) is not None:
            known[k] = numbers
    runs = []
    table = NodeTable.of(g)  # both runs walk the same nodes
    for primes in (_RUN_A, _RUN_B):
        value = dict(zip(symbols, primes, strict=False))
        start = dict(const_shapes)
        # every shape already written in the inputs' symbols (inputs, borrowed types) starts known
        for name, (_, shape) in types.items():
            if (concrete := _concrete(shape, value)) is not None:
                start[name] = concrete
        runs.append((value, propagate(g, start, values, known, table)))
    (va, sa), (vb, sb) = runs
    changed = 0
    for o in outputs:
        dtype, old = types.get(o, (None, None))
        if not unknown_shape(old) or o not in sa or o not in sb or len(sa[o]) != len(sb[o]):
            continue
        named = tuple(_name(int(x), int(y), va, vb) for x, y in zip(sa[o], sb[o], strict=True))
        if old is not None and len(old) == len(named):  # keep what onnx knew where we know less
            named = tuple(o_d if (n_d is None and not (isinstance(o_d, str) and _UNK.fullmatch(o_d)))
                          else n_d for o_d, n_d in zip(old, named, strict=True))
        if named != old:
            types[o] = (dtype, named)
            changed += 1
    return changed


def _concrete(shape: tuple[Dim, ...] | None, value: dict[str, int]) -> list[int] | None:
    """The shape in numbers, each symbol given its `value`; None if it is unknown or has another dim."""
    if shape is None:
        return None
    out: list[int] = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
        elif isinstance(d, str) and d in value:
            out.append(value[d])
        else:
            return None
    return out


def borrow_types(g: onnx.GraphProto, types: Types, reference: Types) -> int:
    """Give each node output the reference graph's type of its name where this graph knows less.

    A fused model's nodes write the original's tensors (that is how validation compares them), so their
    outputs have the original's dtype and shape even where no inference understands the fused op.
    """
    changed = 0
    for n in g.node:
        for o in n.output:
            ref = reference.get(o)
            if not o or ref is None:
                continue
            dtype, shape = types.get(o, (None, None))
            new = (dtype or ref[0], ref[1] if unknown_shape(shape) and not unknown_shape(ref[1]) else shape)
            if new != (dtype, shape):
                types[o] = new
                changed += 1
    return changed


# ONNX ops whose first output has their first input's element type (onnx's inference gives it too, but
# not after a custom-domain op it does not know, whose output type comes from the reference instead)
_SAME_TYPE = frozenset({
    "Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten",
    "Expand", "Slice", "Concat", "Split", "Softmax", "Relu", "Gelu", "Tanh", "Sigmoid", "Erf", "Sqrt",
    "Identity", "Neg", "Pow", "LayerNormalization", "Dropout", "Where",
})


def carry_dtypes(g: onnx.GraphProto, types: Types) -> int:
    """Give outputs of type-preserving ONNX ops their first input's dtype where it is still unknown."""
    changed = 0
    for n in g.node:
        if n.domain not in ("", "ai.onnx") or n.op_type not in _SAME_TYPE or not n.input:
            continue
        first = n.input[1] if n.op_type == "Where" and len(n.input) > 1 else n.input[0]  # Where: X
        src = types.get(first, (None, None))[0]
        for o in n.output[:1]:
            dtype, shape = types.get(o, (None, None))
            if o and dtype is None and src is not None:
                types[o] = (src, shape)
                changed += 1
    return changed
