"""External weights: every data file a model names is a regular file in its folder, reached without a link."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import onnx

from fuseview.atomic import register_input
from fuseview.errors import FuseviewError
from fuseview.graph.lazy_weights import check_span
from fuseview.graph.table import NodeTable


def check_external_data(
    model: onnx.ModelProto, base: Path, path: Path, table: NodeTable | None = None
) -> None:
    """FuseviewError unless every external weight is a regular file in the model's folder, reached without
    a link; each is registered as an input (the one rule of every command). table: the main graph's."""
    for t in _all_initializers(model.graph, table):
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        location = next((e.value for e in t.external_data if e.key == "location"), None)
        if location is None:
            raise FuseviewError(f"{path}: tensor {t.name!r} is external but names no data file")
        data = base / location
        if Path(location).is_absolute() or ".." in Path(location).parts:
            raise FuseviewError(
                f"{path}: external data {location!r} of tensor {t.name!r} is outside the model's folder"
            )
        if _through_link(base, Path(location)):
            # onnx refuses to read weights through a link (fuse, profile); looking at the model does too
            raise FuseviewError(
                f"{path}: external data {location!r} of tensor {t.name!r} is reached through a symbolic"
                " link; fuseview reads weights only from regular files in the model's folder"
            )
        if not data.is_file():
            raise FuseviewError(
                f"{path}: external data file {location!r} for tensor {t.name!r} not found beside the model"
            )
        check_span(t, location, data.stat().st_size, path)
        register_input(data)


def _through_link(base: Path, location: Path) -> bool:
    """Whether base/location, or a folder on the way from base to it, is a symbolic link."""
    p = base
    for part in location.parts:
        p = p / part
        if p.is_symlink():
            return True
    return False


def _all_initializers(graph: onnx.GraphProto, table: NodeTable | None = None) -> Iterable[onnx.TensorProto]:
    yield from graph.initializer
    if table is not None:  # its attribute rows serve the load checks' walks of the bodies too
        for rows in table.attribute_rows():
            for _name, kind, subs in rows:
                if kind == onnx.AttributeProto.GRAPH or kind == onnx.AttributeProto.GRAPHS:
                    for g in subs:
                        yield from _all_initializers(g)
        return
    for n in graph.node:
        for attr in n.attribute[:]:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_initializers(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_initializers(g)
