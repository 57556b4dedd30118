"""Where each node ran (per execution provider, Memcpy nodes) and device kernels attributed to nodes.

Pure functions over a profile summary (`profiling.summarize`'s dict) and over recorded spans: testable on
the CPU with real onnxruntime profiles; on CUDA the same functions read the CUDA EP's node events.
"""

from __future__ import annotations

import bisect
import itertools
from typing import Any

CPU_PROVIDER = "CPUExecutionProvider"
# A fused model that puts more than this share of its node time on the CPU EP, above the original's share,
# moved work to the CPU (a fused op with no kernel on the GPU provider falls back there).
MOVED_SHARE = 0.05


def placement(profile: dict[str, Any]) -> dict[str, Any]:
    """Per provider: nodes and mean node time (µs, host-side for the CPU EP); the Memcpy nodes by name."""
    per: dict[str, dict[str, float]] = {}
    memcpy: list[str] = []
    for n in profile.get("nodes", []):
        prov = str(n.get("provider") or "unknown")
        row = per.setdefault(prov, {"nodes": 0, "time_us": 0.0})
        row["nodes"] += 1
        row["time_us"] += float(n.get("mean_us", 0.0))
        if str(n.get("op_type", "")).startswith("Memcpy"):
            memcpy.append(str(n["name"]))
    total = sum(r["time_us"] for r in per.values())
    providers = {
        p: {"nodes": int(r["nodes"]), "time_us": r["time_us"],
            "share": r["time_us"] / total if total else 0.0}
        for p, r in sorted(per.items(), key=lambda kv: -kv[1]["time_us"])
    }
    return {"providers": providers, "memcpy_nodes": memcpy}


def cpu_share(place: dict[str, Any]) -> tuple[int, float]:
    """Nodes and time share on the CPU EP."""
    row = place["providers"].get(CPU_PROVIDER, {"nodes": 0, "share": 0.0})
    return int(row["nodes"]), float(row["share"])


def moved_to_cpu(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """One line when the fused model runs more of its time on the CPU EP than the original did, else None.

    Only meaningful under a GPU provider: when every node of both ran on the CPU EP nothing moved.
    """
    if set(before["providers"]) <= {CPU_PROVIDER} and set(after["providers"]) <= {CPU_PROVIDER}:
        return None
    n_b, s_b = cpu_share(before)
    n_a, s_a = cpu_share(after)
    if s_a <= s_b + MOVED_SHARE:
        return None
    return (f"fusion moved work to the CPU: {s_a:.0%} of node time on {CPU_PROVIDER} after fusion "
            f"({n_a} nodes) against {s_b:.0%} before ({n_b} nodes)")


def attribute_kernels(spans: list[tuple[str, float, float]],
                      kernels: list[tuple[float, float, float]]) -> dict[str, Any]:
    """Device time per node: a kernel launched within a node's host span [start, end) belongs to it.

    spans: (node name, host start µs, host end µs) on one clock; kernels: (launch µs, device start µs,
    device duration µs), the launch on the spans' clock. Returns per-node device µs, the unattributed
    device µs and the GPU busy µs (the union of the kernels' device intervals). Where spans overlap (whole
    µs in onnxruntime's trace: one node's end can pass the next one's start), the latest started of the
    spans holding the launch owns it.
    """
    order = sorted(spans, key=lambda s: s[1])
    starts = [s[1] for s in order]
    reach = list(itertools.accumulate((s[2] for s in order), max))  # the furthest end of spans 0..i
    per: dict[str, float] = {}
    unattributed = 0.0
    for launch, _, dur in kernels:
        i = bisect.bisect_right(starts, launch) - 1
        while i >= 0 and launch >= order[i][2] and reach[i] > launch:
            i -= 1  # an earlier span still open at the launch (a span inside another)
        if i >= 0 and launch < order[i][2]:
            per[order[i][0]] = per.get(order[i][0], 0.0) + dur
        else:
            unattributed += dur
    busy, end = 0.0, float("-inf")
    for _, start, dur in sorted(kernels, key=lambda k: k[1]):
        lo = max(start, end)
        if start + dur > lo:
            busy += start + dur - lo
        end = max(end, start + dur)
    total = sum(per.values()) + unattributed
    return {"node_device_us": per, "unattributed_us": unattributed, "busy_us": busy,
            "unattributed_share": unattributed / total if total else 0.0}
