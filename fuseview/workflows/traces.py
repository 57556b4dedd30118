"""The one traces pipeline: a trace (or a before/after pair, or a capture folder) to its typed report.

`fuseview trace`, `fuseview.trace(...)` and the window's trace workspace (through Session.open_traces) all
resolve and assemble a trace folder here, so the three give the same report for the same input.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from fuseview.errors import FuseviewError
from fuseview.progress import Progress, steps_of
from fuseview.reports import TraceReport

if TYPE_CHECKING:
    from fuseview.traces.fx_code import GraphParser
    from fuseview.traces.timeline import Timeline
    from fuseview.workflows.onnx_join import LineRow

BEFORE, AFTER = "before", "after"
PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class TraceInputs:
    """What to read, resolved: the before (and after) trace files, the provenance log folder, and the
    capture folder they came from (None for plain files)."""

    before: str
    after: str | None = None
    provenance: str | None = None
    folder: str | None = None
    steps: int | None = None

    @property
    def files(self) -> list[str]:
        """The trace files, before first."""
        return [p for p in (self.before, self.after) if p is not None]


@dataclass
class OpenedTraces:
    """A trace folder assembled: the report, and what the workspace draws beside it."""

    inputs: TraceInputs
    report: TraceReport
    timelines: list[Timeline] = field(default_factory=list)  # the median step of each trace (flame view)
    # compiled graph key -> its post-grad graph (the kernels tab draws it)
    graph_codes: dict[str, GraphParser | None] = field(default_factory=dict)
    join: list[LineRow] | None = None  # Inductor's kernels beside fuseview's fusions (a capture with ONNX)


def resolve_traces(paths: Sequence[PathLike], steps: int | None = None,
                   provenance: PathLike | None = None) -> TraceInputs:
    """The inputs of one or two traces or one capture folder (FuseviewError on a bad combination)."""
    from fuseview.traces.torch_log import resolve_inputs

    names = [os.fspath(p) for p in paths]
    if not 1 <= len(names) <= 2:
        raise FuseviewError(f"choose one or two traces, not {len(names)}")
    folder = names[0] if os.path.isdir(names[0]) else None
    before, after, prov = resolve_inputs(names[0], names[1] if len(names) > 1 else None,
                                         os.fspath(provenance) if provenance is not None else None)
    if prov is not None and after is None:
        raise FuseviewError("--provenance: needs the compiled (AFTER) trace it belongs to")
    if steps is not None and steps < 1:
        raise FuseviewError(f"--steps {steps}: must be at least 1")
    return TraceInputs(before, after, prov, folder, steps)


def assemble_traces(inputs: TraceInputs, progress: Progress | None = None,
                    timelines: bool = False, join: bool = False, ort_time: bool = False) -> OpenedTraces:
    """Read the traces, the provenance log, build the checked report; timelines: the flame view's median
    steps too; join: a capture folder's model.onnx joined on the kernels' source lines (ort_time: with
    onnxruntime times before and after fusion). progress(message, fraction) may raise Cancelled."""
    from fuseview.traces.report import build_report
    from fuseview.traces.stats import load_trace
    from fuseview.traces.torch_log import read_compile_log

    say = progress or (lambda _message, _fraction: None)
    files = inputs.files
    loaded = []
    for i, p in enumerate(files):
        say(f"reading {Path(p).name}", i / (len(files) + 1))
        loaded.append(load_trace(p, inputs.steps))
    say("comparing", len(files) / (len(files) + 1))
    after = loaded[1] if len(loaded) == 2 else None
    log = read_compile_log(inputs.provenance, after) if inputs.provenance is not None and after else None
    report = TraceReport.from_json(build_report(loaded[0], after, log))
    opened = OpenedTraces(inputs, report)
    if log is not None:
        opened.graph_codes = {g.key: g.post_grad_graph for g in log.graphs}
    if timelines:
        from fuseview.traces.timeline import step_timeline

        drawn = [step_timeline(t, role) for t, role in zip(loaded, (BEFORE, AFTER), strict=False)]
        opened.timelines = [t for t in drawn if t is not None]
    if join and inputs.folder is not None and after is not None:
        from fuseview.workflows.onnx_join import capture_join

        say("joining with model.onnx", 0.9)
        opened.join = capture_join(inputs.folder, report.to_json(), ort_time=ort_time,
                                   progress=steps_of(say, "onnxruntime: ", 0.9, 0.1))
    return opened


def open_traces(paths: Sequence[PathLike], steps: int | None = None, provenance: PathLike | None = None,
                progress: Progress | None = None, timelines: bool = False,
                join: bool = False, ort_time: bool = False) -> OpenedTraces:
    """resolve_traces then assemble_traces: one or two traces, or a capture folder, to its report."""
    return assemble_traces(resolve_traces(paths, steps, provenance), progress, timelines, join, ort_time)
