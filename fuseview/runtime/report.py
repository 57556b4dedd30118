"""The profile report: one JSON file (schema_version 1), written atomically and validated on load."""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import subprocess
from pathlib import Path

import onnxruntime as ort

from fuseview.atomic import write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.runtime.sessions import CUDA, available_providers
from fuseview.safe_io import load_json

SCHEMA_VERSION = 1
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
    inputs: dict, models: list[dict], comparison: dict | None, ort_fusions: list | None = None
) -> dict:
    """Assemble a schema_version 1 report from the runtime results."""
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
    return rep


def _clean(obj):
    """JSON-safe copy: NaN/inf become null (JSON has no NaN), numpy scalars become Python numbers."""
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    if hasattr(obj, "item") and not isinstance(obj, (str, bytes)):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def save_report(report: dict, path: str | os.PathLike) -> Path:
    """Validate and write the report atomically (temp file in the same folder, then os.replace)."""
    report = _clean(report)
    validate(report, str(path))
    return write_text_atomic(path, json.dumps(report, indent=1, allow_nan=False))


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


def validate(report: dict, src: str = "report") -> None:
    """FuseviewError naming the first thing that does not match schema_version 1."""
    if not isinstance(report, dict):
        raise FuseviewError(f"{src}: not a fuseview profile report (top level is not an object)")
    if report.get("kind") != KIND:
        raise FuseviewError(f"{src}: not a fuseview profile report (kind is {report.get('kind')!r})")
    if report.get("schema_version") != SCHEMA_VERSION:
        raise FuseviewError(
            f"{src}: report schema_version {report.get('schema_version')!r};"
            f" this fuseview reads {SCHEMA_VERSION}"
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
    cmp = report["comparison"]
    if cmp is not None:
        _check(cmp, {"atol": (int, float), "rtol": (int, float), "outputs": dict, "passed": bool,
                     "fusions": list}, "comparison", src)
        for name, d in cmp["outputs"].items():
            if isinstance(d, dict) and "abs_diff_hist" in d:
                _check_hist(d["abs_diff_hist"], f"comparison.outputs[{name!r}].abs_diff_hist", src)


def load_report(path: str | os.PathLike) -> dict:
    """Read a report (possibly made on another machine) and check it against the schema."""
    if not os.path.lexists(path):
        raise FuseviewError(f"{path}: report not found")
    # regular file, size-checked, depth-bounded, NaN/Infinity refused
    report = load_json(path, "report", "readable JSON report")
    validate(report, str(path))
    return report
