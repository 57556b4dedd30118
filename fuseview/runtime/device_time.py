"""Device (GPU) time per node: CUPTI kernel records from torch.profiler, on onnxruntime's clock.

onnxruntime's profiler stamps node events on its own clock (µs since its profiling began); torch.profiler
stamps CUPTI's kernel records and its own host events on another. Each onnxruntime run is wrapped in a
torch `record_function` marker, so both clocks see the same run: the marker's span must contain the run's
`model_run` event, which bounds the offset between the clocks from both sides; the bounds of all runs
intersected give the offset and its uncertainty (never assumed). Kernels are then attributed to the node
whose host span holds their launch (`placement.attribute_kernels`), and each run's GPU busy time is the
union of its kernels' device intervals.

torch.profiler's CUDA activity records the kernels of every CUDA context of the process, onnxruntime's
included. On the CPU the same code runs over a real torch trace with CPU activities (tests).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fuseview.errors import FuseviewError
from fuseview.runtime import trace
from fuseview.runtime.placement import attribute_kernels

MARKER = "fuseview.run."
SOURCE = "torch.profiler (CUPTI kernel activity)"
# device activities of a CUDA trace, and the host API calls that launched them (joined by correlation id)
DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")
SLACK_US = 1.0  # onnxruntime writes whole microseconds: its ts and dur are each up to 1 µs short
WHAT = ("device: the GPU kernels' own durations (CUPTI, via torch.profiler), each attributed to the node"
        " whose host span holds its launch; busy: the union of kernel intervals per run")


@dataclass(frozen=True)
class Record:
    """One device activity: launch time (host, trace clock), device start and duration, all µs."""

    launch: float
    start: float
    dur: float


def kernel_source() -> tuple[str | None, str]:
    """(the source of kernel records, or None) and one line saying why that one or why none."""
    try:
        import torch
    except ImportError:
        return None, "no device time: torch is not installed (the kernel records come from torch.profiler)"
    if not torch.cuda.is_available():
        return None, f"no device time: torch {torch.__version__} sees no CUDA device"
    return SOURCE, f"torch {torch.__version__} with CUDA {torch.version.cuda}"


def _events(path: str | os.PathLike) -> list[dict]:
    from fuseview.safe_io import load_json

    data = load_json(path, "trace", "torch.profiler trace")
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise FuseviewError(f"{path}: not a torch.profiler trace (no event list)")
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def traced_runs(run: Callable[[], Any], runs: int, cuda: bool = True, all_threads: bool = False
                ) -> list[dict]:
    """Call run() `runs` times under torch.profiler, each call inside a marker; the trace's span events.

    cuda records CUPTI's device activity (kernels, copies) and the launching API calls; all_threads also
    records torch ops of other threads (the CPU tests' stand-ins for kernels).
    """
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    extra: dict[str, Any] = {}
    if all_threads:
        extra["experimental_config"] = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with profile(activities=acts, **extra) as prof:
        for i in range(runs):
            with record_function(f"{MARKER}{i}"):
                run()
        if cuda:
            torch.cuda.synchronize()
    with tempfile.TemporaryDirectory(prefix="fuseview-devtime-") as tmp:
        path = Path(tmp) / "torch_trace.json"
        prof.export_chrome_trace(str(path))
        return _events(path)


def markers(events: list[dict]) -> list[tuple[float, float]]:
    """The runs' marker spans (start, end) on the torch clock, in run order."""
    found: dict[int, tuple[float, float]] = {}
    for e in events:
        name = str(e.get("name", ""))
        # kineto also projects an annotation onto the GPU timeline (cat gpu_user_annotation): not the host's
        if str(e.get("cat", "")).startswith("gpu_"):
            continue
        if name.startswith(MARKER) and name[len(MARKER):].isdigit():
            found[int(name[len(MARKER):])] = (float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
    return [found[k] for k in sorted(found)]


def ort_spans(events: list[dict]) -> tuple[list[tuple[float, float]], list[tuple[str, float, float, str]]]:
    """onnxruntime's runs (start, end) in time order and its node spans (name, start, end, provider)."""
    runs = sorted((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")
    cut = len("_kernel_time")
    nodes = [(str(e["name"])[:-cut], float(e["ts"]), float(e["ts"]) + float(e["dur"]),
              str((e.get("args") or {}).get("provider", "?")))
             for e in events if e.get("cat") == "Node" and str(e.get("name", "")).endswith("_kernel_time")]
    return runs, nodes


def align(marks: Sequence[tuple[float, float]], runs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(offset, uncertainty) µs with torch time = onnxruntime time + offset, from the runs in both traces.

    Each marker holds its run: marker start <= run start + offset and run end + offset <= marker end. The
    last len(marks) runs of onnxruntime's trace are the marked ones (warm-up runs come before).
    """
    if not marks or len(runs) < len(marks):
        raise FuseviewError(f"cannot align the clocks: {len(marks)} markers, {len(runs)} onnxruntime runs")
    lo, hi = -np.inf, np.inf
    for (m0, m1), (r0, r1) in zip(marks, runs[-len(marks):], strict=True):
        lo = max(lo, m0 - r0 - SLACK_US)
        hi = min(hi, m1 - r1 + SLACK_US)
    if lo > hi:
        raise FuseviewError(f"cannot align the clocks: the runs' bounds disagree by {lo - hi:.1f} µs")
    return float((lo + hi) / 2), float(hi - lo)


def device_records(events: list[dict], select: Callable[[dict], bool] | None = None) -> list[Record]:
    """The device activities of a torch trace, each with its launch time (the API call of its correlation).

    select: which events are device records (default: CUDA kernels, copies and sets). A record with no
    launch record is taken as launched at its start (so on the CPU, a torch op's own start).
    """
    pick = select or (lambda e: e.get("cat") in DEVICE_CATS)
    launches = {}
    for e in events:
        corr = (e.get("args") or {}).get("correlation")
        if e.get("cat") in LAUNCH_CATS and corr is not None:
            launches[corr] = float(e["ts"])
    out = []
    for e in events:
        if pick(e):
            start = float(e["ts"])
            corr = (e.get("args") or {}).get("correlation")
            out.append(Record(launches.get(corr, start), start, float(e.get("dur", 0.0))))
    return out


def attribute(marks: Sequence[tuple[float, float]], runs: Sequence[tuple[float, float]],
              nodes: list[tuple[str, float, float, str]], records: list[Record]) -> dict:
    """Per node device µs per run, the unattributed µs and share, per-run GPU busy µs: the clocks aligned."""
    offset, uncertainty = align(marks, runs)
    marked = runs[-len(marks):]
    first, last = marked[0][0], marked[-1][1]
    spans = [(name, s + offset, e + offset) for name, s, e, _ in nodes if first <= s <= last]
    launched = [[r for r in records if m0 <= r.launch <= m1] for m0, m1 in marks]
    flat = [(r.launch, r.start, r.dur) for rs in launched for r in rs]
    got = attribute_kernels(spans, flat)
    busy = [attribute_kernels([], [(r.launch, r.start, r.dur) for r in rs])["busy_us"] for rs in launched]
    n = len(marks)
    per_node = {k: v / n for k, v in got["node_device_us"].items()}
    return {
        "what": WHAT,
        "runs": n,
        "clock_offset_us": offset,
        "clock_uncertainty_us": uncertainty,
        "records_per_run": len(flat) / n,
        "node_device_us": per_node,
        "node_sum_us": sum(per_node.values()),
        "unattributed_us": got["unattributed_us"] / n,
        "unattributed_share": got["unattributed_share"],
        "busy_us": {"mean": float(np.mean(busy)), "p50": float(np.median(busy)), "min": float(np.min(busy)),
                    "max": float(np.max(busy))},
    }


def measure_device_time(model: Any, feeds: dict[str, np.ndarray], provider: str = "cuda",
                        opt_level: str = "disabled", runs: int = 5, threads: int = 0) -> dict:
    """Device time per node of a model on the CUDA EP, or {"available": False, "reason": one line}."""
    source, why = kernel_source()
    if source is None:
        return {"available": False, "reason": why}
    from fuseview.runtime.sessions import CUDA, create_session

    with tempfile.TemporaryDirectory(prefix="fuseview-devtime-") as tmp:
        sess, choice = create_session(model, provider, opt_level, str(Path(tmp) / "ort"), threads=threads)
        if choice.provider != CUDA:
            sess.end_profiling()
            return {"available": False, "reason": f"no device time: the session runs on {choice.provider}"}
        got = session_device_time(sess, feeds, runs)
    return {**got, "source": source, "detail": why} if got["available"] else got


def session_device_time(sess: Any, feeds: dict[str, np.ndarray], runs: int, cuda: bool = True,
                        select: Callable[[dict], bool] | None = None, all_threads: bool = False) -> dict:
    """The device time of `runs` runs of a session made with onnxruntime profiling on (which it ends).

    cuda=False, select and all_threads: the CPU tests' stand-ins for kernels (see traced_runs)."""
    from fuseview.runtime.binding import bound_run, session_device

    # inputs and outputs on the device: no copies in the kernel list (on the CPU: the same binding path)
    run = bound_run(sess, feeds, session_device(sess))
    run()  # warm-up: allocations and cuDNN/cuBLAS choices stay out of the records
    try:
        events = traced_runs(run, runs, cuda=cuda, all_threads=all_threads)
    except Exception as exc:  # noqa: BLE001 - CUPTI refused (no permission, another profiler): go on
        return {"available": False, "reason": f"no device time: torch.profiler failed: {exc}"[:300]}
    finally:
        ort_events = trace.read_trace(sess.end_profiling())
    records = device_records(events, select)
    if not records:
        return {"available": False, "reason": "no device time: torch.profiler recorded no CUDA kernels"
                " (CUPTI gave no activity records)"}
    runs_ort, nodes = ort_spans(ort_events)
    try:
        out = attribute(markers(events), runs_ort, nodes, records)
    except FuseviewError as exc:
        return {"available": False, "reason": f"no device time: {exc}"}
    return {"available": True, "source": SOURCE, **out}


def node_device_times(nodes: list[dict], device: dict) -> None:
    """Write each node's device µs per run ("device_mean_us") into a profile's nodes (None on the CPU EP)."""
    per = device.get("node_device_us", {})
    for n in nodes:
        on_cpu = n.get("provider") == trace.CPU_PROVIDER
        n["device_mean_us"] = None if on_cpu else float(per.get(n["name"], 0.0))



def roofline_times(nodes: list[dict]) -> list[dict]:
    """The nodes with each one's device time as its median where it has one (the roofline's time), marked."""
    out = []
    for n in nodes:
        us = n.get("device_mean_us")
        out.append(n if us is None else {**n, "p50_us": float(us), "time_source": "device"})
    return out
