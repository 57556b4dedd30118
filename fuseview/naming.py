"""The one naming of graph nodes: unnamed or repeated node names get a positional stand-in.

graph (the viewer's document), fusion (candidates, origin metadata) and runtime (profiled node names)
all call `unique_node_names`, so a node is called the same everywhere: an unnamed node is
`<OpType>_<position>` and a repeated name `<name>__<position>`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import onnx


def unique_node_names(nodes: Iterable[onnx.NodeProto]) -> list[str]:
    """One distinct name per node, in graph order: its own name when set and not taken already."""
    ns = list(nodes)
    return unique_names([n.name for n in ns], [n.op_type for n in ns])


def unique_names(own: Sequence[str], op_types: Sequence[str]) -> list[str]:
    """unique_node_names of the nodes with these names and op types (read from the protos already)."""
    names: list[str] = []
    seen: set[str] = set()
    for i, name in enumerate(own):
        if not name or name in seen:
            base = f"{op_types[i]}_{i}" if not name else f"{name}__{i}"
            name = base
            k = 1
            while name in seen:
                name = f"{base}_{k}"
                k += 1
        seen.add(name)
        names.append(name)
    return names
