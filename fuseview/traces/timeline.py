"""One step of a trace as a timeline per thread (a flame view's data): start, length, depth, name, category.

The step shown is the median-length counted step (warm-up steps are not counted), so the view shows a
typical step, with its gaps, stalls and oddly quantised durations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from fuseview.traces.categories import category
from fuseview.traces.display import is_own_capture
from fuseview.traces.stats import PYTHON_CAT, TraceStats

MAX_EVENTS = 20_000  # per step drawn; a bigger step keeps its longest events


@dataclass(frozen=True)
class Timeline:
    """The events of one step: per event its thread row, nesting depth, start (µs into the step), length."""

    role: str
    step: int  # 1-based among the counted steps
    step_us: float
    threads: list[str]
    thread: np.ndarray
    depth: np.ndarray
    start: np.ndarray
    dur: np.ndarray
    names: list[str]
    categories: list[str]
    dropped: int  # events left out past MAX_EVENTS
    python: np.ndarray | None = None  # per event: a Python function's frame (with_stack=True)


def depth_of(parent: np.ndarray) -> np.ndarray:
    """Nesting depth of every event (0 at the top), by vectorised pointer jumping."""
    depth = np.zeros(len(parent), dtype=np.int64)
    up = parent.copy()
    live = np.nonzero(up >= 0)[0]
    while len(live):
        depth[live] += 1
        up[live] = parent[up[live]]
        live = live[up[live] >= 0]
    return depth


def step_timeline(stats: TraceStats, role: str, max_events: int = MAX_EVENTS) -> Timeline | None:
    """The median counted step of a trace as a Timeline (None without steps)."""
    if not stats.step_us or not stats.step_starts:
        return None
    order = np.argsort(stats.step_us, kind="stable")
    k = int(order[len(order) // 2])
    start = stats.step_starts[k]
    end = start + stats.step_us[k]
    raw = stats.raw
    ts = np.frombuffer(raw.ts, dtype=np.float64)
    dur = np.frombuffer(raw.dur, dtype=np.float64)
    idx = np.nonzero((ts >= start) & (ts < end) & stats.in_step)[0]
    dropped = 0
    if len(idx) > max_events:
        dropped = len(idx) - max_events
        idx = np.sort(idx[np.argsort(-dur[idx], kind="stable")[:max_events]])
    thread_ids = np.frombuffer(raw.thread, dtype=np.int32)[idx]
    used = sorted(set(thread_ids.tolist()))
    row = {t: i for i, t in enumerate(used)}
    name_id = np.frombuffer(raw.name_id, dtype=np.int32)[idx]
    cat_id = np.frombuffer(raw.cat_id, dtype=np.int32)[idx]
    return Timeline(
        role=role, step=k + 1, step_us=float(stats.step_us[k]), threads=[f"thread {t}" for t in used],
        thread=np.array([row[t] for t in thread_ids.tolist()], dtype=np.int64),
        depth=depth_of(stats.parent)[idx], start=ts[idx] - start, dur=dur[idx],
        names=[raw.names[i] for i in name_id.tolist()],
        categories=[category(raw.names[n], raw.cats[c]) for n, c in zip(name_id.tolist(), cat_id.tolist(),
                                                                         strict=True)],
        dropped=dropped, python=np.array([raw.cats[c] == PYTHON_CAT for c in cat_id.tolist()], dtype=bool))


def restack(thread: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Nesting depth of each event among the events given (per thread, by time: inside the last one open)."""
    depth = np.zeros(len(start), dtype=np.int64)
    order = np.lexsort((-dur, start, thread))
    open_ends: list[float] = []
    last_thread = None
    for i in order.tolist():
        if thread[i] != last_thread:
            open_ends, last_thread = [], thread[i]
        s = float(start[i])
        while open_ends and open_ends[-1] <= s:
            open_ends.pop()
        depth[i] = len(open_ends)
        open_ends.append(s + float(dur[i]))
    return depth


def visible(t: Timeline, python: bool = False) -> Timeline:
    """The timeline without Python frames (unless python) and fuseview's own capture frames, re-nested
    from depth 0 so no row is left empty."""
    keep = np.array([not is_own_capture(n) for n in t.names], dtype=bool)
    if not python and t.python is not None:
        keep &= ~t.python
    idx = np.nonzero(keep)[0]
    thread, start, dur = t.thread[idx], t.start[idx], t.dur[idx]
    kept = idx.tolist()
    return replace(t, thread=thread, depth=restack(thread, start, dur), start=start, dur=dur,
                   names=[t.names[i] for i in kept], categories=[t.categories[i] for i in kept],
                   python=t.python[idx] if t.python is not None else None)
