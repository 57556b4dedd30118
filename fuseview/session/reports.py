"""The typed reports, where the session layer first kept them: they live in fuseview.reports now."""

from fuseview.reports import (
    PROFILE_KIND,
    REPORT_VERSION,
    TRACE_KIND,
    CompareReport,
    FuseReport,
    InfoReport,
    ProfileReport,
    ScanReport,
    TraceReport,
)

__all__ = [
    "PROFILE_KIND", "REPORT_VERSION", "TRACE_KIND", "CompareReport", "FuseReport", "InfoReport",
    "ProfileReport", "ScanReport", "TraceReport",
]
