"""The forms of GroupQueryAttention fuseview emits, each alone at a decode step: what packing Q, K, V and the
model's mask as attention_bias cost in onnxruntime's kernel, apart from the rest of a decoder.

    python bench/bench_gqa_forms.py [--pasts 128 512] [--runs 300] [--sessions 5] [--threads 1]

Two graphs sets, 8 layers each at Llama real width (768 hidden, 12:4 heads of 64, do_rotary=1 with [4096, 32]
caches), one new token over a cache of each ``--pasts``, timed interleaved by fuseview's A/B timer
(runtime/ab.py, ORT_ENABLE_ALL) with 95 % intervals (stats.compare_timings), ratios to the first form:

- the projections: three MatMuls x @ Wq, x @ Wk, x @ Wv against one x @ [Wq | Wk | Wv];
- the op: query/key/value apart with the mask's bias and ``causal=0`` (the unpacked rules on a mask not
  proven causal), apart without a bias, packed (key and value omitted) without a bias (the builder's), packed
  with the bias and ``causal=0``, and with ``causal=1`` (the packed rules on a causal mask). The outputs are
  compared against the first form (a zero bias: every form computes the same).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD = 8, 768, 12, 4, 64
WIDTHS = (HEADS * HEAD, KV_HEADS * HEAD, KV_HEADS * HEAD)


def _save(nodes: list, inputs: list, outputs: list[str], inits: list, path: Path) -> str:
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None)
                                               for o in outputs], inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 9
    onnx.save(m, str(path))
    return str(path)


def projections(folder: Path, rng: np.random.Generator) -> list[tuple[str, str]]:
    """(name, model): three MatMuls per layer, and one over the joined weights."""
    x = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, HIDDEN])]
    weights = [[rng.standard_normal((HIDDEN, w)).astype(np.float32) for w in WIDTHS] for _ in range(LAYERS)]
    three = [(helper.make_node("MatMul", ["x", f"w{i}{p}"], [f"y{i}{p}"]),
              numpy_helper.from_array(w, f"w{i}{p}"))
             for i, ws in enumerate(weights) for p, w in zip("qkv", ws, strict=True)]
    one = [(helper.make_node("MatMul", ["x", f"w{i}"], [f"y{i}"]),
            numpy_helper.from_array(np.concatenate(ws, axis=1), f"w{i}")) for i, ws in enumerate(weights)]
    forms = (("three MatMuls", three), ("one packed", one))
    return [(name, _save([n for n, _ in made], x, [n.output[0] for n, _ in made], [t for _, t in made],
                         folder / f"{name.replace(' ', '_')}.onnx")) for name, made in forms]


def attention(folder: Path, past: int) -> list[tuple[str, str]]:
    """(name, model) for each GroupQueryAttention form."""
    rng = np.random.default_rng(0)
    caches = [numpy_helper.from_array(rng.standard_normal((4096, HEAD // 2)).astype(np.float32), c)
              for c in ("cos", "sin")]
    ins = [helper.make_tensor_value_info("seqlens", TensorProto.INT32, [1]),
           helper.make_tensor_value_info("total", TensorProto.INT32, []),
           helper.make_tensor_value_info("bias", TensorProto.FLOAT, [1, 1, 1, past + 1]),
           helper.make_tensor_value_info("qkv", TensorProto.FLOAT, [1, 1, sum(WIDTHS)])]
    ins += [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 1, w])
            for n, w in zip("qkv", WIDTHS, strict=True)]
    ins += [helper.make_tensor_value_info(f"{kv}{i}", TensorProto.FLOAT, [1, KV_HEADS, past, HEAD])
            for i in range(LAYERS) for kv in ("pk", "pv")]
    out = []
    forms = (("apart + bias, causal=0", False, True, 0), ("apart, no bias", False, False, 1),
             ("packed, no bias (the builder's)", True, False, 1), ("packed + bias, causal=0", True, True, 0),
             ("packed + bias, causal=1", True, True, 1))
    for name, packed, biased, causal in forms:
        nodes = []
        for i in range(LAYERS):
            qkv = ["qkv", "", ""] if packed else ["q", "k", "v"]
            attrs = {"num_heads": HEADS, "kv_num_heads": KV_HEADS, "scale": HEAD ** -0.5, "do_rotary": 1,
                     "rotary_interleaved": 0, "causal": causal}
            nodes.append(helper.make_node(
                "GroupQueryAttention", [*qkv, f"pk{i}", f"pv{i}", "seqlens", "total", "cos", "sin", "",
                                        "bias" if biased else ""],
                [f"o{i}", f"k{i}", f"v{i}"], domain="com.microsoft", **attrs))
        slug = name.split(" (")[0].replace(" ", "_").replace(",", "").replace("+", "plus").replace("=", "")
        path = folder / f"{slug}.onnx"
        out.append((name, _save(nodes, ins, [f"o{i}" for i in range(LAYERS)], caches, path)))
    return out


def attention_feeds(past: int) -> dict[str, np.ndarray]:
    """One new token over `past` cached: random heads, a zero bias (no key hidden), lengths as fuseview's."""
    rng = np.random.default_rng(1)
    f = {n: rng.standard_normal((1, 1, w)).astype(np.float32) for n, w in zip("qkv", WIDTHS, strict=True)}
    f["qkv"] = np.concatenate([f["q"], f["k"], f["v"]], axis=-1)
    f |= {"seqlens": np.array([past], np.int32), "total": np.array(past + 1, np.int32),
          "bias": np.zeros((1, 1, 1, past + 1), np.float32)}
    f |= {f"{kv}{i}": rng.standard_normal((1, KV_HEADS, past, HEAD)).astype(np.float32)
          for i in range(LAYERS) for kv in ("pk", "pv")}
    return f


def compare(label: str, models: list[tuple[str, str]], feeds: dict, args: argparse.Namespace) -> None:
    """Time the models interleaved; print medians, ratios to the first with intervals, output agreement."""
    import onnxruntime as ort

    from fuseview.runtime import ab
    from fuseview.stats import compare_timings

    outs = [ort.InferenceSession(p, providers=["CPUExecutionProvider"]).run(None, feeds) for _, p in models]
    flat = [np.concatenate([x.ravel() for x in o]) for o in outs]  # a packed output holds q | k | v
    diff = max(float(np.max(np.abs(f - flat[0]))) for f in flat[1:])
    grouped, _ = ab.time_models([p for _, p in models], feeds, opt_level="all", threads=args.threads,
                                sessions=args.sessions, runs=args.runs, warmup=20)
    print(f"{label}: outputs within {diff:.1e} of the first; load {os.getloadavg()[0]:.1f}")
    for (name, _), t in zip(models, grouped, strict=True):
        c = compare_timings(t, grouped[0])
        ratio = f"{c.speedup_p50:.3f} [{c.ci[0]:.3f}, {c.ci[1]:.3f}]"
        print(f"  {name:32s} {np.median(t):7.3f} ms  x first {ratio}", flush=True)


def main(argv: list[str] | None = None) -> int:
    """Build the graphs in a temp folder, time them, print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pasts", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--sessions", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fuseview-gqa-") as tmp:
        folder = Path(tmp)
        rng = np.random.default_rng(0)
        x = {"x": rng.standard_normal((1, 1, HIDDEN)).astype(np.float32)}
        compare(f"Q, K, V projections, {LAYERS} layers", projections(folder, rng), x, args)
        for past in args.pasts:
            compare(f"GroupQueryAttention, {LAYERS} layers, 1 new token over {past} cached",
                    attention(folder, past), attention_feeds(past), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
