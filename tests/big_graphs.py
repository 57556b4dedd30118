"""Big graphs of cheap nodes for the open-time tests and bench/bench_open.py (made here, never committed)."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

KINDS = ("chain", "wide", "scoped", "silu")


def big_model(nodes: int, kind: str = "chain", width: int = 100) -> onnx.ModelProto:
    """`nodes` Relu/Neg nodes without name scopes: one chain (chain), `width` chains side by side summed at
    the end (wide), or one chain named /block{i // 100}/op{i % 100} (scoped: what exporters write); silu:
    a chain of x·Sigmoid(x) pairs (Sigmoid, Mul), each a quick_gelu fusion candidate."""
    if kind not in KINDS:
        raise ValueError(f"{kind!r}: one of {', '.join(KINDS)}")
    made: list[onnx.NodeProto] = []
    if kind == "wide":
        per = max(1, (nodes - 1) // width)
        ends = []
        for j in range(width):
            x = "x"
            for i in range(per):
                out = f"c{j}_{i}"
                made.append(helper.make_node("Relu" if i % 2 == 0 else "Neg", [x], [out], name=f"r{j}_{i}"))
                x = out
            ends.append(x)
        made.append(helper.make_node("Sum", ends, ["y"], name="sum"))
    elif kind == "silu":
        x = "x"
        for i in range(nodes // 2):
            out = "y" if i == nodes // 2 - 1 else f"t{i}"
            made += [helper.make_node("Sigmoid", [x], [f"s{i}"], name=f"sig{i}"),
                     helper.make_node("Mul", [x, f"s{i}"], [out], name=f"mul{i}")]
            x = out
    else:
        x = "x"
        for i in range(nodes):
            out = "y" if i == nodes - 1 else f"t{i}"
            name = f"/block{i // 100}/op{i % 100}" if kind == "scoped" else f"n{i}"
            made.append(helper.make_node("Relu" if i % 2 == 0 else "Neg", [x], [out], name=name))
            x = out
    graph = helper.make_graph(made, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def write_big_model(folder: Path, nodes: int, kind: str = "chain") -> Path:
    """big_model saved as folder/{kind}{nodes}.onnx (the path)."""
    path = Path(folder) / f"{kind}{nodes}.onnx"
    onnx.save(big_model(nodes, kind), path)
    return path
