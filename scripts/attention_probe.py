"""Explore the attention rule: count matches, apply them, compare with onnxruntime on three mask layouts.

    python scripts/attention_probe.py [--bench] [MODEL.onnx ...]

Prints per model: matches, near misses, match time, and max |diff| of every output versus the original for an
all-ones mask, a right-padded mask and a left-padded mask (onnxruntime CPU, graph optimizations disabled).
With --bench also the median run time of original and attention-fused model (batch 1, sequence 128, one
intra-op thread, runs interleaved so machine load hits both alike).

Requires: numpy, onnx, onnxruntime, fuseview
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import numpy as np
import onnx
import onnx.numpy_helper
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fuseview.fusion.graphindex import GraphIndex  # noqa: E402
from fuseview.fusion.rules.attention_mha import find_attention, replacement_nodes  # noqa: E402
from fuseview.fusion.toolkit import ScanContext  # noqa: E402

DEFAULT = [
    "/work/shared/models/gpt2_12l_ts13.onnx", "/work/shared/models/gpt2_12l_ts17.onnx",
    "/work/shared/models/gpt2_12l_dynamo.onnx", "assets/models/bert_2l_ts13.onnx",
    "assets/models/bert_2l_ts17.onnx", "assets/models/llama_2l_ts17.onnx",
    "assets/models/llama_2l_gqa_ts17.onnx",
]


def apply_matches(model: onnx.ModelProto, matches: list) -> onnx.ModelProto:
    """Replace each match by its MultiHeadAttention nodes (a minimal stand-in for the engine's apply)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    pos = {id(n): i for i, n in enumerate(model.graph.node)}
    drop: set[int] = set()
    insert: dict[int, list[onnx.NodeProto]] = {}
    removed_tensors: set[str] = set()
    for k, a in enumerate(matches):
        idx = [pos[id(n)] for n in a.nodes]
        drop.update(idx)
        removed_tensors.update(o for n in a.nodes for o in n.output)
        new = []
        for j, r in enumerate(replacement_nodes(a)):
            for name, value in r.initializers.items():
                g.initializer.append(onnx.numpy_helper.from_array(value, name))
            new.append(onnx.helper.make_node(r.op, r.inputs, r.outputs, name=f"fused_attention_{k}_{j}",
                                             domain=r.domain, **r.attrs))
        insert.setdefault(max(idx), []).extend(new)
    nodes = []
    for i, n in enumerate(model.graph.node):
        if i not in drop:
            nodes.append(n)
        nodes.extend(insert.get(i, []))
    del g.node[:]
    g.node.extend(nodes)
    keep_vi = [v for v in g.value_info if v.name not in removed_tensors]
    del g.value_info[:]
    g.value_info.extend(keep_vi)
    if not any(o.domain == "com.microsoft" for o in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return out


def feeds(model: onnx.ModelProto, batch: int, seq: int, pad: str) -> dict[str, np.ndarray]:
    """Token ids, token types and a mask: 'ones', 'right' (last row padded by 3) or 'left'."""
    rng = np.random.default_rng(0)
    mask = np.ones((batch, seq), np.int64)
    if pad == "right":
        mask[-1, -3:] = 0
    elif pad == "left":
        mask[-1, :3] = 0
    out = {}
    for i in model.graph.input:
        if i.name == "attention_mask":
            out[i.name] = mask
        elif "type" in i.name:
            out[i.name] = np.zeros((batch, seq), np.int64)
        elif "position" in i.name:
            out[i.name] = np.tile(np.arange(seq, dtype=np.int64), (batch, 1))
        else:
            out[i.name] = rng.integers(0, 1000, (batch, seq), dtype=np.int64)
    return out


def session(model: onnx.ModelProto) -> ort.InferenceSession:
    """CPU session with onnxruntime's own graph optimizations disabled."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def bench(model: onnx.ModelProto, fused: onnx.ModelProto, runs: int = 15) -> str:
    """Median run times of original and fused, interleaved, one intra-op thread."""
    sessions = []
    for m in (model, fused):
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        so.log_severity_level = 3
        so.intra_op_num_threads = 1
        sessions.append(ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]))
    f = feeds(model, 1, 128, "ones")
    times: list[list[float]] = [[], []]
    for s in sessions:
        s.run(None, f)
    for _ in range(runs):
        for k, s in enumerate(sessions):
            t = time.perf_counter()
            s.run(None, f)
            times[k].append(time.perf_counter() - t)
    a, b = (1000 * float(np.median(t)) for t in times)
    return f"  run (batch 1, seq 128, 1 thread): original {a:.1f} ms, attention-fused {b:.1f} ms"


def main(paths: list[str], do_bench: bool = False) -> None:
    for p in paths:
        model = onnx.load(p)
        t0 = time.perf_counter()
        index = GraphIndex(model)
        t1 = time.perf_counter()
        found, misses = find_attention(ScanContext(index))
        t2 = time.perf_counter()
        print(f"{Path(p).name}: {len(found)} attention matches, {len(misses)} near misses "
              f"(index {1000 * (t1 - t0):.0f} ms, match {1000 * (t2 - t1):.1f} ms)")
        for names, reason in misses[:3]:
            print(f"  near miss {names[0]}: {reason}")
        if not found:
            continue
        fused = apply_matches(model, found)
        onnx.checker.check_model(fused)
        ops = [n.op_type for n in fused.graph.node]
        print(f"  nodes {len(model.graph.node)} -> {len(ops)}, "
              f"MultiHeadAttention x{ops.count('MultiHeadAttention')}, Softmax left {ops.count('Softmax')}")
        s0, s1 = session(model), session(fused)
        for pad in ("ones", "right", "left"):
            f = feeds(model, 3, 11, pad)
            r0, r1 = s0.run(None, f), s1.run(None, f)
            diffs = [float(np.max(np.abs(a - b))) for a, b in zip(r0, r1, strict=True)]
            print(f"  mask {pad:5s}: max|diff| per output {[f'{x:.2e}' for x in diffs]}")
        if do_bench:
            print(bench(model, fused))


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--bench"]
    main(args or DEFAULT, "--bench" in sys.argv[1:])
