"""Make small real torch.profiler traces before/after torch.compile, and one onnxruntime trace.

Needs torch (CPU) and onnxruntime; scripts only, fuseview never imports torch. Inductor's C++ backend
with `cpp.enable_kernel_profile` names each compiled kernel in the trace. Output: tests/data/traces/
CASE_eager.json and CASE_compiled.json per case, plus ort_mlp.json.

    python scripts/make_traces.py [--out tests/data/traces] [--steps 12] [--only CASE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch._inductor.config as inductor_config
from torch import nn
from torch.profiler import ProfilerActivity, profile, schedule

ROOT = Path(__file__).resolve().parent.parent
inductor_config.cpp.enable_kernel_profile = True
# Keep the committed files small: drop args we never read (shapes, stacks are off anyway).
_KEEP_ARGS = {"External id", "Sequence number", "Fwd thread id"}


class CosRelu(nn.Module):
    def forward(self, x):
        return torch.relu(torch.cos(x))


class LinearAdd(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(64, 64)

    def forward(self, x, y):
        return torch.relu(self.lin(x) + y)


class SmallMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.up = nn.Linear(64, 128)
        self.down = nn.Linear(128, 64)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class OpByOpAttention(nn.Module):
    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) / (d // self.heads) ** 0.5
        scores = scores.masked_fill(mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        return self.out(torch.matmul(probs, v).transpose(1, 2).reshape(b, s, d))


def _encoder_layer():
    layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=64, batch_first=True, dropout=0.0)
    return layer.eval()


def _cases() -> dict:
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    causal = torch.triu(torch.ones(16, 16, dtype=torch.bool), diagonal=1)
    return {
        "cos_relu": (CosRelu(), (r(256, 256),)),
        "linear_add": (LinearAdd(), (r(32, 64), r(32, 64))),
        "mlp_layernorm": (SmallMLP(), (r(8, 16, 64),)),
        "attention": (OpByOpAttention(), (r(2, 16, 32), causal)),
        # eval + no_grad: the layer takes its fused fast path (one aten op), so compile has little to fuse
        "encoder_fastpath": (_encoder_layer(), (r(2, 16, 32),)),
    }


def _trim(path: Path) -> dict:
    with open(path) as f:
        trace = json.load(f)
    for e in trace.get("traceEvents", []):
        args = e.get("args")
        if isinstance(args, dict):
            e["args"] = {k: v for k, v in args.items() if k in _KEEP_ARGS}
            if not e["args"]:
                del e["args"]
    return trace


def _profile(fn, inputs, steps: int, out: Path) -> None:
    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)  # compile and warm up outside the trace
        sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
        with profile(activities=[ProfilerActivity.CPU], schedule=sched) as prof:
            for _ in range(steps + 1):
                fn(*inputs)
                prof.step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.json"
        prof.export_chrome_trace(str(raw))
        trace = _trim(raw)
    text = json.dumps(trace, separators=(",", ":"))
    tmp_out = out.with_suffix(".json.tmp")
    tmp_out.write_text(text)
    os.replace(tmp_out, out)
    print(f"{out.name}: {len(text) / 1024:.0f} KB, {len(trace['traceEvents'])} events", flush=True)


def _ort_trace(out_dir: Path) -> None:
    import onnxruntime as ort

    model = SmallMLP().eval()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = Path(tmp) / "mlp.onnx"
        torch.onnx.export(model, (torch.randn(8, 16, 64),), str(onnx_path), dynamo=False, opset_version=17,
                          input_names=["x"], output_names=["y"])
        opts = ort.SessionOptions()
        opts.enable_profiling = True
        opts.profile_file_prefix = str(Path(tmp) / "ort")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        x = torch.randn(8, 16, 64).numpy()
        for _ in range(6):
            sess.run(None, {"x": x})
        prof = sess.end_profiling()
        data = Path(prof).read_bytes()
        (out_dir / "ort_mlp.onnx").write_bytes(onnx_path.read_bytes())
    (out_dir / "ort_mlp.json").write_bytes(data)
    print(f"ort_mlp.json: {len(data) / 1024:.0f} KB", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests/data/traces"))
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    for name, (mod, inputs) in _cases().items():
        if args.only and name not in args.only:
            continue
        mod = mod.eval()
        _profile(mod, inputs, args.steps, out / f"{name}_eager.json")
        torch._dynamo.reset()
        _profile(torch.compile(mod), inputs, args.steps, out / f"{name}_compiled.json")
    if not args.only or "ort" in args.only:
        _ort_trace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
