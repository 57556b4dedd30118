"""The trace report (fuseview.trace_compare, schema_version 2) typed: `fuseview trace`, fuseview.trace and
the trace workspace read it. The file schema is checked in traces.report (version 1 is upgraded there);
each record keeps the keys its type does not name (extra) and the order it was read in, so a report read
and written again is the same text."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from fuseview.reports.base import JSON, FlatRecord, ordered, split

if TYPE_CHECKING:  # traces.stats (numpy) is imported when a report is read
    from fuseview.traces.stats import EventStats

TRACE_KIND = "fuseview.trace_compare"  # as traces.report


@dataclass
class StepSummary:
    """A trace's step time, µs: mean, median, least and most over its counted steps."""

    mean: float
    p50: float
    min: float
    max: float

    @classmethod
    def from_json(cls, d: JSON) -> StepSummary:
        """The summary of a checked trace entry."""
        return cls(d["mean"], d["p50"], d["min"], d["max"])

    def to_json(self) -> JSON:
        """As the report holds it."""
        return {"mean": self.mean, "p50": self.p50, "min": self.min, "max": self.max}


@dataclass
class TraceSummary:
    """One trace of the report: its role (before/after), file, source, steps and events."""

    TYPED: ClassVar[tuple[str, ...]] = ("role", "path", "source", "steps", "step_kind", "step_us",
                                        "step_times_us", "excluded_steps", "events")
    role: str
    path: str
    source: str  # pytorch or onnxruntime
    steps: int
    step_kind: str  # ProfilerStep or model_run
    step_us: StepSummary
    step_times_us: list[float]
    excluded_steps: list[str]  # the warm-up and compile steps left out, each with why
    events: list[EventStats]  # each event name, as the report has it (traces.stats)
    extra: JSON = field(default_factory=dict)  # flow_events
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> TraceSummary:
        """The trace of a checked entry."""
        from fuseview.traces import stats

        extra, order = split(d, cls.TYPED)
        return cls(d["role"], d["path"], d["source"], d["steps"], d["step_kind"],
                   StepSummary.from_json(d["step_us"]), list(d["step_times_us"]), list(d["excluded_steps"]),
                   [stats.EventStats.from_json(e) for e in d["events"]], extra=extra, order=order)

    def to_json(self) -> JSON:
        """As the report holds it."""
        known: JSON = {k: getattr(self, k) for k in self.TYPED}
        known["step_us"] = self.step_us.to_json()
        known["step_times_us"] = list(self.step_times_us)
        known["excluded_steps"] = list(self.excluded_steps)
        known["events"] = [e.to_json() for e in self.events]
        return ordered(known, self.extra, self.order)


@dataclass
class SourceLine(FlatRecord):
    """A line of user code a compiled kernel came from."""

    TYPED: ClassVar[tuple[str, ...]] = ("file", "line", "code")
    file: str
    line: int
    code: str
    extra: JSON = field(default_factory=dict)  # func, ...
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass
class KernelProvenance:
    """Where a kernel came from, by Inductor's provenance log: its graph, nodes, aten ops, source lines."""

    TYPED: ClassVar[tuple[str, ...]] = ("graph", "kernel", "post_grad", "pre_grad", "aten", "source")
    graph: str
    kernel: str
    post_grad: list[str]
    pre_grad: list[str]
    aten: list[str]
    source: list[SourceLine]
    extra: JSON = field(default_factory=dict)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> KernelProvenance:
        """The provenance of a checked kernel entry."""
        extra, order = split(d, cls.TYPED)
        src = [SourceLine.from_json(s) for s in d["source"]]
        return cls(d["graph"], d["kernel"], list(d["post_grad"]), list(d["pre_grad"]), list(d["aten"]), src,
                   extra=extra, order=order)

    def to_json(self) -> JSON:
        """As the report holds it."""
        known: JSON = {"graph": self.graph, "kernel": self.kernel, "post_grad": list(self.post_grad),
                       "pre_grad": list(self.pre_grad), "aten": list(self.aten),
                       "source": [s.to_json() for s in self.source]}
        return ordered(known, self.extra, self.order)


@dataclass
class FusedKernel:
    """A compiled kernel of the after trace against the before-trace ops it replaced (µs per step)."""

    TYPED: ClassVar[tuple[str, ...]] = ("name", "fused_ops", "matched_before", "time_us", "replaced_us",
                                        "replaced_from", "attribution", "kind", "provenance")
    name: str
    fused_ops: list[str]
    matched_before: list[str]
    time_us: float
    replaced_us: float
    replaced_from: str  # host or device (the replaced ops' GPU kernels)
    attribution: str  # provenance (exact) or name (a guess from the kernel's name)
    kind: str  # fused or extern
    provenance: KernelProvenance | None
    extra: JSON = field(default_factory=dict)  # per_step, speedup, ... as written
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> FusedKernel:
        """The kernel of a checked diff."""
        extra, order = split(d, cls.TYPED)
        prov = d["provenance"]
        return cls(d["name"], list(d["fused_ops"]), list(d["matched_before"]), d["time_us"], d["replaced_us"],
                   d["replaced_from"], d["attribution"], d["kind"],
                   None if prov is None else KernelProvenance.from_json(prov), extra=extra, order=order)

    def to_json(self) -> JSON:
        """As the report holds it."""
        known: JSON = {k: getattr(self, k) for k in self.TYPED}
        known["fused_ops"], known["matched_before"] = list(self.fused_ops), list(self.matched_before)
        known["provenance"] = None if self.provenance is None else self.provenance.to_json()
        return ordered(known, self.extra, self.order)


