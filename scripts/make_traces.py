"""Make small real torch.profiler traces before/after torch.compile, and one onnxruntime trace.

Needs torch (CPU) and onnxruntime; scripts only, fuseview never imports torch. Inductor's C++ backend
with `cpp.enable_kernel_profile` names each compiled kernel in the trace. Output: tests/data/traces/
CASE_eager.json and CASE_compiled.json per case, plus ort_mlp.json; and, through
fuseview.capture.compare_compile (provenance tracking on, TORCH_TRACE log kept), one folder per
provenance case in tests/data/traces/provenance/CASE/ (eager.json, compiled.json, torch_trace/).

    python scripts/make_traces.py [--out tests/data/traces] [--steps 12] [--only CASE ...]
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch._inductor.config as inductor_config
from torch import nn

from fuseview.capture.compile import profile_steps

ROOT = Path(__file__).resolve().parent.parent
inductor_config.cpp.enable_kernel_profile = True


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


class MLPBlock(nn.Module):
    """LayerNorm, Linear, GELU, Linear, residual: the fusions every transformer MLP offers."""

    def __init__(self, dim=64):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = self.norm(x)
        h = torch.nn.functional.gelu(self.up(h))
        return x + self.down(h)


class GraphBreak(nn.Module):
    """Two fusable halves with a graph break between them: two compiled graphs, both with kernels."""

    def forward(self, x):
        a = torch.relu(torch.cos(x) + 1.0)
        torch._dynamo.graph_break()
        return torch.sigmoid(torch.sin(a) * 2.0)


class ConvBNReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 16, 3, padding=1)
        self.bn = nn.BatchNorm2d(16)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


def _gpt2_block():
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    cfg = GPT2Config(n_embd=64, n_head=4, n_layer=1, n_positions=32, attn_pdrop=0.0, resid_pdrop=0.0,
                     embd_pdrop=0.0)
    cfg._attn_implementation = "eager"
    block = GPT2Block(cfg, layer_idx=0).eval()
    return lambda x: block(x)[0]


def _provenance_cases() -> dict:
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    causal = torch.triu(torch.ones(16, 16, dtype=torch.bool), diagonal=1)
    bn = ConvBNReLU().eval()
    with torch.no_grad():  # statistics away from 0/1, so the folded BatchNorm does real work
        bn.bn.running_mean.uniform_(-0.5, 0.5, generator=g)
        bn.bn.running_var.uniform_(0.5, 2.0, generator=g)
    return {
        "mlp_block": (MLPBlock().eval(), (r(4, 16, 64),)),
        "op_attention": (OpByOpAttention().eval(), (r(2, 16, 32), causal)),
        "graph_break": (GraphBreak(), (r(64, 64),)),
        "conv_bn_relu": (bn, (r(1, 8, 16, 16),)),
        "gpt2_block": (_gpt2_block(), (r(1, 16, 64),)),
    }


# TORCH_TRACE records fuseview reads (the rest: timing events, config dumps, guards, are dropped for size)
_KEEP_RECORDS = ("inductor_provenance_tracking", "pre_grad_graph", "inductor_post_grad_graph",
                 "inductor_output_code")


def _trim_log(folder: Path) -> None:
    """Keep only the records fuseview reads, each with its payload intact (so its md5 still holds)."""
    for log in folder.glob("*.log"):
        out, keep = [], False
        for line in log.read_text().splitlines(keepends=True):
            if not line.startswith("\t"):
                keep = any(k in line.split("] ", 1)[-1][:200] for k in _KEEP_RECORDS)
            if keep:
                out.append(line)
        log.write_text("".join(out))


def _drop_python_frames(path: Path, keep_enclosing: bool) -> None:
    """Drop Python frames for size: all of them, or (keep_enclosing) those around no op at all."""
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    ops: dict = {}
    for e in events:
        if e.get("cat") == "cpu_op":
            ops.setdefault(e.get("tid"), []).append(float(e["ts"]))
    for v in ops.values():
        v.sort()

    def encloses_op(e) -> bool:
        ts = ops.get(e.get("tid"), [])
        i = bisect.bisect_left(ts, float(e["ts"]))
        return keep_enclosing and i < len(ts) and ts[i] <= float(e["ts"]) + float(e.get("dur", 0))

    trace["traceEvents"] = [e for e in events if e.get("cat") != "python_function" or encloses_op(e)]
    path.write_text(json.dumps(trace, separators=(",", ":")))


def _provenance(out_dir: Path, steps: int, only) -> None:
    from fuseview.capture import compare_compile

    for name, (fn, inputs) in _provenance_cases().items():
        if only is not None and name not in only:
            continue
        folder = compare_compile(fn, inputs, out_dir / name, steps=steps, warmup=3)
        _trim_log(folder / "torch_trace")
        _drop_python_frames(folder / "eager.json", keep_enclosing=True)
        _drop_python_frames(folder / "compiled.json", keep_enclosing=False)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"provenance/{name}: {size / 1024:.0f} KB", flush=True)


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


def _profile(fn, inputs, steps: int, out: Path) -> None:
    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)  # compile and warm up outside the trace
        profile_steps(lambda: fn(*inputs), steps, with_stack=False, out=out)
    print(f"{out.name}: {out.stat().st_size / 1024:.0f} KB", flush=True)


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
        if args.only is not None and name not in args.only:
            continue
        mod = mod.eval()
        _profile(mod, inputs, args.steps, out / f"{name}_eager.json")
        torch._dynamo.reset()
        _profile(torch.compile(mod), inputs, args.steps, out / f"{name}_compiled.json")
    if args.only is None or "ort" in args.only:
        _ort_trace(out)
    _provenance(out / "provenance", args.steps, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
