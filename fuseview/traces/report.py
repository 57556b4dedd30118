"""The trace comparison report: `fuseview.trace_compare`, schema_version 2, written atomically, validated.

Version 2 adds, per fused kernel, `attribution` ("provenance" or "name"), `kind` ("fused" or "extern") and
`provenance` (graph, post-grad and pre-grad nodes, aten ops, source lines; null when attributed by name),
the diff's `unclaimed_pre_grad` (pre-grad nodes no kernel's provenance names),
per trace `excluded_steps`, and the report's `provenance_log`. Version 1 files still load: they are
upgraded in memory (attribution "name", kind "fused", provenance null, no excluded steps).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from fuseview.atomic import write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.safe_io import load_json
from fuseview.traces.categories import CATEGORIES
from fuseview.traces.compare import diff
from fuseview.traces.stats import TraceStats
from fuseview.traces.torch_log import CompileLog

SCHEMA_VERSION = 2
READS = (1, 2)
KIND = "fuseview.trace_compare"
ROLES = ("before", "after")
SOURCES = ("pytorch", "onnxruntime")
_NUM = (int, float)
_TRACE = {"role": str, "path": str, "source": str, "steps": int, "step_kind": str, "step_us": dict,
          "step_times_us": list, "events": list}
_EVENT = {"name": str, "category": str, "count": int, "total_us": _NUM, "self_us": _NUM,
          "per_step_us": _NUM, "share": _NUM}
_DIFF = {"step_speedup": dict, "added": list, "removed": list, "changed": list, "fused_kernels": list,
         "note": (str, type(None)), "unclaimed_pre_grad": list}
_CHANGED = {"name": str, "count_before": int, "count_after": int, "total_us_before": _NUM,
            "total_us_after": _NUM}
_KERNEL = {"name": str, "fused_ops": list, "matched_before": list, "time_us": _NUM, "replaced_us": _NUM,
           "replaced_from": str, "attribution": str, "kind": str, "provenance": (dict, type(None))}
_PROVENANCE = {"graph": str, "kernel": str, "post_grad": list, "pre_grad": list, "aten": list, "source": list}
_SOURCE = {"file": str, "line": int, "code": str}
ATTRIBUTIONS = ("provenance", "name")
KINDS = ("fused", "extern")
_SPEEDUP = {"speedup_p50": _NUM, "ci": list, "verdict": str, "runs": int, "summary": str}


def _step_summary(us: list[float]) -> dict:
    s = sorted(us)
    mid = len(s) // 2
    p50 = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
    return {"mean": sum(s) / len(s), "p50": p50, "min": s[0], "max": s[-1]}


def trace_json(stats: TraceStats, role: str) -> dict:
    """One trace's entry in the report."""
    return {
        "role": role, "path": stats.path, "source": stats.source, "steps": stats.steps,
        "step_kind": stats.step_kind, "step_us": _step_summary(stats.step_us),
        "step_times_us": list(stats.step_us), "flow_events": stats.flows,
        "excluded_steps": list(stats.excluded),
        "events": [e.to_json() for e in stats.events],
    }


def build_report(before: TraceStats, after: TraceStats | None = None, log: CompileLog | None = None) -> dict:
    """The report of one trace (no diff) or of a before/after pair (exact with a provenance log)."""
    traces = [trace_json(before, "before")]
    if after is not None:
        traces.append(trace_json(after, "after"))
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "traces": traces,
            "provenance_log": log.path if log is not None else None,
            "provenance_choice": log.choice_json() if log is not None else None,
            "diff": diff(before, after, log) if after is not None else None}


def upgrade(rep: dict) -> dict:
    """A version-1 report in version 2's shape (kernels attributed by name), in place."""
    if rep.get("schema_version") == 1:
        rep["schema_version"] = SCHEMA_VERSION
        rep.setdefault("provenance_log", None)
        for t in rep.get("traces") or []:
            if isinstance(t, dict):
                t.setdefault("excluded_steps", [])
        for k in (rep.get("diff") or {}).get("fused_kernels") or []:
            if isinstance(k, dict):
                k.setdefault("attribution", "name")
                k.setdefault("kind", "fused")
                k.setdefault("provenance", None)
        if isinstance(rep.get("diff"), dict):
            rep["diff"].setdefault("unclaimed_pre_grad", [])
    return rep