@dataclass
class ChangedEvent(FlatRecord):
    """An event name in both traces: its count and total time (µs) before and after."""

    TYPED: ClassVar[tuple[str, ...]] = ("name", "count_before", "count_after", "total_us_before",
                                        "total_us_after")
    name: str
    count_before: int
    count_after: int
    total_us_before: float
    total_us_after: float
    extra: JSON = field(default_factory=dict)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)


@dataclass
class StepSpeedup(FlatRecord):
    """Step time before ÷ after over independent runs: median, interval, verdict, and its one line."""

    TYPED: ClassVar[tuple[str, ...]] = ("speedup_p50", "ci", "verdict", "runs", "summary")
    speedup_p50: float
    ci: list[float]
    verdict: str
    runs: int
    summary: str
    extra: JSON = field(default_factory=dict)  # noise, sessions, ... (stats.SpeedupEstimate.to_json)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @property
    def noise_warning(self) -> str | None:
        """The noise note of the estimate, if any."""
        noise = self.extra.get("noise")
        warning = noise.get("warning") if isinstance(noise, dict) else None
        return str(warning) if warning else None


@dataclass
class TraceDiff:
    """Before against after: the step speed-up, event names added/removed/in both, the compiled kernels."""

    TYPED: ClassVar[tuple[str, ...]] = ("step_speedup", "added", "removed", "changed", "fused_kernels",
                                        "unclaimed_pre_grad", "note")
    step_speedup: StepSpeedup
    added: list[str]
    removed: list[str]
    changed: list[ChangedEvent]
    fused_kernels: list[FusedKernel]
    unclaimed_pre_grad: list[JSON]  # pre-grad nodes no kernel's provenance names
    note: str | None
    extra: JSON = field(default_factory=dict)
    order: tuple[str, ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def from_json(cls, d: JSON) -> TraceDiff:
        """The diff of a checked report."""
        extra, order = split(d, cls.TYPED)
        return cls(StepSpeedup.from_json(d["step_speedup"]), list(d["added"]), list(d["removed"]),
                   [ChangedEvent.from_json(c) for c in d["changed"]],
                   [FusedKernel.from_json(k) for k in d["fused_kernels"]], list(d["unclaimed_pre_grad"]),
                   d["note"], extra=extra, order=order)

    def to_json(self) -> JSON:
        """As the report holds it."""
        known: JSON = {"step_speedup": self.step_speedup.to_json(), "added": list(self.added),
                       "removed": list(self.removed), "changed": [c.to_json() for c in self.changed],
                       "fused_kernels": [k.to_json() for k in self.fused_kernels],
                       "unclaimed_pre_grad": list(self.unclaimed_pre_grad), "note": self.note}
        return ordered(known, self.extra, self.order)


@dataclass
class TraceReport:
    """Profiler traces summarised or compared (fuseview.trace_compare v2): `fuseview trace`, its window."""

    KIND: ClassVar[str] = TRACE_KIND
    schema_version: int
    traces: list[TraceSummary]
    diff: TraceDiff | None = None
    provenance_log: str | None = None  # the TORCH_TRACE log of an exact attribution
    provenance_choice: JSON | None = None  # that log, and the folder's other logs with why not

    @classmethod
    def from_json(cls, data: object) -> TraceReport:
        """A checked report (FuseviewError naming what does not fit the schema; version 1 is upgraded)."""
        from fuseview.traces import report as trace_schema

        rep: JSON = trace_schema.validate_report(data)
        diff = rep["diff"]
        return cls(rep["schema_version"], [TraceSummary.from_json(t) for t in rep["traces"]],
                   None if diff is None else TraceDiff.from_json(diff), rep.get("provenance_log"),
                   rep.get("provenance_choice"))

    def to_json(self) -> JSON:
        """The report as the file holds it."""
        return {"schema_version": self.schema_version, "kind": self.KIND,
                "traces": [t.to_json() for t in self.traces], "provenance_log": self.provenance_log,
                "provenance_choice": self.provenance_choice,
                "diff": None if self.diff is None else self.diff.to_json()}

    def text(self) -> str:
        """The checked report as JSON text (`--json -`)."""
        from fuseview.traces import report as trace_schema

        return trace_schema.report_text(self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TraceReport:
        """Read and check a report file."""
        from fuseview.traces import report as trace_schema

        return cls.from_json(trace_schema.load_report(path))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Check and write the report atomically."""
        from fuseview.traces import report as trace_schema

        return trace_schema.save_report(self.to_json(), path)

    @property
    def exact_kernels(self) -> list[FusedKernel]:
        """The compiled kernels attributed by Inductor's provenance (none without a diff)."""
        kernels = [] if self.diff is None else self.diff.fused_kernels
        return [k for k in kernels if k.attribution == "provenance"]
