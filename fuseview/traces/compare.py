"""The before/after diff of two traces: added, removed and changed events, step speed-up, fused kernels."""

from __future__ import annotations

from fuseview.errors import FuseviewError
from fuseview.stats import FASTER, NO_DIFFERENCE, SLOWER, compare_timings
from fuseview.traces.kernels import FusedKernel, attribute

# re-exported: their home is traces.resampling, which attribution imports without a cycle
from fuseview.traces.resampling import BOOTSTRAP_BUDGET as BOOTSTRAP_BUDGET
from fuseview.traces.resampling import bootstrap_resamples as bootstrap_resamples
from fuseview.traces.stats import TraceStats
from fuseview.traces.torch_log import CompileLog


def step_speedup(before: TraceStats, after: TraceStats) -> dict:
    """before/after ratio of median step times with its interval (steps are independent, not paired)."""
    for t in (before, after):
        if min(t.step_us) <= 0:
            raise FuseviewError(f"{t.path}: a step of {min(t.step_us):g} µs; step times must be positive")
    n = max(before.steps, after.steps)
    est = compare_timings(before.step_us, after.step_us, paired=False, resamples=bootstrap_resamples(n))
    return est.to_json() | {"summary": est.summary()}


def ratio_phrase(kernel_us: float, replaced_us: float, speedup: dict | None = None) -> str:
    """The kernel against the ops it replaced in words from the verdict of its interval (speedup: the
    report's replaced/kernel estimate): a direction only where the interval supports one."""
    if kernel_us <= 0 or replaced_us <= 0:
        return "no time to compare"
    if not speedup:
        return "kernel vs the ops it replaced: no interval (too few steps for a verdict)"
    word, ratio = speedup["verdict"], float(speedup["speedup_p50"])
    if word == FASTER and ratio > 0:
        return f"kernel {ratio:.1f}x faster than the ops it replaced"
    if word == SLOWER and ratio > 0:
        return f"kernel {1 / ratio:.1f}x slower than the ops it replaced"
    if word == NO_DIFFERENCE:
        return "kernel and the ops it replaced: no difference"
    return "kernel vs the ops it replaced: cannot tell"


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


def kernel_entries(before: TraceStats, after: TraceStats, log: CompileLog | None,
                   by_name: list[FusedKernel]) -> tuple[list[dict], list[dict]]:
    """fused_kernels of the report (by provenance where the log accounts for a kernel, else by its name)
    and the pre-grad nodes that no kernel's provenance names."""
    exact, missing = [], []
    if log is not None:
        from fuseview.traces.attribution import attribute_provenance, unclaimed

        found = attribute_provenance(before, after, log)
        exact = [k.to_json() for k in found]
        missing = unclaimed(before, log, found)
    done = {k["name"] for k in exact}
    guessed = [k.to_json() | {"attribution": "name", "kind": "fused", "provenance": None}
               for k in by_name if k.name not in done]
    return exact + guessed, missing


def diff(before: TraceStats, after: TraceStats, log: CompileLog | None = None) -> dict:
    """The report's diff section."""
    b, a = before.by_name(), after.by_name()
    changed = []
    for name in sorted(set(b) & set(a), key=lambda n: (-abs(a[n].total_us - b[n].total_us), n)):
        x, y = b[name], a[name]
        changed.append({"name": name, "count_before": x.count, "count_after": y.count,
                        "total_us_before": x.total_us, "total_us_after": y.total_us})
    kernels = attribute(before, after)
    entries, missing = kernel_entries(before, after, log, kernels)
    return {
        "step_speedup": step_speedup(before, after),
        "added": sorted(set(a) - set(b), key=lambda n: (-a[n].total_us, n)),  # ties by name: hash-free
        "removed": sorted(set(b) - set(a), key=lambda n: (-b[n].total_us, n)),
        "changed": changed,
        "fused_kernels": entries,
        "unclaimed_pre_grad": missing,
        "note": fusion_note(after, kernels),
    }
