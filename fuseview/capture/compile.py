"""compare_compile: profile fn eager and torch.compile'd, and keep Inductor's provenance log beside.

The folder it writes (eager.json, compiled.json, torch_trace/, capture.json) is what `fuseview trace DIR`
opens. Compilation happens before the profiled steps, so its time is reported apart (capture.json), never
averaged into a step. Needs torch (`pip install fuseview[torch]`); imported only by this module.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from fuseview.atomic import write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.traces.torch_log import COMPILED, EAGER
from fuseview.traces.torch_log import LOG_DIR as TORCH_TRACE

CAPTURE = "capture.json"
# args of profiler events that fuseview reads (the rest, e.g. shapes, only make the file bigger)
KEEP_ARGS = frozenset({"correlation", "External id", "kernel_file", "kernel_backend", "grid", "stream"})


def trim_args(trace: dict) -> dict:
    """Drop the event args fuseview never reads (shapes, strides), in place; returns the trace."""
    for e in trace.get("traceEvents", []):
        args = e.get("args")
        if isinstance(args, dict):
            kept = {k: v for k, v in args.items() if k in KEEP_ARGS}
            if kept:
                e["args"] = kept
            else:
                del e["args"]
    return trace


def profile_steps(call: Callable[[], object], steps: int, with_stack: bool, out: Path) -> None:
    """Run call() steps+1 times under torch.profiler (the first step dropped) and write the trace to out."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    # one profiled-but-dropped warm-up step: the profiler's own start-up stays out of the counted steps
    sched = schedule(wait=0, warmup=1, active=steps, repeat=1)
    with profile(activities=acts, schedule=sched, with_stack=with_stack) as prof:
        for _ in range(steps + 1):
            call()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            prof.step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        with open(raw, encoding="utf-8") as f:
            trace = trim_args(json.load(f))
    write_text_atomic(out, json.dumps(trace, separators=(",", ":")))


@contextlib.contextmanager
def _structured_log(folder: Path):
    """Write torch's structured compile log (what TORCH_TRACE=folder would) while the block runs."""
    # TORCH_TRACE is read once, when torch is imported; torch 2.13's own handler and formatter (private,
    # hence the exact pin of the [torch] extra) attach the same log to an already-imported torch
    from torch._logging import _internal as tlog

    folder.mkdir(parents=True, exist_ok=True)
    handler = tlog.LazyTraceHandler(str(folder))
    handler.setFormatter(tlog.TorchLogsFormatter(trace=True))
    tlog.trace_log.setLevel(logging.DEBUG)
    tlog.trace_log.addHandler(handler)
    try:
        yield
    finally:
        tlog.trace_log.removeHandler(handler)
        handler.close()


def compare_compile(fn: Callable, inputs: Sequence, out_dir: str | os.PathLike, steps: int = 10,
                    warmup: int = 3, with_stack: bool = True, no_grad: bool = True,
                    **compile_kwargs) -> Path:
    """Profile fn(*inputs) eager and torch.compile'd into out_dir (for `fuseview trace out_dir`)."""
    import torch
    import torch._inductor.config as inductor_config

    if steps < 1 or warmup < 1:
        raise FuseviewError(f"steps={steps}, warmup={warmup}: each must be at least 1")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise FuseviewError(f"{out}: exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    log_dir = out / TORCH_TRACE
    if log_dir.is_dir():
        for old in log_dir.glob("*.log"):  # a previous capture's log would mix two runs' graphs
            old.unlink()
    args = tuple(inputs)
    grad = torch.no_grad() if no_grad else contextlib.nullcontext()
    with grad:
        for _ in range(warmup):
            fn(*args)
        profile_steps(lambda: fn(*args), steps, with_stack, out / EAGER)
        # a fresh compile (no earlier cache entry, no FX-graph cache hit), so its provenance is logged
        torch._dynamo.reset()
        compiled = torch.compile(fn, **compile_kwargs)
        patch = inductor_config.patch({"trace.provenance_tracking_level": 1,
                                       "cpp.enable_kernel_profile": True, "fx_graph_cache": False,
                                       "autotune_local_cache": False})
        with _structured_log(log_dir), patch:
            t0 = time.perf_counter()
            compiled(*args)  # compiles
            compile_s = time.perf_counter() - t0
            t1 = time.perf_counter()
            for _ in range(warmup - 1):
                compiled(*args)
            warm_s = time.perf_counter() - t1
            profile_steps(lambda: compiled(*args), steps, with_stack, out / COMPILED)
    info = {"kind": "fuseview.capture", "torch": torch.__version__, "steps": steps, "warmup": warmup,
            "first_call_s": compile_s, "later_warmup_s": warm_s, "with_stack": with_stack,
            "compile_kwargs": {k: repr(v) for k, v in compile_kwargs.items()}}
    write_text_atomic(out / CAPTURE, json.dumps(info, indent=1) + "\n")
    print(f"captured: fuseview trace {out}")
    return out