def _check(d, spec: dict, where: str) -> None:
    if not isinstance(d, dict):
        raise FuseviewError(f"{where}: expected an object")
    for key, types in spec.items():
        if key not in d:
            raise FuseviewError(f"{where}: missing '{key}'")
        v = d[key]
        if isinstance(v, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
            raise FuseviewError(f"{where}.{key}: wrong type")
        if not isinstance(v, types):
            raise FuseviewError(f"{where}.{key}: wrong type ({type(v).__name__})")
        if isinstance(v, float) and not math.isfinite(v):
            raise FuseviewError(f"{where}.{key}: not a finite number")


def validate_report(rep) -> dict:
    """The report itself when it follows the schema; else FuseviewError naming the first problem."""
    _check(rep, {"schema_version": int, "kind": str, "traces": list, "diff": (dict, type(None))}, "report")
    if rep["kind"] != KIND:
        raise FuseviewError(f"report: kind is {rep['kind']!r}, not {KIND!r}")
    if rep["schema_version"] not in READS:
        raise FuseviewError(f"report: schema_version {rep['schema_version']} (this fuseview reads 1 and 2)")
    upgrade(rep)
    if not 1 <= len(rep["traces"]) <= 2:
        raise FuseviewError("report: traces must hold one or two traces")
    for i, t in enumerate(rep["traces"]):
        where = f"report.traces[{i}]"
        _check(t, _TRACE, where)
        if t["role"] != ROLES[i]:
            raise FuseviewError(f"{where}.role: expected {ROLES[i]!r}")
        if t["source"] not in SOURCES:
            raise FuseviewError(f"{where}.source: unknown {t['source']!r}")
        _check(t["step_us"], {k: _NUM for k in ("mean", "p50", "min", "max")}, f"{where}.step_us")
        for j, e in enumerate(t["events"]):
            _check(e, _EVENT, f"{where}.events[{j}]")
            if e["category"] not in CATEGORIES:
                raise FuseviewError(f"{where}.events[{j}].category: unknown {e['category']!r}")
    d = rep["diff"]
    if (d is None) != (len(rep["traces"]) == 1):
        raise FuseviewError("report: a diff needs exactly two traces")
    if d is not None:
        _check(d, _DIFF, "report.diff")
        _check(d["step_speedup"], _SPEEDUP, "report.diff.step_speedup")
        for j, c in enumerate(d["changed"]):
            _check(c, _CHANGED, f"report.diff.changed[{j}]")
        for j, k in enumerate(d["fused_kernels"]):
            _check(k, _KERNEL, f"report.diff.fused_kernels[{j}]")
            where = f"report.diff.fused_kernels[{j}]"
            if k["replaced_from"] not in ("host", "device"):
                raise FuseviewError(f"{where}.replaced_from: unknown value")
            if k["attribution"] not in ATTRIBUTIONS or k["kind"] not in KINDS:
                raise FuseviewError(f"{where}: unknown attribution or kind")
            if (k["provenance"] is None) != (k["attribution"] == "name"):
                raise FuseviewError(f"{where}.provenance: present exactly when attributed by provenance")
            if k["provenance"] is not None:
                _check(k["provenance"], _PROVENANCE, f"{where}.provenance")
                for n, src in enumerate(k["provenance"]["source"]):
                    _check(src, _SOURCE, f"{where}.provenance.source[{n}]")
    return rep


def report_text(rep: dict) -> str:
    """The validated report as JSON text."""
    validate_report(rep)
    return json.dumps(rep, indent=1, allow_nan=False) + "\n"


def save_report(rep: dict, path: str | os.PathLike) -> Path:
    """Validate and write the report atomically."""
    return write_text_atomic(path, report_text(rep))


def load_report(path: str | os.PathLike) -> dict:
    """Read and validate a report file (a regular file within FUSEVIEW_MAX_REPORT_BYTES, depth-bounded)."""
    if not os.path.lexists(path):
        raise FuseviewError(f"{path}: file not found")
    return validate_report(load_json(path, "report", "readable trace report"))
