"""Steps and per-name statistics of one trace: count, total and self time, time per step, share."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from fuseview.traces.categories import DEVICE_CATS, STEP, category, is_step
from fuseview.traces.reader import ONNXRUNTIME, RawTrace, read_trace

PROFILER_STEPS = "ProfilerStep"
PYTHON_CAT = "python_function"
MODEL_RUNS = "model_run"
WHOLE = "whole trace"
# torch.compile's own timing markers (dynamo_timed): a step holding one compiled something
_COMPILE = re.compile(r"^(entire_frame_compile|backend_compile)$|\(dynamo_timed\)$")


@dataclass(frozen=True)
class EventStats:
    """One event name over the steps: how often, how long (with and without its children), what share."""

    name: str
    category: str
    count: int
    total_us: float
    self_us: float
    per_step_us: float
    share: float  # total_us / the summed step time
    on_device: bool = False  # a GPU kernel or copy (not in the report: its category says enough)
    python: bool = False  # a Python function's frame (with_stack=True): hidden by default in every view

    def to_json(self) -> dict:
        """JSON-ready dict (the report's event entry)."""
        out = {"name": self.name, "category": self.category, "count": self.count,
               "total_us": self.total_us, "self_us": self.self_us, "per_step_us": self.per_step_us,
               "share": self.share}
        return out | {"python": True} if self.python else out

    @classmethod
    def from_json(cls, d: dict) -> EventStats:
        """The event of a report's (checked) entry: what to_json wrote."""
        return cls(d["name"], d["category"], d["count"], d["total_us"], d["self_us"], d["per_step_us"],
                   d["share"], python=bool(d.get("python", False)))


@dataclass
class TraceStats:
    """A summarised trace: its steps and step times, and statistics per event name."""

    path: str
    source: str
    step_kind: str  # ProfilerStep, model_run, or whole trace
    step_us: list[float]
    events: list[EventStats]
    flows: int
    raw: RawTrace
    in_step: np.ndarray  # bool per raw event: inside a counted step
    parent: np.ndarray  # raw index of the enclosing event on the same thread, -1 at the top
    step_starts: tuple[float, ...] = ()  # start of each counted step (empty for a whole-trace step)
    excluded: list[str] = field(default_factory=list)  # warm-up steps left out, each with why

    @property
    def steps(self) -> int:
        """Number of steps counted."""
        return len(self.step_us)

    def by_name(self) -> dict[str, EventStats]:
        """Statistics keyed by event name."""
        return {e.name: e for e in self.events}


def _steps(raw: RawTrace, cats: list[str]) -> tuple[str, list[tuple[float, float]]]:
    if raw.source == ONNXRUNTIME:
        return MODEL_RUNS, sorted(raw.runs)
    # a step is a (name, cat) pair: Kineto repeats ProfilerStep#N on the GPU as gpu_user_annotation
    step_names = {i for i, n in enumerate(raw.names) if is_step(n, "user_annotation")}
    step_cats = {i for i, c in enumerate(cats) if c == "user_annotation"}
    if step_names and step_cats:
        hit = (np.isin(np.frombuffer(raw.name_id, dtype=np.int32), list(step_names))
               & np.isin(np.frombuffer(raw.cat_id, dtype=np.int32), list(step_cats)))
        idx = np.nonzero(hit)[0].tolist()
        marks = sorted((raw.ts[i], raw.dur[i]) for i in idx)
        if marks:
            return PROFILER_STEPS, marks
    start = min(raw.ts)
    end = max(t + d for t, d in zip(raw.ts, raw.dur, strict=True))
    return WHOLE, [(start, end - start)]


def _nesting(thread: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent index and children's summed time of every event (nesting by time on each thread)."""
    n = len(ts)
    order = np.lexsort((-dur, ts, thread))
    parent = np.full(n, -1, dtype=np.int64)
    child_sum = np.zeros(n, dtype=np.float64)
    ends = (ts + dur).tolist()
    ts_l, th_l = ts.tolist(), thread.tolist()
    stack: list[int] = []
    cur_thread = None
    par = parent.tolist()
    for i in order.tolist():
        if th_l[i] != cur_thread:
            stack.clear()
            cur_thread = th_l[i]
        t = ts_l[i]
        while stack and t >= ends[stack[-1]]:
            stack.pop()
        if stack:
            par[i] = stack[-1]
        stack.append(i)
    parent = np.asarray(par, dtype=np.int64)
    has = parent >= 0
    np.add.at(child_sum, parent[has], dur[has])
    return parent, child_sum


def _warmup_steps(raw: RawTrace, kind: str, marks: list) -> dict[int, str]:
    """Steps that are not steady state: a session's first model_run, a step torch.compile compiled in."""
    if len(marks) < 2:
        return {}
    if kind == MODEL_RUNS:
        return {0: "the session's first model_run (warm-up)"}
    if kind != PROFILER_STEPS:
        return {}
    ids = [i for i, n in enumerate(raw.names) if _COMPILE.search(n)]
    if not ids:
        return {}
    hit = np.isin(np.frombuffer(raw.name_id, dtype=np.int32), ids)
    starts = np.asarray([m[0] for m in marks])
    steps = set((np.searchsorted(starts, np.frombuffer(raw.ts, dtype=np.float64)[hit], "right") - 1).tolist())
    out = {i: "torch.compile compiled during this step" for i in sorted(steps) if i >= 0}
    return out if len(out) < len(marks) else {}


def summarise(raw: RawTrace, last_steps: int | None = None) -> TraceStats:
    """Steps and per-name statistics of a read trace; last_steps keeps only the last N steps.

    Warm-up steps (an onnxruntime session's first run, a step with compilation in it) are left out and
    listed in `excluded`.
    """
    kind, marks = _steps(raw, raw.cats)
    warm = _warmup_steps(raw, kind, marks)
    kept = [i for i in range(len(marks)) if i not in warm]
    if last_steps is not None and last_steps > 0:
        kept = kept[-last_steps:]
    excluded = [f"{kind} {i + 1}: {why}" for i, why in warm.items()]
    ts = np.frombuffer(raw.ts, dtype=np.float64)
    dur = np.frombuffer(raw.dur, dtype=np.float64)
    names = np.frombuffer(raw.name_id, dtype=np.int32)
    cats = np.frombuffer(raw.cat_id, dtype=np.int32)
    thread = np.frombuffer(raw.thread, dtype=np.int32)
    if kind == WHOLE:
        in_step = np.ones(len(ts), dtype=bool)
    else:
        # step i owns [start_i, start_i+1); device work of the last step may end after its marker
        owner = np.searchsorted(np.asarray([m[0] for m in marks]), ts, "right") - 1
        keep = np.zeros(len(marks) + 1, dtype=bool)
        keep[kept] = True
        in_step = keep[owner]  # owner -1 (before the first step) reads the extra False at the end
        marks = [marks[i] for i in kept]
    parent, child_sum = _nesting(thread, ts, dur)
    self_us = np.maximum(dur - child_sum, 0.0)
    step_us = [d for _, d in marks]
    total_step = float(sum(step_us)) or 1.0
    k = len(raw.names)
    count = np.bincount(names[in_step], minlength=k)
    total = np.bincount(names[in_step], weights=dur[in_step], minlength=k)
    selft = np.bincount(names[in_step], weights=self_us[in_step], minlength=k)
    # the category of a name: that of its first event (a name keeps its category)
    first_cat = np.full(k, -1, dtype=np.int64)
    first_cat[names[::-1]] = cats[::-1]
    events = []
    nsteps = max(len(step_us), 1)
    for i in np.nonzero(count)[0].tolist():
        name = raw.names[i]
        raw_cat = raw.cats[first_cat[i]]
        cat = category(name, raw_cat)
        if cat == STEP:
            continue  # steps are reported as step times, not as events
        events.append(EventStats(name, cat, int(count[i]), float(total[i]), float(selft[i]),
                                 float(total[i]) / nsteps, float(total[i]) / total_step,
                                 raw_cat in DEVICE_CATS, raw_cat == PYTHON_CAT))
    events.sort(key=lambda e: (-e.total_us, e.name))
    starts = tuple(t for t, _ in marks) if kind != WHOLE else ()
    return TraceStats(raw.path, raw.source, kind, step_us, events, raw.flows, raw, in_step, parent, starts,
                      excluded)


def load_trace(path: str | os.PathLike, last_steps: int | None = None) -> TraceStats:
    """Read and summarise one trace file."""
    return summarise(read_trace(path), last_steps)
