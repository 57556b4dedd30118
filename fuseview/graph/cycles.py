"""The load check's cycle test: a graph out of topological order is sorted to find one, and it is named."""

from __future__ import annotations

import onnx

from fuseview.errors import FuseviewError


def check_acyclic(
    protos: list[onnx.NodeProto], producer: dict[str, int], names: list[str], where: str
) -> None:
    """FuseviewError naming one cycle when the nodes (producer: tensor -> node index) have any."""
    # ONNX requires topological order, but files in the wild are not always sorted: check for a cycle.
    n = len(protos)
    indeg = [0] * n
    succ: list[list[int]] = [[] for _ in range(n)]
    for i, node in enumerate(protos):
        for inp in node.input[:]:
            src = producer.get(inp) if inp else None
            if src is not None:
                succ[src].append(i)
                indeg[i] += 1
    ready = [i for i in range(n) if indeg[i] == 0]
    seen = 0
    while ready:
        i = ready.pop()
        seen += 1
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    if seen < n:
        raise FuseviewError(f"{where}: the graph has a cycle: {_cycle_text(succ, indeg, names)}")


def _cycle_text(succ: list[list[int]], indeg: list[int], names: list[str], most: int = 8) -> str:
    """One cycle among the nodes a topological sort could not place, named in order (A -> B -> A)."""
    import networkx as nx  # only on this error path

    left = [i for i, d in enumerate(indeg) if d > 0]
    g = nx.DiGraph((i, j) for i in left for j in succ[i] if indeg[j] > 0)
    cycle = [u for u, _v in nx.find_cycle(g)]
    shown = [repr(names[i]) for i in cycle[:most]]
    if len(cycle) > most:
        shown.append(f"... ({len(cycle) - most} more)")
    return " -> ".join([*shown, repr(names[cycle[0]])])
