"""The profile report: one JSON file (schema_version 3; 1 and 2 still read), written atomically, validated."""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any, cast

import onnxruntime as ort

from fuseview import stats as _stats
from fuseview.atomic import write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.runtime.sessions import CUDA, available_providers
from fuseview.safe_io import load_json

SCHEMA_VERSION = 3  # 3: each model may hold a roofline section
READABLE_VERSIONS = (1, 2, 3)
KIND = "fuseview.profile"

# key -> type(s) a valid report must have; nested checks below.
_TOP = {"schema_version": int, "kind": str, "created": str, "environment": dict, "inputs": dict,
        "models": list, "comparison": (dict, type(None))}
_ENV = {"onnxruntime": str, "providers": list, "cpu": (str, type(None)), "gpu": (str, type(None)),
        "platform": str, "python": str}
_INPUTS = {"source": str, "seed": (int, type(None)), "dims": dict, "feeds": list}
_MODEL = {"role": str, "path": (str, type(None)), "provider": dict, "ort_opt_level": str, "runs": int,
          "warmup": int, "latency_ms": dict, "run_us": dict, "node_sum_us": dict, "nodes": list,
          "op_types": list, "cuda_kernel_events": bool}
_STATS = ("mean", "p50", "p90")
_NODE = {"name": str, "op_type": str, "provider": str, "time_source": str, "mean_us": (int, float),
         "p50_us": (int, float), "p90_us": (int, float), "share": (int, float)}
_LATENCY = {"method": str, "runs": int, "level": (int, float), "speedup_p50": (int, float), "ci": list,
            "threshold": (int, float), "verdict": str, "noise": dict}
_NOISE = {"cv_model": (int, float, type(None)), "cv_against": (int, float, type(None)),
          "warning": (str, type(None))}
VERDICTS = _stats.VERDICTS  # "cannot tell" is a verdict value; reports made before it still read
_OVERHEAD = {"method": str, "per_event_us": (int, float), "node_floor_us": (int, float)}
_OP = {"op_type": str, "provider": str, "nodes": int, "mean_us": (int, float), "p50_us": (int, float),
       "p90_us": (int, float), "share": (int, float)}


def cpu_name() -> str | None:
    """The CPU model name from /proc/cpuinfo, else what platform says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or None


def gpu_name() -> str | None:
    """The first GPU's name from nvidia-smi, or None when there is no nvidia-smi or it fails."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    names = [x.strip() for x in out.splitlines() if x.strip()]
    return names[0] if names else None


def environment(cuda_used: bool) -> dict:
    """Where the report was made: onnxruntime version and providers, CPU, GPU (when CUDA was used)."""
    import sys

    return {
        "onnxruntime": ort.__version__,
        "providers": available_providers(),
        "cpu": cpu_name(),
        "gpu": gpu_name() if cuda_used else None,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }


def build_report(
    inputs: dict, models: list[dict], comparison: dict | None, ort_fusions: list | None = None,
    profiler_overhead: dict | None = None,
) -> dict:
    """Assemble a report of the current schema_version from the runtime results."""
    import datetime

    cuda_used = any(m.get("provider", {}).get("provider") == CUDA for m in models)
    rep = {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "environment": environment(cuda_used),
        "inputs": inputs,
        "models": models,
        "comparison": comparison,
    }
    if ort_fusions is not None:
        rep["ort_fusions"] = ort_fusions
    if profiler_overhead is not None:
        rep["profiler_overhead"] = profiler_overhead
    return rep


