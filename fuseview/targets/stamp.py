"""The one place a report's `environment` is stamped: where it was measured (the machine's fingerprint) and
the target that measured there, for every report kind that has one (profile, tune; a trace report has none:
its traces were recorded elsewhere, by torch.profiler or onnxruntime)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fuseview.reports.tune import TuneReport

JSON = dict[str, Any]


def where(facts: JSON, target: JSON) -> JSON:
    """The environment of a measurement: the facts of the machine it ran on, and the target."""
    return {**facts, "target": target}


def stamp_profile(report: JSON, environment: JSON) -> JSON:
    """A profile report (JSON) with its environment completed: the facts run_profile wrote stay, the machine's
    other facts and the target are added."""
    env = report["environment"]
    env.update({k: v for k, v in environment.items() if k not in env or k == "target"})
    return report


def stamp_tune(report: TuneReport, environment: JSON) -> TuneReport:
    """A tune report with the environment of the target it was measured on (schema 2: at the top)."""
    report.environment = environment
    return report
