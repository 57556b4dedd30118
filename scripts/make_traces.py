"""Make small real torch.profiler traces before/after torch.compile, and one onnxruntime trace.

Needs torch (CPU) and onnxruntime; scripts only, fuseview never imports torch. Inductor's C++ backend
with `cpp.enable_kernel_profile` names each compiled kernel in the trace. Output: tests/data/traces/
CASE_eager.json and CASE_compiled.json per case, plus ort_mlp.json; and, through
fuseview.capture.compare_compile (provenance tracking on, TORCH_TRACE log kept), one folder per
provenance case in tests/data/traces/provenance/CASE/ (eager.json, compiled.json, torch_trace/).

    python scripts/make_traces.py [--out tests/data/traces] [--steps 12] [--only CASE ...]

Requires: torch, fuseview, bin:gcc
Per case, checked when it starts: ort needs onnxruntime and onnx, gpt2_block needs transformers,
mlp_block_onnx, conv_bn_relu_onnx and gpt2_block_onnx need onnxscript (torch's dynamo ONNX exporter).
"""

from __future__ import annotations

import argparse
import bisect
import json
import sys
import tempfile
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import torch
import torch._inductor.config as inductor_config
from _requires import require
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


def _gpt2_module():
    """The GPT2Block as an nn.Module returning its hidden states (what the ONNX exporter takes)."""
    call = _gpt2_block()

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = call.__closure__[0].cell_contents  # the GPT2Block itself, as a submodule

        def forward(self, x):
            return self.block(x)[0]

    return Block().eval()


def _gpt2_block():
    from transformers import GPT2Config
    from transformers.models.gpt2.modeling_gpt2 import GPT2Block

    cfg = GPT2Config(n_embd=64, n_head=4, n_layer=1, n_positions=32, attn_pdrop=0.0, resid_pdrop=0.0,
                     embd_pdrop=0.0)
    cfg._attn_implementation = "eager"
    block = GPT2Block(cfg, layer_idx=0).eval()
    return lambda x: block(x)[0]


def _conv_bn_relu(g):
    bn = ConvBNReLU().eval()
    with torch.no_grad():  # statistics away from 0/1, so the folded BatchNorm does real work
        bn.bn.running_mean.uniform_(-0.5, 0.5, generator=g)
        bn.bn.running_var.uniform_(0.5, 2.0, generator=g)
    return bn


# provenance case -> (what it needs beyond torch, gcc and onnxruntime; its (module, inputs) built on call)
PROVENANCE_CASES = {
    "mlp_block": ((), lambda g, r: (MLPBlock().eval(), (r(4, 16, 64),))),
    "op_attention": ((), lambda g, r: (OpByOpAttention().eval(),
                                       (r(2, 16, 32), torch.triu(torch.ones(16, 16, dtype=torch.bool), 1)))),
    "graph_break": ((), lambda g, r: (GraphBreak(), (r(64, 64),))),
    "conv_bn_relu": ((), lambda g, r: (_conv_bn_relu(g), (r(1, 8, 16, 16),))),
    "gpt2_block": (("transformers",), lambda g, r: (_gpt2_block(), (r(1, 16, 64),))),
    # also exported by the dynamo ONNX exporter (model.onnx), for the per-line join with fuseview's fusions
    "mlp_block_onnx": (("onnxscript",), lambda g, r: (MLPBlock().eval(), (r(4, 16, 64),))),
    "conv_bn_relu_onnx": (("onnxscript",), lambda g, r: (_conv_bn_relu(g), (r(1, 8, 16, 16),))),
    "gpt2_block_onnx": (("onnxscript", "transformers"), lambda g, r: (_gpt2_module(), (r(1, 16, 64),))),
}


# TORCH_TRACE records fuseview reads (the rest: timing events, config dumps, guards, are dropped for size)
_KEEP_RECORDS = ("inductor_provenance_tracking", "pre_grad_graph", "inductor_post_grad_graph",
                 "inductor_output_code")