def json_safe(obj: Any) -> Any:
    """JSON-safe copy: NaN/inf become null (JSON has no NaN), numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def report_text(report: dict, src: str = "report") -> str:
    """The report as validated JSON text (NaN/inf as null)."""
    report = json_safe(report)
    validate(report, src)
    return json.dumps(report, indent=1, allow_nan=False)


def save_report(report: dict, path: str | os.PathLike) -> Path:
    """Validate and write the report atomically (temp file in the same folder, then os.replace)."""
    return write_text_atomic(path, report_text(report, str(path)))


def _check(obj: dict, spec: dict, where: str, src: str) -> None:
    if not isinstance(obj, dict):
        raise FuseviewError(f"{src}: {where} is not an object")
    for key, typ in spec.items():
        if key not in obj:
            raise FuseviewError(f"{src}: {where} has no {key!r}")
        if not isinstance(obj[key], typ) or (typ is int and isinstance(obj[key], bool)):
            raise FuseviewError(f"{src}: {where}.{key} has the wrong type ({type(obj[key]).__name__})")


def _check_hist(h, where: str, src: str) -> None:
    """The optional abs_diff_hist of an output diff: zero count, n+1 increasing edges, n counts."""
    _check(h, {"zero": int, "edges": list, "counts": list}, where, src)
    edges, counts = h["edges"], h["counts"]
    if not all(isinstance(e, (int, float)) and not isinstance(e, bool) for e in edges):
        raise FuseviewError(f"{src}: {where}.edges must be numbers")
    if not edges or edges[0] <= 0 or any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
        raise FuseviewError(f"{src}: {where}.edges must be positive and increasing")
    if len(counts) != len(edges) - 1 or not all(isinstance(c, int) and c >= 0 for c in counts):
        raise FuseviewError(f"{src}: {where}.counts must be {len(edges) - 1} counts (one per bin)")


def validate(report: object, src: str = "report") -> None:
    """FuseviewError naming the first thing that does not match a readable schema_version."""
    if not isinstance(report, dict):
        raise FuseviewError(f"{src}: not a fuseview profile report (top level is not an object)")
    if report.get("kind") != KIND:
        raise FuseviewError(f"{src}: not a fuseview profile report (kind is {report.get('kind')!r})")
    version = report.get("schema_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise FuseviewError(
            f"{src}: report schema_version {version!r};"
            f" this fuseview reads {' and '.join(map(str, READABLE_VERSIONS))}"
        )
    _check(report, _TOP, "report", src)
    _check(report["environment"], _ENV, "environment", src)
    _check(report["inputs"], _INPUTS, "inputs", src)
    if not report["models"]:
        raise FuseviewError(f"{src}: report has no models")
    for i, m in enumerate(report["models"]):
        where = f"models[{i}]"
        _check(m, _MODEL, where, src)
        for key in ("latency_ms", "run_us", "node_sum_us"):
            for s in _STATS:
                if not isinstance(m[key].get(s), (int, float)):
                    raise FuseviewError(f"{src}: {where}.{key}.{s} is missing or not a number")
        for j, n in enumerate(m["nodes"]):
            _check(n, _NODE, f"{where}.nodes[{j}]", src)
        for j, n in enumerate(m["op_types"]):
            _check(n, _OP, f"{where}.op_types[{j}]", src)
        if version >= 3 and "roofline" in m:
            _check_roofline(m["roofline"], f"{where}.roofline", src)
        if "device_time" in m:
            _check_device(m["device_time"], f"{where}.device_time", src)
    cmp = report["comparison"]
    if cmp is not None:
        _check(cmp, {"atol": (int, float), "rtol": (int, float), "outputs": dict, "passed": bool,
                     "fusions": list}, "comparison", src)
        for name, d in cmp["outputs"].items():
            if isinstance(d, dict) and "abs_diff_hist" in d:
                _check_hist(d["abs_diff_hist"], f"comparison.outputs[{name!r}].abs_diff_hist", src)
        if "deployment" in cmp:
            _check(cmp["deployment"], {"precision": str, "reference": str, "outputs": dict,
                                       "within_noise_floor": bool}, "comparison.deployment", src)
        if version >= 2:
            _check_latency(cmp.get("latency"), src)
    if version >= 2 and "profiler_overhead" in report:
        _check(report["profiler_overhead"], _OVERHEAD, "profiler_overhead", src)


_ROOFLINE = {"machine": dict, "nodes": list, "non_gemm_share": (int, float)}
_MACHINE = {"peak_gflops": (int, float), "peak_gbps": (int, float), "method": str}
_ROOF_NODE = {"node": str, "op_type": str, "flops": int, "bytes": int, "time_us": (int, float),
              "achieved_gflops": (int, float), "achieved_gbps": (int, float), "bound": str}


def _check_roofline(roof, where: str, src: str) -> None:
    """A model's roofline section (version 3): the machine's roofs and one point per costed node."""
    _check(roof, _ROOFLINE, where, src)
    _check(roof["machine"], _MACHINE, f"{where}.machine", src)
    for key in ("peak_gflops", "peak_gbps"):  # divided by: 0, NaN, negative or absurd give inf or nonsense
        _in_range(roof["machine"][key], _ROOF_LIMIT, f"{where}.machine.{key}", src)
    _in_range(roof["non_gemm_share"], (0.0, 1.0), f"{where}.non_gemm_share", src)
    for j, n in enumerate(roof["nodes"]):
        _check(n, _ROOF_NODE, f"{where}.nodes[{j}]", src)
        if n["bound"] not in ("memory", "compute"):
            raise FuseviewError(f"{src}: {where}.nodes[{j}].bound must be 'memory' or 'compute'")
        for key in ("flops", "bytes", "time_us", "achieved_gflops", "achieved_gbps"):
            _in_range(n[key], (0.0, _HUGE), f"{where}.nodes[{j}].{key}", src)


_DEVICE = {"what": str, "source": str, "runs": int, "node_device_us": dict, "node_sum_us": (int, float),
           "unattributed_us": (int, float), "unattributed_share": (int, float), "busy_us": dict,
           "clock_offset_us": (int, float), "clock_uncertainty_us": (int, float)}


def _check_device(dev, where: str, src: str) -> None:
    """A model's device_time section: GPU kernel time per node (runtime.device_time), or why there is none."""
    _check(dev, {"available": bool}, where, src)
    if not dev["available"]:
        _check(dev, {"reason": str}, where, src)
        return
    _check(dev, _DEVICE, where, src)
    for key in ("mean", "p50"):
        if not isinstance(dev["busy_us"].get(key), (int, float)):
            raise FuseviewError(f"{src}: {where}.busy_us.{key} is missing or not a number")
    _in_range(dev["unattributed_share"], (0.0, 1.0), f"{where}.unattributed_share", src)
    for name, us in dev["node_device_us"].items():
        if not isinstance(us, (int, float)) or isinstance(us, bool):
            raise FuseviewError(f"{src}: {where}.node_device_us[{name[:40]!r}] is not a number")
        _in_range(us, (0.0, _HUGE), f"{where}.node_device_us", src)


