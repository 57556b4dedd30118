"""Expected gain before applying: what the nodes a candidate would replace cost in a profile."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from fuseview.errors import FuseviewError
from fuseview.stats import TIME_KEY, by_median


@dataclass(frozen=True)
class MeasuredCost:
    """Measured time (µs, per-node medians summed) and share of the run of a candidate's nodes."""

    measured_us: float
    share: float
    timed_nodes: int
    nodes: int


def profiled_nodes(report: dict, names: Iterable[str]) -> dict[str, dict]:
    """Node name -> node record of the report's model that holds most of `names` (usually role "model")."""
    wanted = set(names)
    best: dict[str, dict] = {}
    for m in report.get("models", []):
        by_name = {n["name"]: n for n in m.get("nodes", [])}
        if len(wanted & by_name.keys()) > len(wanted & best.keys()):
            best = by_name
    return best


def candidate_costs(report: dict, candidates: list) -> dict[str, MeasuredCost]:
    """Candidate id -> measured cost of the nodes it would replace, joined by the node names the report uses.

    Nodes the profile has no event for (Constant nodes become initializers and never run) cost 0.
    """
    names = [n for c in candidates for n in c.nodes]
    nodes = profiled_nodes(report, names)
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
        )
    return out
