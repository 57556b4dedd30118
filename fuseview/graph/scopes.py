"""Name scopes of nodes, from the exporter's metadata or from `/a/b/Op_3`-style node names."""

from __future__ import annotations

import ast

import onnx

_TORCH_SCOPES_KEY = "pkg.torch.onnx.name_scopes"


def _scopes_from_torch_metadata(value: str) -> tuple[str, ...] | None:
    # The dynamo exporter stores the module path as a list of growing dotted prefixes:
    # ['', 'm', 'm.transformer', 'm.transformer.h.4', ..., 'leaf_op']. Each step's new suffix is
    # one scope segment, which keeps 'h.4' whole.
    try:
        entries = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return None
    if not isinstance(entries, list) or not all(isinstance(e, str) for e in entries):
        return None
    modules = entries[:-1]  # the last entry names the op itself
    segments: list[str] = []
    prev = ""
    for entry in modules:
        if not entry:
            continue
        if prev and entry.startswith(prev + "."):
            segments.append(entry[len(prev) + 1 :])
        else:
            segments.append(entry)
        prev = entry
    return tuple(segments)


def node_scope(node: onnx.NodeProto) -> tuple[str, ...]:
    """The node's name scope, outermost first; () when it has none."""
    for prop in node.metadata_props[:]:
        if prop.key == _TORCH_SCOPES_KEY:
            scope = _scopes_from_torch_metadata(prop.value)
            if scope is not None:
                return scope
    name = node.name
    if "/" in name:
        parts = [p for p in name.split("/")[:-1] if p]
        return tuple(parts)
    return ()


def common_prefix(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    """The longest scope that starts both a and b (the one scope-prefix function of fuseview)."""
    if a is b or a == b:
        return a
    k, m = 0, min(len(a), len(b))
    while k < m and a[k] == b[k]:
        k += 1
    return a[:k]


def common_scope(scopes: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The longest scope that starts every one of `scopes` (() when they share none or there are none)."""
    if not scopes:
        return ()
    common = tuple(scopes[0])
    for s in scopes[1:]:
        common = common_prefix(common, tuple(s))
    return common
