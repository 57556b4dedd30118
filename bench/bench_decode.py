"""A Llama's decode step and prefill: original torch export, fuseview-fused, onnxruntime-genai's builder.

    python bench/bench_decode.py [--narrow] [--exporter torchscript|dynamo] [--work DIR] [--threads 1 2]
        [--runs 20] [--pasts 128 512]
        [--export-python /work/venvs/decoders/bin/python] [--genai-python /work/venvs/genai/bin/python]

One seeded Llama (768 hidden, 8 layers, 12:4 grouped-query heads, rotary, intermediate 2048, random weights;
``--narrow``: 64 hidden, 2 layers, 4:2 heads, for a quick run) is saved with ``save_pretrained`` and
exported by torch.onnx (TorchScript or ``--exporter dynamo``, with a KV cache, scripts/_export_builders.py)
in a python that has torch and transformers (``--export-python``); onnxruntime-genai's model builder
(``python -m onnxruntime_genai.models.builder -i HF -o OUT -p fp32 -e cpu``, in ``--genai-python``) builds
its model from the same folder, so both have the same weights (the bench checks their logits agree).
``fuseview fuse`` fuses the torch export. onnxruntime.transformers.optimizer has no model type for Llama,
so it is not timed.

Timed, at onnxruntime's ORT_ENABLE_ALL on CPU, for each thread count: the decode step (1 new token over a
cache of each ``--pasts`` length) and a 32-token prefill (no cache). The models' sessions run interleaved
round by round (fuseview.runtime.ab.time_models, the A/B timer of ``profile --against`` and ``tune``) and
each ratio comes with fuseview.stats.compare_timings' 95 % interval. A ratio below 1: the first model is
faster. The machine's load average is printed with the figures: compare ratios, not absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuseview.atomic import write_text_atomic  # noqa: E402 - after the checkout is on the path

# Run by --export-python: build the model, save it for the builder, export it with a KV cache.
_EXPORT = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import _export_builders as b
width, work, exporter = sys.argv[2], Path(sys.argv[3]), sys.argv[4]
name = "llama_torch" if exporter == "torchscript" else f"llama_{exporter}"
spec = b.Spec(name, "llama", exporter, 17 if exporter == "torchscript" else None, True)
model, cfg = b.build(spec, width)
model.lm.save_pretrained(work / "hf")
# the builder reads a tokenizer too: a word-level one over the model's vocabulary (never used to run)
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast
vocab = {f"t{i}": i for i in range(cfg.vocab_size)}
tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1", eos_token="t2")
fast.save_pretrained(work / "hf")
entry = b.export_one(spec, width, work)
print(json.dumps({"layers": cfg.num_hidden_layers, "kv_heads": cfg.num_key_value_heads,
                  "head_dim": cfg.hidden_size // cfg.num_attention_heads, "vocab": cfg.vocab_size,
                  "bytes": entry["bytes"]}))
"""


def _run(cmd: list[str], what: str) -> str:
    """Run a step; exit with its stderr's tail when it fails."""
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if p.returncode != 0:
        sys.exit(f"bench_decode: {what} failed:\n{(p.stderr or p.stdout)[-3000:]}")
    print(f"{what}: {time.perf_counter() - t0:.1f} s", flush=True)
    return p.stdout


def build_models(args: argparse.Namespace, work: Path) -> tuple[dict, dict[str, Path]]:
    """Export, build and fuse; (model facts, name -> model file)."""
    width = "narrow" if args.narrow else "real"
    out = _run([args.export_python, "-c", _EXPORT, str(ROOT / "scripts"), width, str(work), args.exporter],
               f"torch export ({args.exporter}, KV cache)")
    facts = json.loads(out.strip().splitlines()[-1])
    write_text_atomic(work / "facts.json", json.dumps(facts) + "\n")
    _run([args.genai_python, "-m", "onnxruntime_genai.models.builder", "-i", str(work / "hf"), "-o",
          str(work / "builder"), "-p", "fp32", "-e", "cpu", "-c", str(work / "cache")],
         "onnxruntime-genai builder (fp32, cpu)")
    models = model_paths(args, work)
    _run([sys.executable, "-m", "fuseview", "fuse", str(models["original"]), "-o", str(models["fused"])],
         "fuseview fuse (no --dim)")
    return facts, models