# A measured roof: from 1 MB/s (or MFLOP/s) to 10 PB/s; counts and times from 0 to 1e18.
_ROOF_LIMIT, _HUGE = (1e-3, 1e7), 1e18


def _in_range(x: float, limits: tuple[float, float], where: str, src: str) -> None:
    lo, hi = limits
    if not lo <= x <= hi:  # NaN fails every comparison; a huge int is compared exactly, never converted
        raise FuseviewError(f"{src}: {where} is {str(x)[:24]}, outside [{lo:g}, {hi:g}]")


def _check_latency(lat, src: str) -> None:
    """comparison.latency of a version 2 report: the interleaved A/B speed-up, interval and verdict."""
    if lat is None:
        raise FuseviewError(f"{src}: comparison has no 'latency'")
    _check(lat, _LATENCY, "comparison.latency", src)
    _check(lat["noise"], _NOISE, "comparison.latency.noise", src)
    ci = lat["ci"]
    if len(ci) != 2 or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in ci):
        raise FuseviewError(f"{src}: comparison.latency.ci must be two numbers [lo, hi]")
    if lat["verdict"] not in VERDICTS:
        raise FuseviewError(f"{src}: comparison.latency.verdict {lat['verdict']!r} is not one of {VERDICTS}")


def load_report(path: str | os.PathLike) -> dict:
    """Read a report (possibly made on another machine) and check it against the schema."""
    if not os.path.lexists(path):
        raise FuseviewError(f"{path}: report not found")
    # regular file, size-checked, depth-bounded, NaN/Infinity refused
    report = load_json(path, "report", "readable JSON report")
    validate(report, str(path))
    return cast(dict, report)  # validate refused anything but a report object


