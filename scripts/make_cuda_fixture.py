"""Write a hand-made CUDA-style capture (no GPU here): eager.json, compiled.json and torch_trace/ in
tests/data/traces/provenance_cuda/, built from the documented formats, not recorded on a GPU.

Kineto's CUDA traces: host ops (cpu_op) call cudaLaunchKernel / cuLaunchKernelEx (cuda_runtime /
cuda_driver, args.correlation), the device kernel (cat "kernel", pid of the GPU, tid of its stream)
carries the same args.correlation, and an `ac2g` flow pair (ph "s" on the launch, ph "f" bp "e" on the
kernel, id = correlation) draws the arrow. Inductor's Triton launcher wraps each launch in a
record_function named after the kernel (args kernel_backend "triton"), inside
"Torch-Compiled Region: frame/compile". torch 2.13's provenance artifact lists Triton kernels under
cppCodeToPost, as the C++ ones (torch/_inductor/debug.py, create_node_mapping_kernel_to_post_grad).

The model: forward(x, w) = head(stem(x @ w)) with a graph break between stem and head, where stem is
relu(y + 1) and head is relu(z + 2): two graphs whose Triton kernels share one name
(triton_poi_fused_add_relu_0). Graph 1/0's launch and kernel carry no args.correlation: only their
ac2g flow events link them. Device times are fixed numbers, so the tests know the answer.

    python scripts/make_cuda_fixture.py [--out tests/data/traces/provenance_cuda]

Requires: fuseview
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

ROOT = Path(__file__).resolve().parent.parent
HOST, GPU, STREAM = 100, 0, 7
MODEL = "/home/user/model.py"
STEPS = 3
# device µs per kernel: eager (mm, add/relu in stem, add/relu in head), compiled (mm, stem, head)
EAGER_US = {"mm": 30.0, "stem_add": 5.0, "stem_relu": 5.0, "head_add": 4.0, "head_relu": 4.0}
COMPILED_US = {"mm": 29.0, "stem": 6.0, "head": 5.0}


class _Trace:
    def __init__(self):
        self.events: list[dict] = []
        self.corr = 1000

    def x(self, name, cat, ts, dur, pid=HOST, tid=HOST, args=None):
        e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args:
            e["args"] = args
        self.events.append(e)

    def launch(self, ts, kernel, dev_ts, dev_us, runtime="cudaLaunchKernel", with_args=True):
        """A launch on the host, its device kernel, and their ac2g flow pair."""
        self.corr += 1
        c = self.corr
        args = {"correlation": c} if with_args else None
        self.x(runtime, "cuda_runtime" if runtime.startswith("cuda") else "cuda_driver", ts, 3.0, args=args)
        self.x(kernel, "kernel", dev_ts, dev_us, GPU, STREAM, args)
        self.events.append({"ph": "s", "id": c, "pid": HOST, "tid": HOST, "ts": ts, "cat": "ac2g",
                            "name": "ac2g"})
        self.events.append({"ph": "f", "id": c, "pid": GPU, "tid": STREAM, "ts": dev_ts, "cat": "ac2g",
                            "name": "ac2g", "bp": "e"})

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": self.events}, indent=0) + "\n")


def _eager(path: Path) -> None:
    t = _Trace()
    for s in range(STEPS):
        t0 = 1000.0 + s * 1000
        t.x(f"ProfilerStep#{s + 1}", "user_annotation", t0, 900)
        t.x("aten::matmul", "cpu_op", t0 + 10, 40)  # what `x @ w` records, around the aten::mm it calls
        t.x("aten::mm", "cpu_op", t0 + 12, 36)
        t.launch(t0 + 20, "ampere_sgemm_64x64_nn", t0 + 400, EAGER_US["mm"])
        for part, first, base in (("stem", 9, 100), ("head", 12, 300)):
            t.x(f"model.py({first}): {part}", "python_function", t0 + base, 150)
            for k, op in enumerate(("add", "relu")):
                at = t0 + base + 10 + 60 * k
                t.x(f"aten::{op}", "cpu_op", at, 40)
                t.launch(at + 10, f"vectorized_elementwise_kernel<{op}>",
                         t0 + 450 + (0 if part == "stem" else 80) + 20 * k, EAGER_US[f"{part}_{op}"])
    t.dump(path)


def _compiled(path: Path) -> None:
    t = _Trace()
    for s in range(STEPS):
        t0 = 1000.0 + s * 1000
        t.x(f"ProfilerStep#{s + 1}", "user_annotation", t0, 900)
        for g, base in (("0/0", 10), ("1/0", 400)):
            t.x(f"Torch-Compiled Region: {g}", "cpu_op", t0 + base, 300)
            t.x(f"## Call CompiledFxGraph {g} ##", "cpu_op", t0 + base + 10, 280)
            at = t0 + base + 20
            if g == "0/0":
                t.x("aten::mm", "cpu_op", at, 40)
                t.launch(at + 10, "ampere_sgemm_64x64_nn", t0 + 500, COMPILED_US["mm"])
                at += 60
            name = "triton_poi_fused_add_relu_0"
            t.x(name, "cpu_op", at, 30, args={"kernel_backend": "triton", "kernel_file": f"/tmp/k{g[0]}.py"})
            t.launch(at + 5, name, t0 + 600 + base / 10, COMPILED_US["stem" if g == "0/0" else "head"],
                     runtime="cuLaunchKernelEx", with_args=g == "0/0")
    t.dump(path)


_PRE = {
    "0/0": '''class GraphModule(torch.nn.Module):
    def forward(self, L_x_: "f32[8, 8][8, 1]cuda:0", L_w_: "f32[8, 8][8, 1]cuda:0"):
        l_x_ = L_x_
        l_w_ = L_w_

        # File: /home/user/model.py:5 in forward, code: y = x @ w
        y: "f32[8, 8][8, 1]cuda:0" = l_x_ @ l_w_;  l_x_ = l_w_ = None

        # File: /home/user/model.py:10 in stem, code: return torch.relu(y + 1)
        add: "f32[8, 8][8, 1]cuda:0" = y + 1;  y = None
        relu: "f32[8, 8][8, 1]cuda:0" = torch.relu(add);  add = None
        return (relu,)''',
    "1/0": '''class GraphModule(torch.nn.Module):
    def forward(self, L_z_: "f32[8, 8][8, 1]cuda:0"):
        l_z_ = L_z_

        # File: /home/user/model.py:13 in head, code: return torch.relu(z + 2)
        add: "f32[8, 8][8, 1]cuda:0" = l_z_ + 2;  l_z_ = None
        relu: "f32[8, 8][8, 1]cuda:0" = torch.relu(add);  add = None
        return (relu,)''',
}
_POST = {
    "0/0": '''class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "f32[8, 8][8, 1]cuda:0", arg1_1: "f32[8, 8][8, 1]cuda:0"):
        # File: /home/user/model.py:5 in forward, code: y = x @ w
        mm: "f32[8, 8][8, 1]cuda:0" = torch.ops.aten.mm.default(arg0_1, arg1_1);  arg0_1 = arg1_1 = None

        # File: /home/user/model.py:10 in stem, code: return torch.relu(y + 1)
        add: "f32[8, 8][8, 1]cuda:0" = torch.ops.aten.add.Tensor(mm, 1);  mm = None
        relu: "f32[8, 8][8, 1]cuda:0" = torch.ops.aten.relu.default(add);  add = None
        return (relu,)''',
    "1/0": '''class <lambda>(torch.nn.Module):
    def forward(self, arg0_1: "f32[8, 8][8, 1]cuda:0"):
        # File: /home/user/model.py:13 in head, code: return torch.relu(z + 2)
        add: "f32[8, 8][8, 1]cuda:0" = torch.ops.aten.add.Tensor(arg0_1, 2);  arg0_1 = None
        relu: "f32[8, 8][8, 1]cuda:0" = torch.ops.aten.relu.default(add);  add = None
        return (relu,)''',
}
_CODE = {"0/0": ["extern_kernels.mm:1", "triton_poi_fused_add_relu_0:2"],
         "1/0": ["triton_poi_fused_add_relu_0:1"]}
_NODES = {"0/0": {"extern_kernels.mm:1": ["mm"], "triton_poi_fused_add_relu_0:2": ["add", "relu"]},
          "1/0": {"triton_poi_fused_add_relu_0:1": ["add", "relu"]}}
_PRE_OF = {"0/0": {"mm": ["y"], "add": ["add"], "relu": ["relu"]},
           "1/0": {"add": ["add"], "relu": ["relu"]}}
_LINES = {"0/0": {"extern_kernels.mm:1": (5, "forward", "y = x @ w"),
                  "triton_poi_fused_add_relu_0:2": (10, "stem", "return torch.relu(y + 1)")},
          "1/0": {"triton_poi_fused_add_relu_0:1": (13, "head", "return torch.relu(z + 2)")}}


def _record(out: list[str], header: dict, payload: str | None) -> None:
    if payload is not None:
        header = header | {"has_payload": hashlib.md5(payload.encode()).hexdigest()}
    out.append(f"V1203 10:00:00.000000 4242 torch/_inductor/compile_fx.py:1] {json.dumps(header)}\n")
    if payload is not None:
        out.extend(f"\t{line}\n" for line in payload.split("\n"))


def _log(path: Path) -> None:
    out: list[str] = []
    for g in ("0/0", "1/0"):
        fid, cid = (int(v) for v in g.split("/"))
        frame = {"frame_id": fid, "frame_compile_id": cid, "attempt": 0}
        art = lambda name, enc, frame=frame: {"artifact": {"name": name, "encoding": enc}} | frame  # noqa: E731
        _record(out, art("after_pre_grad_graph", "string"), _PRE[g])
        _record(out, art("inductor_post_grad_graph", "string"), _POST[g])
        code = "\n".join(f"{k.split(':')[0]} = async_compile.triton('{k.split(':')[0]}', '''...''')"
                         for k in _CODE[g] if k.startswith("triton"))
        _record(out, {"inductor_output_code": {"filename": f"/tmp/out{fid}.py"}} | frame, code)
        post_to_pre = _PRE_OF[g]
        nodes = _NODES[g]
        mappings = {"preToPost": {}, "postToPre": post_to_pre, "cppCodeToPost": nodes,
                    "postToCppCode": {n: [k] for k, v in nodes.items() for n in v}, "version": 2.0}
        _record(out, art("inductor_provenance_tracking_node_mappings", "json"), json.dumps(mappings))
        stacks = {k: [f'  File "{MODEL}", line {ln}, in {fn}\n    {code}\n'] for k, (ln, fn, code)
                  in _LINES[g].items()}
        _record(out, art("inductor_provenance_tracking_kernel_stack_traces", "json"), json.dumps(stacks))
    path.write_text("".join(out))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "tests/data/traces/provenance_cuda"))
    out = Path(ap.parse_args(argv).out)
    (out / "torch_trace").mkdir(parents=True, exist_ok=True)
    _eager(out / "eager.json")
    _compiled(out / "compiled.json")
    _log(out / "torch_trace" / "dedicated_log_torch_trace_handmade.log")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
