"""Work every layer repeats, done once: equal nodes feeding the fused ops merged after a fusion.

Each fusion writes its own helper nodes (GroupQueryAttention's sequence lengths, a mask's row guard), and
every layer's copy reads the same inputs: the same graph input's shape, the same mask, constants of the
same value under per-layer names. Left alone, an 8-layer decoder computes them 8 times at every decode
step (onnxruntime's own common-subexpression pass compares initializers by name, not value). Here two
nodes are equal when op, domain, attributes and inputs are (a small constant input compared by value);
the later one's readers then read the earlier one's outputs. Only the work the fusions made or that only
fused work reads is merged: the rest of the graph stays as the user's export wrote it.
"""

from __future__ import annotations

from collections.abc import Iterable

import onnx

# ops whose two equal calls may give different values
_NONDETERMINISTIC = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
                     "Bernoulli", "Dropout"}
SMALL_CONSTANT = 64  # elements: a constant up to this size is compared by value


def _constant_key(t: onnx.TensorProto) -> tuple | None:
    """A small in-file initializer as its value (dtype, dims, bytes); None for others."""
    count = 1
    for d in t.dims:
        count *= d
    if t.data_location == onnx.TensorProto.EXTERNAL or count > SMALL_CONSTANT:
        return None
    try:
        arr = onnx.numpy_helper.to_array(t)
    except Exception:  # noqa: BLE001 - data that does not match its dims or type: never merged
        return None
    return ("const", t.data_type, tuple(t.dims), arr.tobytes())


def _eligible(nodes: list[onnx.NodeProto], fused: set[int], protected: set[str]) -> set[int]:
    """The fusions' own nodes, and the nodes whose every output only fused work reads (upstream, to a
    fixpoint): the work that exists for the fused ops."""
    readers: dict[str, list[int]] = {}
    for n in nodes:
        for x in n.input:
            readers.setdefault(x, []).append(id(n))
    out = set(fused)
    changed = True
    while changed:
        changed = False
        for n in reversed(nodes):
            if id(n) in out or any(o in protected for o in n.output):
                continue
            read = [r for o in n.output if o for r in readers.get(o, ())]
            if read and all(r in out for r in read):
                out.add(id(n))
                changed = True
    return out


def equal_initializers(made: Iterable[onnx.TensorProto]) -> dict[str, str]:
    """name -> the first of the same value, over the initializers the fusions wrote (each layer's rotary
    caches are one table): dtype, dims and bytes equal. The source model's initializers are left alone."""
    first: dict[tuple, str] = {}
    alias: dict[str, str] = {}
    for t in made:
        if t.data_location == onnx.TensorProto.EXTERNAL or not t.raw_data:
            continue
        key = (t.data_type, tuple(t.dims), t.raw_data)
        name = first.setdefault(key, t.name)
        if name != t.name:
            alias[t.name] = name
    return alias


def merge_shared_work(nodes: list[onnx.NodeProto], initializers: Iterable[onnx.TensorProto], fused: set[int],
                      protected: set[str], aliases: dict[str, str] | None = None
                      ) -> tuple[list[onnx.NodeProto], int]:
    """(nodes, how many were merged): in topological order, each eligible node equal to an earlier one
    dropped and its readers pointed at the earlier one's outputs. `fused`: id() of the nodes the fusions
    made; `protected`: names never renamed (graph outputs, names inner graphs read); `aliases`: fusion-made
    initializers read under another name of the same value (equal_initializers). Nodes whose inputs
    change are copies: the source model's nodes are never modified."""
    consts = {t.name: k for t in initializers if (k := _constant_key(t)) is not None}
    eligible = _eligible(nodes, fused, protected)
    rename: dict[str, str] = dict(aliases or {})
    seen: dict[tuple, onnx.NodeProto] = {}
    out: list[onnx.NodeProto] = []
    merged = 0
    for n in nodes:
        if any(x in rename for x in n.input):
            copy = onnx.NodeProto()
            copy.CopyFrom(n)
            for i, x in enumerate(copy.input):
                copy.input[i] = rename.get(x, x)
            if id(n) in eligible:
                eligible.add(id(copy))
            n = copy
        key = _key(n, consts)
        if key is None:
            out.append(n)
            continue
        first = seen.get(key)
        if first is not None and id(n) in eligible and not any(o in protected for o in n.output):
            rename.update({o: f for o, f in zip(n.output, first.output, strict=True) if o})
            merged += 1
            continue
        seen.setdefault(key, n)
        out.append(n)
    return out, merged


def _key(n: onnx.NodeProto, consts: dict[str, tuple]) -> tuple | None:
    """What makes two nodes compute the same values; None for a node that is never merged."""
    if n.op_type in _NONDETERMINISTIC or not n.output or any(
            a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in n.attribute):
        return None
    attrs = tuple(sorted((a.name, _attr_key(a)) for a in n.attribute))
    inputs = tuple(consts.get(x, x) for x in n.input)
    return (n.domain or "", n.op_type, len(n.output), attrs, inputs)


def _attr_key(a: onnx.AttributeProto) -> object:
    """An attribute's value; a tensor's by value (a Constant's tensor may carry a per-layer name)."""
    if a.type == onnx.AttributeProto.TENSOR:
        arr = onnx.numpy_helper.to_array(a.t)
        return ("tensor", a.t.data_type, tuple(a.t.dims), arr.tobytes())
    return a.SerializeToString()
