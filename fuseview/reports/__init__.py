"""Typed reports, one class per kind, below the session: the CLI's --json, the API and the window read and
write them (no Qt). Model reports (info, scan, fuse) in reports.model, the profile in reports.profile,
the trace comparison in reports.trace, the tune report in reports.tune (TuneReport, typed through: the
model the others follow). The profile and trace file schemas stay where they are checked (runtime.report,
traces.report), so old reports still load.
"""

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

__all__ = [
    "PROFILE_KIND", "REPORT_VERSION", "TRACE_KIND", "ChangedEvent", "CompareReport", "Decision", "Effect",
    "FinalCheck", "FuseReport", "FusedKernel", "GroupResult", "InfoReport", "KernelProvenance",
    "ProfileReport", "ScanReport", "SourceLine", "StepSpeedup", "StepSummary", "TraceDiff", "TraceReport",
    "TraceSummary", "TuneReport",
]