def model_paths(args: argparse.Namespace, work: Path) -> dict[str, Path]:
    """Where the export, its fused model and the builder's model are in --work."""
    torchscript = args.exporter == "torchscript"
    original = work / ("llama_torch.onnx" if torchscript else f"llama_{args.exporter}.onnx")
    fused = work / ("fused.onnx" if torchscript else f"fused_{args.exporter}.onnx")
    return {"original": original, "fused": fused, "builder": work / "builder" / "model.onnx"}


def feeds_for(path: Path, facts: dict, past: int, new: int, seed: int = 0) -> dict[str, np.ndarray]:
    """The model's own inputs for `new` tokens over a cache of `past`: ids, a mask of ones, positions and
    cached keys/values ~ N(0, 1) (the same numbers for every model, by input name)."""
    import onnx

    rng = np.random.default_rng(seed)
    ids = rng.integers(0, facts["vocab"], size=(1, new), dtype=np.int64)
    kv = [rng.standard_normal((1, facts["kv_heads"], past, facts["head_dim"])).astype(np.float32)
          for _ in range(2 * facts["layers"])]
    feeds: dict[str, np.ndarray] = {}
    for vi in onnx.load(str(path), load_external_data=False).graph.input:
        name = vi.name
        int32 = vi.type.tensor_type.elem_type == onnx.TensorProto.INT32
        if name == "input_ids":
            x = ids
        elif name == "attention_mask":
            x = np.ones((1, past + new), np.int64)
        elif name == "position_ids":
            x = np.arange(past, past + new, dtype=np.int64)[None, :]
        elif name.startswith("past_key_values."):
            i, which = name.split(".")[1:3]
            x = kv[2 * int(i) + (which == "value")]
        else:
            raise SystemExit(f"bench_decode: {path.name} has an input it does not know: {name}")
        feeds[name] = x.astype(np.int32) if int32 else x
    return feeds


def logits_agree(models: dict[str, Path], facts: dict) -> str:
    """Max |logits| difference of each model against the original at past 16 + 1 new token."""
    import onnxruntime as ort

    out = {}
    for name, path in models.items():
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        out[name] = sess.run(["logits"], feeds_for(path, facts, 16, 1))[0]
    diffs = {n: float(np.max(np.abs(out[n] - out["original"]))) for n in out if n != "original"}
    return ", ".join(f"{n} {d:.1e}" for n, d in diffs.items())


def time_case(models: dict[str, Path], facts: dict, past: int, new: int, threads: int, runs: int,
              sessions: int = 3) -> dict:
    """Interleaved times of every model on one shape; medians and ratios with intervals."""
    from fuseview.stats import compare_timings

    names = list(models)
    per_model = {n: feeds_for(models[n], facts, past, new) for n in names}
    times = _interleaved(models, per_model, threads, runs, sessions)
    row = {"past": past, "new": new, "threads": threads,
           "median_ms": {n: float(np.median(times[n])) for n in names}}
    pairs = [("fused", "original"), ("fused", "builder"), ("original", "builder")]
    more = [n for n in names if n not in ("original", "fused", "builder")]
    pairs += [p for n in more for p in ((n, "original"), ("fused", n))]
    row["ratios"] = {f"{a}/{b}": compare_timings(times[a], times[b]).to_json() for a, b in pairs
                     if a in times and b in times}
    return row


def _interleaved(models: dict[str, Path], feeds: dict[str, dict], threads: int, runs: int, sessions: int
                 ) -> dict[str, np.ndarray]:
    """time_models on the union of the models' inputs (the same names, dtypes and shapes in every model
    here, checked): one (sessions x runs) array a model."""
    from fuseview.runtime import ab

    names = list(models)
    out: dict[str, np.ndarray] = {}
    union: dict[str, np.ndarray] = {}
    for f in feeds.values():
        for k, v in f.items():
            if union.setdefault(k, v).dtype != v.dtype or union[k].shape != v.shape:
                raise SystemExit(f"bench_decode: the models disagree on input {k}")
    grouped, _choices = ab.time_models([str(models[n]) for n in names], union, opt_level="all",
                                       threads=threads, sessions=sessions, runs=runs, warmup=3)
    for n, g in zip(names, grouped, strict=True):
        out[n] = g
    return out


