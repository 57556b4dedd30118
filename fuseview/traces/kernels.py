"""Which original ops an Inductor kernel fused, matched against the op names of the BEFORE trace.

A kernel is named after the ops it fused joined by "_" (graph_0_cpp_fused__softmax_div_masked_fill_1),
and op names contain "_" themselves, so the name is segmented into the names the BEFORE trace actually
has (`_softmax`, `masked_fill`), not split on "_".
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from functools import cache

import numpy as np

from fuseview.traces.categories import COMPILED, DEVICE_CATS, INDUCTOR, OP
from fuseview.traces.stats import TraceStats


@dataclass(frozen=True)
class FusedKernel:
    """One compiled kernel, the ops its name says it fused, and what those ops cost before."""

    name: str
    fused_ops: list[str]
    matched_before: list[str]  # event names exactly as in the before trace
    time_us: float  # the kernel's time per step
    replaced_us: float  # per step, the time of the before-trace ops it replaced (outermost only)
    replaced_from: str = "host"  # "host": the ops' own times; "device": the GPU kernels they launched

    def to_json(self) -> dict:
        """JSON-ready dict (the report's fused_kernels entry)."""
        return {"name": self.name, "fused_ops": list(self.fused_ops),
                "matched_before": list(self.matched_before), "time_us": self.time_us,
                "replaced_us": self.replaced_us, "replaced_from": self.replaced_from}


def short_op(name: str) -> str:
    """An op event's name without its namespace: aten::native_layer_norm -> native_layer_norm."""
    return name.rsplit("::", 1)[-1]


def fused_part(kernel: str) -> str | None:
    """The op list inside an Inductor kernel name (cos_relu for graph_0_cpp_fused_cos_relu_0), else None."""
    m = INDUCTOR.match(kernel)
    return m.group(1) if m else None


# Op names of more "_"-separated pieces than this are not looked for inside kernel names (real ones have
# at most five: native_layer_norm_backward); with it, segmenting costs a few lookups per piece.
MAX_OP_PIECES = 8


@cache
def _pieces(known: frozenset[str]) -> int:
    """The most "_"-separated pieces a known name takes (at most MAX_OP_PIECES); once per set of names."""
    return min(MAX_OP_PIECES, 1 + max((k.count("_") for k in known), default=0))


def segment(part: str, known: frozenset[str]) -> list[str]:
    """Split a fused op list into known op names, fewest unknown pieces first, then fewest pieces."""
    n = len(part)
    cuts = [j for j, ch in enumerate(part) if ch == "_"] + [n]
    span = _pieces(known)
    # best[i]: (unknown pieces, pieces, end of the first piece) of part[i:]; right to left, no recursion
    best: dict[int, tuple[int, int, int]] = {n: (0, 0, n)}

    def after(j: int) -> tuple[int, int, int]:
        return best[j + 1] if j + 1 < n else (0, 0, n)

    for i in sorted({0, *(j + 1 for j in cuts[:-1] if j + 1 < n)}, reverse=True):
        q0 = bisect.bisect_right(cuts, i)  # an unknown piece runs to the next "_" (a leading one is its own)
        u, c, _ = after(cuts[q0])
        choice = (u + 1, c + 1, cuts[q0])
        for q in range(q0, min(len(cuts), q0 + span)):
            j = cuts[q]
            if part[i:j] in known:
                u, c, _ = after(j)
                if (u, c + 1) < choice[:2]:
                    choice = (u, c + 1, j)
        best[i] = choice
    out, i = [], 0
    while i < n:
        j = best[i][2]
        out.append(part[i:j])
        i = j + 1
    return out


def _outermost_hit_above(parent: np.ndarray, hit: np.ndarray, queries: list[int]) -> dict[int, int]:
    """For each query event, the outermost event enclosing it (not itself) with hit set, -1 when none.

    Each enclosing event is visited once for all queries (memoised), so 20,000 nested ops cost 20,000
    steps, not one walk up the nesting per event.
    """
    top: dict[int, int] = {-1: -1}  # event -> outermost hit among it and its ancestors
    out: dict[int, int] = {}
    for i in queries:
        path = []
        p = int(parent[i])
        while p not in top:
            path.append(p)
            p = int(parent[p])
        for q in reversed(path):  # from the outermost down
            t = top[int(parent[q])]
            top[q] = t if t >= 0 else (q if hit[q] else -1)
        out[i] = top[int(parent[i])]
    return out


def _replaced_per_step(before: TraceStats, names: set[str]) -> dict[str, float]:
    """Per step and per name, the time of before-trace events with these names not enclosed by another."""
    raw = before.raw
    ids = {i: n for i, n in enumerate(raw.names) if n in names}
    if not ids:
        return {}
    name_id = np.frombuffer(raw.name_id, dtype=np.int32)
    dur = np.frombuffer(raw.dur, dtype=np.float64)
    hit = np.isin(name_id, list(ids)) & before.in_step
    hits = np.nonzero(hit)[0].tolist()
    above = _outermost_hit_above(before.parent, hit, hits)
    out: dict[str, float] = {}
    steps = max(before.steps, 1)
    for i in hits:
        if above[i] < 0:
            n = ids[int(name_id[i])]
            out[n] = out.get(n, 0.0) + float(dur[i]) / steps
    return out


def _device_by_correlation(before: TraceStats) -> dict[int, float]:
    """Device time (kernels and copies) per correlation id of the before trace."""
    raw = before.raw
    dev = [i for i, c in enumerate(raw.cats) if c in DEVICE_CATS]
    if not dev:
        return {}
    corr = np.frombuffer(raw.corr, dtype=np.int64)
    mask = np.isin(np.frombuffer(raw.cat_id, dtype=np.int32), dev) & (corr >= 0)
    out: dict[int, float] = {}
    for c, d in zip(corr[mask].tolist(), np.frombuffer(raw.dur, dtype=np.float64)[mask].tolist(),
                    strict=True):
        out[c] = out.get(c, 0.0) + d
    return out


def _device_replaced_per_step(before: TraceStats, names: set[str], device: dict[int, float]) -> dict:
    """Per step and per name, the device time launched from inside the outermost events with these names."""
    raw = before.raw
    ids = {i: n for i, n in enumerate(raw.names) if n in names}
    if not ids:
        return {}
    name_id = np.frombuffer(raw.name_id, dtype=np.int32)
    corr = np.frombuffer(raw.corr, dtype=np.int64)
    hit = np.isin(name_id, list(ids))
    dev = [i for i, c in enumerate(raw.cats) if c in DEVICE_CATS]
    host = ~np.isin(np.frombuffer(raw.cat_id, dtype=np.int32), dev)
    launches = np.nonzero((corr >= 0) & host & before.in_step)[0].tolist()
    out: dict[str, float] = {}
    steps = max(before.steps, 1)
    tops = _outermost_hit_above(before.parent, hit, launches)
    for i in launches:
        top = tops[i]
        if top >= 0:
            n = ids[int(name_id[top])]
            out[n] = out.get(n, 0.0) + device.get(int(corr[i]), 0.0) / steps
    return out


def attribute(before: TraceStats, after: TraceStats) -> list[FusedKernel]:
    """Each compiled kernel of the after trace with the before-trace ops it replaced."""
    by_short: dict[str, list[str]] = {}
    for e in before.events:
        if e.category == OP:
            by_short.setdefault(short_op(e.name), []).append(e.name)
    known = frozenset(by_short)
    found = []
    claims: dict[str, int] = {}
    for e in after.events:
        if e.category != COMPILED:
            continue
        part = fused_part(e.name)
        ops = segment(part, known) if part else []
        matched = sorted({full for op in ops for full in by_short.get(op, [])})
        found.append((e, ops, matched))
        for m in matched:
            claims[m] = claims.get(m, 0) + 1
    device = _device_by_correlation(before)
    out = []
    done: dict[tuple, dict[str, float]] = {}
    for e, ops, matched in found:
        # a GPU kernel is compared with the GPU kernels its ops launched, not with their host-side time
        on_device = bool(device) and e.on_device
        key = (on_device, frozenset(matched))
        times = done.get(key)
        if times is None:  # kernels naming the same ops (one per layer) share the work
            if on_device:
                times = _device_replaced_per_step(before, set(matched), device)
            else:
                times = _replaced_per_step(before, set(matched))
            done[key] = times
        # an op named by several kernels (view, clone) has its time shared evenly among them
        replaced = sum(t / claims[n] for n, t in times.items())
        out.append(FusedKernel(e.name, ops, matched, e.per_step_us, replaced,
                               "device" if on_device else "host"))
    out.sort(key=lambda k: -k.replaced_us)
    return out
