"""The before/after diff of two traces: added, removed and changed events, step speed-up, fused kernels."""

from __future__ import annotations

from fuseview.errors import FuseviewError
from fuseview.stats import compare_timings
from fuseview.traces.kernels import FusedKernel, attribute
from fuseview.traces.stats import TraceStats


def step_speedup(before: TraceStats, after: TraceStats) -> dict:
    """before/after ratio of median step times with its interval (steps are independent, not paired)."""
    for t in (before, after):
        if min(t.step_us) <= 0:
            raise FuseviewError(f"{t.path}: a step of {min(t.step_us):g} us; step times must be positive")
    est = compare_timings(before.step_us, after.step_us, paired=False)
    return est.to_json() | {"summary": est.summary()}


def fusion_note(after: TraceStats, kernels: list[FusedKernel]) -> str | None:
    """A plain sentence when compile fused nothing, else None."""
    if after.source != "pytorch":
        return None
    if not kernels:
        compiled = any(e.name.startswith("Torch-Compiled Region") for e in after.events)
        where = ("the compiled region ran, but" if compiled else "no compiled region either:")
        return (f"compile fused nothing: {where} the after trace has no Inductor kernel "
                "(a module on a fast path, a graph break, or a trace without enable_kernel_profile)")
    if all(len(k.fused_ops) < 2 for k in kernels):
        return "compile fused nothing: every Inductor kernel runs a single op"
    return None


def diff(before: TraceStats, after: TraceStats) -> dict:
    """The report's diff section."""
    b, a = before.by_name(), after.by_name()
    changed = []
    for name in sorted(set(b) & set(a), key=lambda n: -abs(a[n].total_us - b[n].total_us)):
        x, y = b[name], a[name]
        changed.append({"name": name, "count_before": x.count, "count_after": y.count,
                        "total_us_before": x.total_us, "total_us_after": y.total_us})
    kernels = attribute(before, after)
    return {
        "step_speedup": step_speedup(before, after),
        "added": sorted(set(a) - set(b), key=lambda n: -a[n].total_us),
        "removed": sorted(set(b) - set(a), key=lambda n: -b[n].total_us),
        "changed": changed,
        "fused_kernels": [k.to_json() for k in kernels],
        "note": fusion_note(after, kernels),
    }
