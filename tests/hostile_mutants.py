"""Seeded mutants of a small MLP model: byte-level ones, and structural ones that parse."""

from __future__ import annotations

import random

from onnx import helper

from tests.hostile_cases import mlp

BYTE_MUTATIONS = ("flip", "truncate", "splice")


def mutate_bytes(rng: random.Random, data: bytearray, how: str) -> bytearray:
    """data with a seeded flip of a few bits, a truncation, or a copy of one stretch spliced in."""
    if how == "flip":
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif how == "truncate":
        data = data[: rng.randrange(1, len(data))]
    else:
        a, b = sorted(rng.randrange(len(data)) for _ in range(2))
        data[a:a] = data[a:b]
    return data


def mutants(seed: int, count: int) -> list[tuple[str, bytes]]:
    """Seeded byte-level mutations of the MLP model: flips, truncations, insertions, splices."""
    rng = random.Random(seed)
    base = mlp(seed).SerializeToString()
    out = []
    for k in range(count):
        data = bytearray(base)
        how = rng.choice(["flip", "truncate", "insert", "splice", "varint"])
        if how in BYTE_MUTATIONS:
            data = mutate_bytes(rng, data, how)
        elif how == "insert":
            pos = rng.randrange(len(data))
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
        else:  # a huge length prefix
            pos = rng.randrange(len(data))
            data[pos : pos + 1] = b"\xff\xff\xff\xff\x0f"
        out.append((f"mutant_{seed}_{k}_{how}", bytes(data)))
    return out


_OPS = [
    "Relu",
    "Add",
    "MatMul",
    "Gemm",
    "Softmax",
    "Reshape",
    "Gather",
    "Concat",
    "Conv",
    "If",
    "Loop",
    "LayerNormalization",
    "Expand",
    "Tile",
    "Range",
    "Identity",
    "Split",
    "NoSuchOp",
]


def proto_mutants(seed: int, count: int) -> list[tuple[str, bytes]]:
    """Seeded structural mutations of the MLP model that still parse: ops, wiring, dims, types, opsets."""
    rng = random.Random(seed * 7919 + 1)
    out = []
    for k in range(count):
        m = mlp(seed)
        g = m.graph
        how = rng.choice(["op", "input", "rename", "dim", "dup", "drop", "opset", "dtype", "raw", "attr"])
        node = g.node[rng.randrange(len(g.node))]
        if how == "op":
            node.op_type = rng.choice(_OPS)
        elif how == "input" and node.input:
            del node.input[rng.randrange(len(node.input))]
        elif how == "rename":
            node.output[0] = rng.choice(["x", "w1", "y", "", "h1", "r1"])
        elif how == "dim":
            vi = rng.choice([g.input[0], g.output[0]])
            vi.type.tensor_type.shape.dim[rng.randrange(2)].dim_value = rng.choice([0, 1 << 31, 7, 1 << 40])
        elif how == "dup":
            g.node.append(node)
        elif how == "drop":
            g.node.remove(node)
        elif how == "opset":
            m.opset_import[0].version = rng.choice([1, 6, 12, 25, 100])
        elif how == "dtype":
            g.initializer[rng.randrange(len(g.initializer))].data_type = rng.choice([0, 2, 7, 8, 16, 99])
        elif how == "raw":
            t = g.initializer[rng.randrange(len(g.initializer))]
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) or 1)]
        else:
            node.attribute.append(
                helper.make_attribute(
                    rng.choice(["axis", "alpha", "transA"]), rng.choice([5, -9, 1e30, "s", [1, 2]])
                )
            )
        out.append((f"proto_{seed}_{k}_{how}", m.SerializeToString()))
    return out
