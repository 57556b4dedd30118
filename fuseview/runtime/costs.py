"""Expected gain before applying: what the nodes a candidate would replace cost in a profile.

With a roofline in the profile (schema 3), a candidate also gets the memory traffic fusing removes (the
scan's traffic_bytes), what that traffic costs at the machine's measured bandwidth, and whether its nodes'
time is mostly in compute-bound nodes: there, removing traffic wins little.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuseview.errors import FuseviewError
from fuseview.stats import TIME_KEY, by_median
from fuseview.units import format_bytes


@dataclass(frozen=True)
class MeasuredCost:
    """Measured time (µs, per-node medians summed) and share of the run of a candidate's nodes."""

    measured_us: float
    share: float
    timed_nodes: int
    nodes: int
    traffic_bytes: int | None = None  # memory traffic fusing removes (the scan's, at its dims)
    traffic_us: float | None = None  # that traffic at the measured bandwidth
    peak_gbps: float | None = None
    compute_share: float | None = None  # share of the measured time in compute-bound nodes
    bound: str | None = None  # "compute" when most of that time is compute-bound, else "memory"

    def gain_text(self) -> str:
        """What removing the traffic can win, or why the roofline says little (compute-bound nodes)."""
        if self.traffic_us is None or self.traffic_bytes is None:
            return "no roofline in the profile (schema 3 has one): profile again for the traffic's cost"
        head = (f"removes {format_bytes(self.traffic_bytes)} of memory traffic ≈ {self.traffic_us:.3g} µs at"
                f" {self.peak_gbps:.3g} GB/s (its nodes measured {self.measured_us:.3g} µs)")
        if self.bound == "compute":
            return (f"{head}; compute-bound: {self.compute_share:.0%} of their time is in compute-bound"
                    " nodes, so removing traffic wins little")
        if self.bound == "memory":
            return f"{head}; memory-bound: the traffic is what fusing removes"
        return head


def _profiled_model(report: dict, wanted: set[str]) -> dict:
    best: dict = {}
    count = 0
    for m in report.get("models", []):
        found = len(wanted & {n["name"] for n in m.get("nodes", [])})
        if found > count:
            best, count = m, found
    return best


def _roofline_part(c, roof: dict | None, rows: dict[str, dict]) -> dict:  # noqa: ANN001 - a Candidate
    """The traffic, its time at the measured bandwidth and the compute-bound share of one candidate."""
    traffic = getattr(c, "traffic_bytes", None)
    if not roof or traffic is None:
        return {}
    gbps = float(roof["machine"]["peak_gbps"])
    mine = [rows[n] for n in c.nodes if n in rows]
    total = sum(r["time_us"] for r in mine)
    compute = sum(r["time_us"] for r in mine if r["bound"] == "compute")
    share = compute / total if total > 0 else None
    bound = None if share is None else ("compute" if share > 0.5 else "memory")
    return {"traffic_bytes": int(traffic), "traffic_us": traffic / gbps / 1e3, "peak_gbps": gbps,
            "compute_share": share, "bound": bound}


def candidate_costs(report: dict, candidates: list) -> dict[str, MeasuredCost]:
    """Candidate id -> measured cost of the nodes it would replace, joined by the node names the report uses.

    Nodes the profile has no event for (Constant nodes become initializers and never run) cost 0.
    """
    names = [n for c in candidates for n in c.nodes]
    model = _profiled_model(report, set(names))
    nodes = {n["name"]: n for n in model.get("nodes", [])}
    roof = model.get("roofline")
    rows = {r["node"]: r for r in (roof or {}).get("nodes", [])}
    if candidates and not nodes.keys() & set(names):
        raise FuseviewError("the profile report has none of this model's candidate nodes: profile this model")
    # shares recomputed from the medians (fuseview.stats): a report made before that holds mean shares
    share_of = {r["name"]: share for r, share in by_median(nodes.values())}
    out = {}
    for c in candidates:
        timed = [nodes[n] for n in c.nodes if n in nodes]
        out[c.id] = MeasuredCost(
            measured_us=float(sum(n[TIME_KEY] for n in timed)),
            share=float(sum(share_of[n["name"]] for n in timed)),
            timed_nodes=len(timed),
            nodes=len(c.nodes),
            **_roofline_part(c, roof, rows),
        )
    return out
