"""What the window uses of the layers below the session, named here: the window (fuseview.ui) reaches runtime,
tuning, targets, fusion and the workflows only through the session (an import-linter contract)."""

from __future__ import annotations

from fuseview.runtime.costs import MeasuredCost, candidate_costs
from fuseview.runtime.deployment import deployment_lines
from fuseview.runtime.job import MAX_SESSIONS, ProfileRequest
from fuseview.runtime.report import (
    DOCK_CONTROLS,
    cannot_tell,
    cannot_tell_text,
    device_summary,
    fused_pane_title,
    latency_verdict,
    load_report,
    save_report,
    speedup_text,
)
from fuseview.runtime.sessions import CUDA, CUDA_HINT, OPT_LEVELS, ModelSource, available_providers
from fuseview.targets import parse_target
from fuseview.tuning.settings import TuneSettings
from fuseview.workflows.traces import OpenedTraces

__all__ = [
    "CUDA", "CUDA_HINT", "DOCK_CONTROLS", "MAX_SESSIONS", "OPT_LEVELS", "MeasuredCost", "ModelSource",
    "OpenedTraces", "ProfileRequest", "TuneSettings", "available_providers", "candidate_costs", "cannot_tell",
    "cannot_tell_text", "deployment_lines", "device_summary", "fused_pane_title", "latency_verdict",
    "load_report", "parse_target", "save_report", "speedup_text",
]