def _trim_log(folder: Path) -> None:
    """Keep only the records fuseview reads and each log's first and last (its clock span), each with its
    payload intact (so its md5 still holds)."""
    for log in folder.glob("*.log"):
        out, keep = [], False
        lines = log.read_text().splitlines(keepends=True)
        heads = [i for i, line in enumerate(lines) if not line.startswith("\t")]
        ends = {heads[0], heads[-1]} if heads else set()
        for i, line in enumerate(lines):
            if not line.startswith("\t"):
                keep = i in ends or any(k in line.split("] ", 1)[-1][:200] for k in _KEEP_RECORDS)
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

    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    for name, (needs, build) in PROVENANCE_CASES.items():
        if only is not None and name not in only:
            continue
        require(*needs, what=f"make_traces.py {name}")
        fn, inputs = build(g, r)
        folder = compare_compile(fn, inputs, out_dir / name, steps=steps, warmup=3,
                                 onnx=name.endswith("_onnx"))
        _trim_log(folder / "torch_trace")
        _drop_python_frames(folder / "eager.json", keep_enclosing=True)
        _drop_python_frames(folder / "compiled.json", keep_enclosing=False)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        print(f"provenance/{name}: {size / 1024:.0f} KB", flush=True)


def _provenance_config() -> None:
    """Inductor settings under which the compile log holds provenance and kernels are named in traces."""
    inductor_config.trace.provenance_tracking_level = 1
    inductor_config.fx_graph_cache = False
    inductor_config.autotune_local_cache = False


def _one_run(out: Path, steps: int) -> None:
    """One process's capture of the MLP block, its compile log written where TORCH_TRACE (env) says."""
    _provenance_config()
    torch.manual_seed(0)
    fn, x = MLPBlock().eval(), torch.randn(4, 16, 64)
    out.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        for _ in range(3):
            fn(x)
        profile_steps(lambda: fn(x), steps, with_stack=True, out=out / "eager.json")
        compiled = torch.compile(fn)
        for _ in range(3):
            compiled(x)
        profile_steps(lambda: compiled(x), steps, with_stack=True, out=out / "compiled.json")


def _same_process_twice(folder: Path, steps: int) -> None:
    """Two captures in one process, each with its own log in one folder: the same pid, told apart by clock."""
    from fuseview.capture.compile import _structured_log

    _provenance_config()
    torch.manual_seed(0)
    fn, x = MLPBlock().eval(), torch.randn(4, 16, 64)
    with torch.no_grad():
        for run in ("first", "second"):
            (folder / run).mkdir(parents=True, exist_ok=True)
            torch._dynamo.reset()
            compiled = torch.compile(fn)
            with _structured_log(folder / "torch_trace"):
                for _ in range(3):
                    compiled(x)
            profile_steps(lambda c=compiled: c(x), steps, with_stack=True, out=folder / run / "compiled.json")
            profile_steps(lambda: fn(x), steps, with_stack=True, out=folder / run / "eager.json")


LOG_FOLDERS = ("two_runs", "one_process")


def _log_folders(out_dir: Path, steps: int, only) -> None:
    """Folders as torch writes them: TORCH_TRACE set once and used by two runs (two processes, each with
    compile workers), and two captures in one process; each run's traces in its own subfolder."""
    import os
    import shutil
    import subprocess

    for name in LOG_FOLDERS:
        if only is not None and name not in only:
            continue
        folder = out_dir / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        if name == "one_process":
            _same_process_twice(folder, steps)
        else:
            for run in ("first", "second"):
                env = {**os.environ, "TORCH_TRACE": str(folder / "torch_trace"),
                       "TORCHINDUCTOR_COMPILE_THREADS": "2", "PYTHONPATH": str(ROOT)}
                argv = [sys.executable, __file__, "--one-run", str(folder / run), "--steps", str(steps)]
                subprocess.run(argv, env=env, check=True)
        _trim_log(folder / "torch_trace")
        for run in ("first", "second"):
            _drop_python_frames(folder / run / "eager.json", keep_enclosing=True)
            _drop_python_frames(folder / run / "compiled.json", keep_enclosing=False)
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        logs = len(list((folder / "torch_trace").glob("*.log")))
        print(f"provenance/{name}: {logs} logs, {size / 1024:.0f} KB", flush=True)


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
    require("onnxruntime", "onnx", what="make_traces.py ort")
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
    ap.add_argument("--one-run", metavar="DIR", help=argparse.SUPPRESS)  # a child of the two_runs case
    args = ap.parse_args(argv)
    if args.one_run:
        _one_run(Path(args.one_run), args.steps)
        return 0
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
    _log_folders(out / "provenance", args.steps, args.only)
    return 0


if __name__ == "__main__":
    sys.exit(main())