def latency_verdict(report: dict) -> dict | None:
    """comparison.latency of a report, its verdict that of stats.verdict on its interval (a report made
    before "cannot tell" may say "no difference" of an interval too wide for any verdict); for a version 1
    report, None (it has only two medians)."""
    cmp = report.get("comparison") or {}
    lat = cmp.get("latency")
    if lat is None:
        return None
    lo, hi = lat["ci"]
    return {**lat, "verdict": _stats.verdict(lo, hi, lat["threshold"])}


def speedup_text(lat: dict) -> str:
    """e.g. 'fused is faster: 1.31x [1.27, 1.35] (95% CI, 50 interleaved runs, threshold 2%)'."""
    lo, hi = lat["ci"]
    sessions = lat.get("sessions", 1)  # absent from reports made before several sessions per model
    where = f" in {sessions} sessions" if sessions > 1 else ""
    # the ends as stats.interval_text prints them: [1.004, 1.67] faster never reads as [1.00, 1.67]
    figures = _stats.interval_text(lat["speedup_p50"], lo, hi, lat["threshold"])
    budget = lat.get("budget_s")
    batches = f", {lat.get('batches', '?')} batches within a budget of {budget:g} s" if budget else ""
    level = _stats.level_text(lat["level"])
    return (f"{figures} {lat['verdict']} ({level} CI, {lat['runs']} {lat['method']} runs{where}"
            f"{batches}, threshold {lat['threshold']:.0%})")


CANNOT_TELL = "cannot tell on this machine now"
# onnxruntime's profiler costs about this per node event on a quiet machine (README, bench_profile.py)
QUIET_EVENT_US = (4.0, 7.0)


def cannot_tell(lat: dict | None) -> bool:
    """True when the comparison's interval supports no verdict (stats.verdict says "cannot tell")."""
    if lat is None:
        return False
    lo, hi = lat["ci"]
    return _stats.verdict(lo, hi, lat["threshold"]) == _stats.CANNOT_TELL


# how the remedies are named: the CLI's flags, or the profile dock's own controls
CLI_FLAGS = {"runs": "--runs {n}", "threads": "--threads 1", "sessions": "more --sessions",
             "budget": "--budget {s}"}
DOCK_CONTROLS = {"runs": "Runs {n}", "threads": "Threads 1", "sessions": "more Sessions",
                 "budget": "Budget {s} s"}


