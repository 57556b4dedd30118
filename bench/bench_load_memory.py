"""Peak memory of opening a model whose weights live in gigabytes of external data.

fuseview reads the graph and never the weights to show it, so opening a model with GiBs of weights
should cost about what opening its graph alone costs. Prints peak RSS of a fresh process for: python +
imports only, fuseview's load_document + flat layout, and onnx.load with external data (what a viewer
that reads weights pays).

    python bench/bench_load_memory.py [--gib 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
from onnx import TensorProto, helper

_CHILD = r"""
import resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
t = time.perf_counter()
import onnx
from fuseview.graph.loader import load_document
if mode == "fuseview":
    doc = load_document(path)
    try:
        from fuseview.graph.layout import layout_graph
        layout_graph(doc.graph)
    except ImportError:
        pass
elif mode == "onnx-with-weights":
    onnx.load(path, load_external_data=True)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, time.perf_counter() - t)
"""


def make_model(folder: Path, gib: float, layers: int = 16) -> Path:
    """A chain of MatMuls whose weights (gib GiB in all) sit in one sparse external file."""
    side = int(((gib * 2**30) / layers / 4) ** 0.5)
    nbytes = side * side * 4
    data = folder / "weights.bin"
    with open(data, "wb") as f:
        f.truncate(nbytes * layers)  # sparse: costs no disk, reads back as zeros
    nodes, inits = [], []
    prev = "x"
    for i in range(layers):
        w = TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[side, side])
        w.data_location = TensorProto.EXTERNAL
        for k, v in (("location", data.name), ("offset", str(i * nbytes)), ("length", str(nbytes))):
            w.external_data.add(key=k, value=v)
        inits.append(w)
        out = "y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [out], name=f"/block.{i}/MatMul"))
        prev = out
    g = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, side])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, side])],
        initializer=inits,
    )
    path = folder / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def peak(mode: str, path: Path) -> tuple[float, float]:
    """(peak RSS MiB, seconds) of a fresh process doing `mode`."""
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path)], capture_output=True, text=True, check=True
    )
    rss, secs = out.stdout.split()
    return float(rss), float(secs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=2.0, help="size of the external weights")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = make_model(Path(tmp), args.gib)
        base, _ = peak("baseline", path)
        fv, fv_s = peak("fuseview", path)
        full, full_s = peak("onnx-with-weights", path)
    print(f"external weights         {args.gib:.1f} GiB")
    print(f"python + imports         {base:8.0f} MiB peak RSS")
    print(f"fuseview open + layout   {fv:8.0f} MiB peak RSS  ({fv - base:+.0f} MiB, {fv_s:.2f} s)")
    print(f"onnx.load with weights   {full:8.0f} MiB peak RSS  ({full - base:+.0f} MiB, {full_s:.2f} s)")
    result = {"gib": args.gib, "baseline_mib": base, "fuseview_mib": fv, "onnx_load_weights_mib": full}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