def profile_ops(models: dict[str, Path], facts: dict, past: int, runs: int, top: int = 8) -> None:
    """onnxruntime's node-by-node profile of each model's decode step (1 thread, ORT_ENABLE_ALL), summed by
    op type: where the time goes, and which op types the fused model spends more on than the builder."""
    from fuseview.runtime.profiling import profile_model

    by_type: dict[str, dict[str, tuple[int, float]]] = {}
    for name, path in models.items():
        r = profile_model(str(path), feeds_for(path, facts, past, 1), opt_level="all", runs=runs, threads=1)
        by_type[name] = {o["op_type"]: (o["nodes"], o["mean_us"]) for o in r["op_types"]}
        total = sum(us for _n, us in by_type[name].values())
        rows = sorted(by_type[name].items(), key=lambda kv: -kv[1][1])[:top]
        print(f"profile {name} (decode past {past}, 1 thread): node time {total / 1000:.2f} ms; "
              + ", ".join(f"{op} {n}x {us / 1000:.2f} ms" for op, (n, us) in rows))
    for other in (n for n in by_type if n != "fused"):
        if "fused" not in by_type:
            break
        ops = set(by_type["fused"]) | set(by_type[other])
        diff = {op: by_type["fused"].get(op, (0, 0.0))[1] - by_type[other].get(op, (0, 0.0))[1] for op in ops}
        worst = sorted(diff.items(), key=lambda kv: -abs(kv[1]))[:top]
        print(f"fused - {other} by op type (ms): " + ", ".join(f"{op} {d / 1000:+.2f}" for op, d in worst))


def main(argv: list[str] | None = None) -> int:
    """Build, check, time; print a table (and --json)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--narrow", action="store_true", help="64 hidden, 2 layers: a quick run")
    ap.add_argument("--work", help="folder for the models (default: a temp folder, removed)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--pasts", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--prefill", type=int, default=32, help="new tokens of the prefill timed (0: none)")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--sessions", type=int, default=3, help="onnxruntime sessions per model (the interval "
                    "comes from the spread of their medians)")
    ap.add_argument("--json", help="write the rows here")
    ap.add_argument("--reuse", action="store_true", help="time the models an earlier run left in --work")
    ap.add_argument("--profile", action="store_true",
                    help="also profile each model's decode step node by node (first --pasts length)")
    ap.add_argument("--also", nargs="*", default=[], metavar="NAME=PATH",
                    help="more models timed with the others (e.g. a model fused by another version), with the"
                    " ratios NAME/original and fused/NAME")
    ap.add_argument("--exporter", choices=["torchscript", "dynamo"], default="torchscript",
                    help="torch.onnx's exporter of the original (dynamo: the opset it picks)")
    ap.add_argument("--export-python", default="/work/venvs/decoders/bin/python")
    ap.add_argument("--genai-python", default="/work/venvs/genai/bin/python")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fuseview-decode-") as tmp:
        work = Path(args.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        models = model_paths(args, work)
        if args.reuse and (work / "facts.json").exists() and all(p.exists() for p in models.values()):
            facts = json.loads((work / "facts.json").read_text())  # the models of an earlier run, as they are
        else:
            facts, models = build_models(args, work)
        for spec in args.also:
            name, _, path = spec.partition("=")
            models[name] = Path(path)
        print(f"logits vs original at past 16 + 1: {logits_agree(models, facts)}")
        print(f"load average at start: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        rows = []
        for threads in args.threads:
            shapes = [(p, 1) for p in args.pasts] + ([(0, args.prefill)] if args.prefill else [])
            for past, new in shapes:
                row = time_case(models, facts, past, new, threads, args.runs, args.sessions)
                rows.append(row)
                med = " ".join(f"{n} {v:.2f}" for n, v in row["median_ms"].items())
                rat = "  ".join(f"{k} {v['speedup_p50']:.3f} [{v['ci'][0]:.3f}, {v['ci'][1]:.3f}]"
                                for k, v in row["ratios"].items())
                what = f"decode past {past}" if new == 1 else f"prefill {new}"
                print(f"{threads} thr  {what:16s} ms: {med} | {rat}", flush=True)
        print(f"load average at end: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if args.profile:
            profile_ops(models, facts, args.pasts[0], args.runs)
        if args.json:
            write_text_atomic(args.json, json.dumps({"facts": facts, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