def cannot_tell_text(report: dict, names: dict[str, str] | None = None) -> str:
    """Why the comparison cannot be called (the interval, the profiler's overhead) and what would do;
    `names` says how to name the remedies (CLI_FLAGS, or DOCK_CONTROLS in the window)."""
    names = names or CLI_FLAGS
    from fuseview.stats import runs_needed

    lat = report["comparison"]["latency"]
    lo, hi = lat["ci"]
    why = [f"the {_stats.level_text(lat['level'])} interval runs from {lo:.2f}x to {hi:.2f}x"]
    ovh = report.get("profiler_overhead")
    if ovh:
        quiet = f"{QUIET_EVENT_US[0]:g}-{QUIET_EVENT_US[1]:g}"
        why.append(f"profiler overhead {ovh['per_event_us']:.0f} µs per node event ({quiet} µs when quiet)")
    noise = lat["noise"]
    cv_model, cv_against = (float("nan") if noise.get(k) is None else noise[k]
                            for k in ("cv_model", "cv_against"))
    need = runs_needed(cv_model, cv_against, lat["threshold"], lat["level"], noise.get("cv_paired"))
    if lat.get("more_runs"):  # the estimate made from this interval itself (stats.more_runs_to_decide)
        need = lat["runs"] + lat["more_runs"]
    budget = lat.get("budget_s")
    if budget and lat.get("budget_spent"):
        why.append(f"the budget of {budget:g} s ended after {lat['runs']} runs per model")
    # past a few thousand runs, more runs are not the remedy: a quieter machine is
    todo = []
    if need <= 2000 and budget and lat.get("budget_spent"):  # the runs it would need, as a budget
        todo = [f"{names['budget'].format(s=math.ceil(budget * need / max(lat['runs'], 1)))}"
                f" (about {need} runs per model)"]
    elif need <= 2000:
        todo = [f"{names['runs'].format(n=need)} (about that many runs per model)"]
    threads = {(m.get("profile_session") or {}).get("threads") for m in report.get("models", [])}
    if threads != {1}:
        todo.append(names["threads"])
    if lat.get("sessions", 1) > 1 and "sessions" in (noise.get("warning") or ""):
        todo.append(names["sessions"])
    remedy = "profile again on a quieter machine"
    if todo:
        remedy = f"try {' and '.join(todo)}, or a quieter machine"
    level = f", at onnxruntime optimization {lat['ort_opt']}" if lat.get("ort_opt") else ""
    return f"{CANNOT_TELL}{level} ({'; '.join(why)}): {remedy}"


def verdict_line(report: dict, model: str = "model", against: str = "against") -> str | None:
    """The one verdict line of a comparison, said of the `against` model, with speed-up and interval."""
    lat = latency_verdict(report)
    if lat is None:
        return None
    if cannot_tell(lat):
        return f"verdict: {cannot_tell_text(report)}"
    level = f", at onnxruntime optimization {lat['ort_opt']}" if lat.get("ort_opt") else ""
    if lat["verdict"] == "no difference":
        head = f"no difference between {against} and {model}"
    else:
        head = f"{against} is {lat['verdict']} than {model}"
    return f"verdict: {head}: {model}/{against} p50 {speedup_text(lat)}{level}"


def device_summary(dev: dict | None, host_node_sum_us: float, role: str | None = None) -> str | None:
    """One line on a CUDA model's device time (its `device_time` section: GPU busy per run, per-node device
    sum, unattributed share, beside the host-side node sum), or why there is none; None without it."""
    if not dev:
        return None
    head = f"{role}: " if role else ""
    if not dev.get("available"):
        return head + str(dev.get("reason", "no device time"))
    busy = dev["busy_us"]["mean"]
    share = f" ({dev['node_sum_us'] / busy:.0%} of busy)" if busy else ""
    return (f"{head}device time (GPU kernels, {dev['source']}, {dev['runs']} runs): busy {busy:.1f} us"
            f" per run, per-node device sum {dev['node_sum_us']:.1f} us{share}, unattributed"
            f" {dev['unattributed_share']:.0%}; host-side node sum {host_node_sum_us:.1f} us"
            " (the CUDA EP's node spans on the host: mostly launches)")


TITLE_SEP = " · latency "


def fused_pane_title(report: dict, base: str = "Fused") -> str:
    """The fused pane's title: `base` (up to any earlier latency part) + latency, speed-up, interval, verdict.

    The window calls it with the pane's current title each time a profile finishes.
    """
    base = base.split(TITLE_SEP)[0]
    m = {x["role"]: x for x in report.get("models", [])}.get("against")
    if m is None:
        return base
    head = f"{base}{TITLE_SEP}{m['latency_ms']['p50']:.2f} ms p50"
    lat = latency_verdict(report)
    if lat is None:
        return f"{head} (old report: no interval, profile again for a verdict)"
    if cannot_tell(lat):  # the interval's ends, as the verdict line gives them, but no point estimate
        lo, hi = lat["ci"]
        level = _stats.level_text(lat["level"])
        return f"{head}, speed-up: {CANNOT_TELL} ({level} CI from {lo:.2f}x to {hi:.2f}x)"
    return f"{head}, speed-up {speedup_text(lat)}"
