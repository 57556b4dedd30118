"""Typed reports, one class per kind, below the session: the CLI's --json, the API and the window read and
write them (no Qt). Model reports (info, scan, fuse) in reports.model, the profile in reports.profile,
the trace comparison in reports.trace, the tune report in reports.tune (TuneReport, typed through: the
model the others follow). The profile and trace file schemas stay where they are checked (runtime.report,
traces.report), so old reports still load.

Each name is imported from its module when first asked for (PEP 562), so `fuseview info` does not pay
for the profile, trace and tune reports (and the statistics they import).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fuseview.reports.base import REPORT_VERSION
    from fuseview.reports.model import FuseReport, InfoReport, ScanReport
    from fuseview.reports.profile import PROFILE_KIND, CompareReport, ProfileReport
    from fuseview.reports.trace import (
        TRACE_KIND,
        ChangedEvent,
        FusedKernel,
        KernelProvenance,
        SourceLine,
        StepSpeedup,
        StepSummary,
        TraceDiff,
        TraceReport,
        TraceSummary,
    )
    from fuseview.reports.tune import Decision, Effect, FinalCheck, GroupResult, TuneReport

_WHERE = {
    "base": ("REPORT_VERSION",),
    "model": ("FuseReport", "InfoReport", "ScanReport"),
    "profile": ("PROFILE_KIND", "CompareReport", "ProfileReport"),
    "trace": ("TRACE_KIND", "ChangedEvent", "FusedKernel", "KernelProvenance", "SourceLine", "StepSpeedup",
              "StepSummary", "TraceDiff", "TraceReport", "TraceSummary"),
    "tune": ("Decision", "Effect", "FinalCheck", "GroupResult", "TuneReport"),
}
_MODULE = {name: module for module, names in _WHERE.items() for name in names}

__all__ = [
    "PROFILE_KIND", "REPORT_VERSION", "TRACE_KIND", "ChangedEvent", "CompareReport", "Decision", "Effect",
    "FinalCheck", "FuseReport", "FusedKernel", "GroupResult", "InfoReport", "KernelProvenance",
    "ProfileReport", "ScanReport", "SourceLine", "StepSpeedup", "StepSummary", "TraceDiff", "TraceReport",
    "TraceSummary", "TuneReport",
]


def __getattr__(name: str) -> Any:
    """A report class or constant, imported from its module on first use."""
    module = _MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
