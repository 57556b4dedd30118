"""Issue 27: hostile input round 4 (external data sizes, the API as strict as the CLI, all-or-nothing outputs,
tune's original model, no display).

Each command case runs the real `python -m fuseview` in its own process under a time and an address-space
limit (tests/hostile_cli.py): a refusal is exit 2, one `fuseview: error:` line, nothing written.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from tests.hostile_cli import env, refuse


def _add_external(folder: Path, data_bytes: int = 16, **span: str) -> None:
    """m.onnx: one Add(x, W) with W float[4] in w.bin (data_bytes long) at the given offset/length."""
    w = onnx.TensorProto()
    w.name, w.data_type = "W", T.FLOAT
    w.dims.extend([4])
    w.data_location = T.EXTERNAL
    for k, v in (("location", "w.bin"), *span.items()):
        e = w.external_data.add()
        e.key, e.value = k, v
    x = helper.make_tensor_value_info("x", T.FLOAT, [4])
    y = helper.make_tensor_value_info("y", T.FLOAT, [4])
    g = helper.make_graph([helper.make_node("Add", ["x", "W"], ["y"], name="add")], "g", [x], [y], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    (folder / "m.onnx").write_bytes(model.SerializeToString())
    (folder / "w.bin").write_bytes(b"\0" * data_bytes)


SPANS = {
    "offset past the end": {"offset": "17"},
    "offset a million": {"offset": "1000000"},
    "offset 2^70": {"offset": str(2**70)},
    "negative length": {"offset": "0", "length": "-5"},
    "negative offset": {"offset": "-3", "length": "16"},
    "length past the end": {"offset": "8", "length": "16"},
    "length not a number": {"offset": "0", "length": "1e3"},
    "length not the shape's": {"offset": "0", "length": "8"},
}
COMMANDS = {
    "fuse": ["fuse", "m.onnx", "-o", "f.onnx"],
    "profile": ["profile", "m.onnx", "--runs", "2", "--warmup", "0", "--quiet"],
    "tune": ["tune", "m.onnx", "-o", "t.onnx"],
}


@pytest.mark.parametrize("command", COMMANDS, ids=list(COMMANDS))
@pytest.mark.parametrize("span", SPANS.values(), ids=list(SPANS))
def test_external_data_outside_its_file_is_one_line_not_a_hang(tmp_path: Path, span, command) -> None:
    _add_external(tmp_path, **span)
    # before the fix the weight size came out negative and the varint encoder looped, memory growing
    refuse(COMMANDS[command], tmp_path, match="external data", timeout_s=40)


def test_the_varint_encoder_refuses_a_negative_number() -> None:
    # in a child under a time bound: the encoder it replaces never returned on a negative number
    code = ("from fuseview.graph.lazy_weights import _encode_varint as e\n"
            "assert e(300) == b'\\xac\\x02'\n"
            "try:\n    e(-1)\nexcept ValueError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=20, env=env())
    assert out.returncode == 0 and "negative" in out.stdout, out.stderr
