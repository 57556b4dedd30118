"""A logged FX graph as an ONNX model (ops in an `aten` domain), so fuseview's own layout can draw it."""

from __future__ import annotations

import onnx
from onnx import helper

from fuseview.runtime.ir_version import clamp_ir
from fuseview.traces import fx_code

DOMAIN = "aten"


def fx_to_onnx(code: str | fx_code.GraphParser, name: str = "post_grad") -> onnx.ModelProto:
    """An FX graph (its readable code, or that code parsed) as an ONNX model: one node per FX node."""
    parsed = fx_code.parse_code(code) if isinstance(code, str) else code
    nodes, inputs = parsed.nodes, parsed.inputs
    used = {i for n in nodes.values() for i in n.inputs}
    outputs = [o for o in parsed.outputs if o in nodes] or [
        n for n in nodes if n not in used][-1:]
    onnx_nodes = [helper.make_node(n.op.replace("::", "_"), list(n.inputs), [n.name], name=n.name,
                                   domain=DOMAIN) for n in nodes.values()]
    graph = helper.make_graph(
        onnx_nodes, name,
        [helper.make_tensor_value_info(i, onnx.TensorProto.FLOAT, None) for i in inputs if i in used],
        [helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None) for o in outputs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(DOMAIN, 1)],
                             ir_version=clamp_ir())
