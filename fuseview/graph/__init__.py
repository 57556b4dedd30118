"""Graph layer: load an ONNX file into a document and lay it out. Imports no Qt."""

from fuseview.graph.document import Edge, GraphDocument, ModelDocument, Node, Tensor
from fuseview.graph.loader import document_from_model, load_document

__all__ = ["Edge", "GraphDocument", "ModelDocument", "Node", "Tensor", "document_from_model", "load_document"]
