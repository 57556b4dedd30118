"""Load for the A/B tests and bench/bench_verdict.py: busy loops beside them, models of known work."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def matmul_chain(path: Path, products: int, width: int = 192) -> Path:
    """x @ W1 @ W2 ... (`products` matrix products): the same shapes, work proportional to `products`."""
    rng = np.random.default_rng(0)
    names = ["x"] + [f"h{i}" for i in range(1, products)] + ["y"]
    steps = list(zip(names, names[1:], strict=False))
    nodes = [helper.make_node("MatMul", [a, f"w{i}"], [b]) for i, (a, b) in enumerate(steps)]
    inits = [numpy_helper.from_array((rng.standard_normal((width, width)) / width).astype(np.float32),
                                     f"w{i}") for i in range(products)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, width])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, width])
    g = helper.make_graph(nodes, "chain", [x], [y], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path


@contextmanager
def busy_loops(n: int = 2) -> Iterator[None]:
    """n CPU-bound Python processes beside the test, killed (by their own pids) when it ends."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()
