"""Graph layer: load an ONNX file into a document and lay it out. Imports no Qt.

The document side is imported when first asked for: reading and checking a file (`graph.loader.read_model`,
the scan's way) needs none of it."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fuseview.graph.document import Edge, GraphDocument, ModelDocument, Node, Tensor
    from fuseview.graph.loader import document_from_model, load_document

__all__ = ["Edge", "GraphDocument", "ModelDocument", "Node", "Tensor", "document_from_model", "load_document"]
_HOME = {"Edge": "document", "GraphDocument": "document", "ModelDocument": "document", "Node": "document",
         "Tensor": "document", "document_from_model": "loader", "load_document": "loader"}


def __getattr__(name: str) -> Any:
    """The layer's names, each imported from its module when first asked for."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'fuseview.graph' has no attribute {name!r}")
    return getattr(importlib.import_module(f"fuseview.graph.{home}"), name)
