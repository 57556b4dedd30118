"""compare_compile: profile fn eager and torch.compile'd, and keep Inductor's provenance log beside.

The folder it writes (eager.json, compiled.json, torch_trace/, capture.json) is what `fuseview trace DIR`
opens. Compilation happens before the profiled steps, so its time is reported apart (capture.json), never
averaged into a step. Needs torch (`pip install fuseview[torch]`); imported only by this module.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from fuseview.atomic import publish_folder, write_text_atomic
from fuseview.capture.deadline import Deadline
from fuseview.errors import FuseviewError
from fuseview.traces.torch_log import COMPILED, EAGER
from fuseview.traces.torch_log import LOG_DIR as TORCH_TRACE

CAPTURE = "capture.json"
ONNX_MODEL = "model.onnx"
DEFAULT_TIME_LIMIT_S = 1800.0  # the whole capture: warm-up, compile, profiled steps
MAX_STEPS = 100_000
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


def profile_steps(call: Callable[[], object], steps: int, with_stack: bool, out: Path,
                  deadline: Deadline | None = None) -> None:
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
            if deadline is not None:
                deadline.check(f"profiling {out.name}")
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


def _check_arguments(steps, warmup, time_limit_s) -> None:
    for name, v, most in (("steps", steps, MAX_STEPS), ("warmup", warmup, MAX_STEPS)):
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= most:
            raise FuseviewError(f"{name}={v!r}: must be a whole number from 1 to {most}")
    if isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) \
            or not math.isfinite(time_limit_s) or time_limit_s <= 0:
        raise FuseviewError(f"time_limit_s={time_limit_s!r}: must be a finite number of seconds above 0")


def _target(out_dir) -> Path:
    """The capture folder to (re)place: absent, empty, or an earlier capture (nothing else is replaced)."""
    out = Path(out_dir)
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise FuseviewError(f"{out}: exists and is not a folder")
    if out.is_dir() and any(out.iterdir()) and not (out / CAPTURE).is_file():
        raise FuseviewError(f"{out}: a folder that is not an earlier capture (no {CAPTURE}); fuseview"
                            " replaces only its own captures: give a new or empty folder")
    if not out.parent.is_dir():
        raise FuseviewError(f"{out.parent}: folder does not exist")
    return out


def compare_compile(fn: Callable, inputs: Sequence, out_dir: str | os.PathLike, steps: int = 10,
                    warmup: int = 3, with_stack: bool = True, no_grad: bool = True,
                    time_limit_s: float = DEFAULT_TIME_LIMIT_S, onnx: bool = False, **compile_kwargs) -> Path:
    """Profile fn(*inputs) eager and torch.compile'd into out_dir (for `fuseview trace out_dir`).

    Everything is written into a fresh folder beside out_dir and moved into place only once complete: a
    call that fails or passes time_limit_s (checked between calls, and by an alarm that interrupts a
    long one) leaves out_dir as it was, an earlier capture's log included. onnx=True also exports fn with
    torch.onnx.export(dynamo=True) into model.onnx (needs onnxscript), for `fuseview trace` to set
    Inductor's kernels beside fuseview's fusions of that model, per source line."""
    _check_arguments(steps, warmup, time_limit_s)
    if onnx:
        import importlib.util

        import torch

        if not isinstance(fn, torch.nn.Module):
            # the exporter keeps the source lines of module forwards, not those of a plain function
            raise FuseviewError("compare_compile(onnx=True): fn must be a torch.nn.Module (the ONNX exporter"
                                " records the source lines of a module's forward, which the join needs)")
        if importlib.util.find_spec("onnxscript") is None:
            raise FuseviewError("compare_compile(onnx=True): torch's dynamo ONNX exporter needs onnxscript"
                                " (pip install onnxscript)")
    out = _target(out_dir)
    deadline = Deadline(time_limit_s)
    tmp = Path(tempfile.mkdtemp(prefix=".fuseview-capture-", dir=out.parent))
    try:
        with deadline.alarm():
            info = _capture(fn, tuple(inputs), tmp, steps, warmup, with_stack, no_grad, deadline,
                            compile_kwargs)
            if onnx:
                _export_onnx(fn, tuple(inputs), tmp / ONNX_MODEL)
                info["onnx"] = ONNX_MODEL
        write_text_atomic(tmp / CAPTURE, json.dumps(info, indent=1) + "\n")
        publish_folder(tmp, out)  # an earlier capture there is replaced only now
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"captured: fuseview trace {out}")
    return out


def _export_onnx(fn, args: tuple, out: Path) -> None:
    """fn exported by torch's dynamo ONNX exporter (its nodes keep their Python stacks) into out."""
    import torch

    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the exporter's progress lines
            torch.onnx.export(fn, args, str(out), dynamo=True, verbose=False)
    except Exception as exc:  # noqa: BLE001 - any exporter failure is the one line below
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        raise FuseviewError(f"compare_compile(onnx=True): torch.onnx.export(dynamo=True) failed:"
                            f" {type(exc).__name__}: {first}") from None


def _capture(fn, args: tuple, tmp: Path, steps: int, warmup: int, with_stack: bool, no_grad: bool,
             deadline: Deadline, compile_kwargs: dict) -> dict:
    """The capture itself, into tmp; returns what capture.json says."""
    import torch
    import torch._inductor.config as inductor_config

    grad = torch.no_grad() if no_grad else contextlib.nullcontext()
    with grad:
        for _ in range(warmup):
            fn(*args)
            deadline.check("the eager warm-up")
        profile_steps(lambda: fn(*args), steps, with_stack, tmp / EAGER, deadline)
        # a fresh compile (no earlier cache entry, no FX-graph cache hit), so its provenance is logged
        torch._dynamo.reset()
        compiled = torch.compile(fn, **compile_kwargs)
        patch = inductor_config.patch({"trace.provenance_tracking_level": 1,
                                       "cpp.enable_kernel_profile": True, "fx_graph_cache": False,
                                       "autotune_local_cache": False})
        with _structured_log(tmp / TORCH_TRACE), patch:
            t0 = time.perf_counter()
            compiled(*args)  # compiles
            compile_s = time.perf_counter() - t0
            deadline.check("compiling")
            t1 = time.perf_counter()
            for _ in range(warmup - 1):
                compiled(*args)
                deadline.check("the compiled warm-up")
            warm_s = time.perf_counter() - t1
            profile_steps(lambda: compiled(*args), steps, with_stack, tmp / COMPILED, deadline)
    return {"kind": "fuseview.capture", "torch": torch.__version__, "steps": steps, "warmup": warmup,
            "first_call_s": compile_s, "later_warmup_s": warm_s, "with_stack": with_stack,
            "compile_kwargs": {k: repr(v) for k, v in compile_kwargs.items()}}
