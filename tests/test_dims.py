"""The one dims policy (fuseview.dims): declared dims, the --dim syntax, defaults, errors; table-driven."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fuseview.dims import (
    BATCH_DEFAULT,
    OTHER_DEFAULT,
    SEQUENCE_DEFAULT,
    declared_dim,
    default_dim,
    dim_keys,
    parse_dim_args,
    resolve_dims,
)
from fuseview.errors import FuseviewError
from fuseview.fusion.scan import scan_model
from fuseview.runtime.inputs import make_feeds

from .conftest import GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"


def _dim(value=None, param=None) -> onnx.TensorShapeProto.Dimension:
    d = onnx.TensorShapeProto.Dimension()
    if value is not None:
        d.dim_value = value
    if param is not None:
        d.dim_param = param
    return d


@pytest.mark.parametrize(
    ("dim", "expected"),
    [
        (_dim(value=64), 64),
        (_dim(param="seq"), "seq"),
        (_dim(), None),  # unnamed
        (_dim(value=-1), None),  # PaddlePaddle's "any size"
        (_dim(value=0), None),
        (_dim(param="  "), None),
    ],
)
def test_declared_dim(dim, expected):
    assert declared_dim(dim) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        ("batch", BATCH_DEFAULT),
        ("batch_size", BATCH_DEFAULT),
        ("N", BATCH_DEFAULT),
        ("seq", SEQUENCE_DEFAULT),
        ("sequence_length", SEQUENCE_DEFAULT),
        ("max_length", SEQUENCE_DEFAULT),  # scan once said 1 here and the generated inputs 128
        ("num_tokens", SEQUENCE_DEFAULT),
        ("height", OTHER_DEFAULT),
        ("x:1", OTHER_DEFAULT),  # unnamed: nothing says what it is
    ],
)
def test_defaults_by_name(key, expected):
    assert default_dim(key) == expected


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["seq=64"], {"seq": 64}),
        (["seq=64", "batch=2"], {"seq": 64, "batch": 2}),
        (["x:0=3"], {"x:0": 3}),  # an unnamed dim as INPUT:AXIS
        (["input:0:1=5"], {"input:0:1": 5}),  # TensorFlow-style input names keep their colon
        ([" seq = 8 "], {"seq": 8}),
        ([], {}),
    ],
)
def test_dim_syntax(items, expected):
    assert parse_dim_args(items) == expected


@pytest.mark.parametrize(
    ("item", "needle"),
    [
        ("seq", "NAME=VALUE"),
        (" =3", "NAME=VALUE"),
        ("=3", "NAME=VALUE"),
        ("my seq=3", "NAME=VALUE"),
        ("seq=0", "at least 1"),
        ("seq=-1", "whole number"),
        ("seq=x", "whole number"),
        ("seq=1.5", "whole number"),
        ("seq=", "whole number"),
    ],
)
def test_bad_dim_syntax(item, needle):
    with pytest.raises(FuseviewError, match=needle):
        parse_dim_args([item])


def _paddle_like() -> onnx.ModelProto:
    """Inputs with a named dim, an unnamed one, -1 and 0: every kind of non-fixed dim."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", -1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [0, None])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("ReduceSum", ["r"], ["out"], keepdims=0)]
    g = helper.make_graph(nodes + [helper.make_node("Identity", ["y"], ["y2"])], "g", [x, y],
                          [out, helper.make_tensor_value_info("y2", TensorProto.FLOAT, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)], ir_version=8)


def test_keys_and_resolution_of_every_kind_of_dim():
    m = _paddle_like()
    assert dim_keys(m) == ["batch", "x:1", "y:0", "y:1"]
    assert resolve_dims(m) == {"batch": 1, "x:1": 1, "y:0": 1, "y:1": 1}
    assert resolve_dims(m, {"x:1": 7, "batch": 2}) == {"batch": 2, "x:1": 7, "y:0": 1, "y:1": 1}
    feeds = make_feeds(m, {"x:1": 7, "y:0": 3})
    assert feeds["x"].shape == (1, 7, 4) and feeds["y"].shape == (3, 1)


@pytest.mark.parametrize("dims", [{"sequence": 3}, {"x:2": 3}, {"x:9": 1}, {"seq": 4}])
def test_unknown_name_lists_the_valid_ones(dims):
    with pytest.raises(FuseviewError, match=r"no such input dim \(valid: batch, x:1, y:0, y:1\)"):
        resolve_dims(_paddle_like(), dims)


def test_scan_uses_the_same_policy():
    model = onnx.load(str(GPT2), load_external_data=False)
    assert scan_model(model).index.dims_used == {"batch": 1, "seq": 128}
    assert scan_model(model, {"seq": 16}).index.dims_used == {"batch": 1, "seq": 16}
    with pytest.raises(FuseviewError, match="valid: batch, seq"):
        scan_model(model, {"sequence": 16})
    m = _paddle_like()
    assert set(scan_model(m, {"x:1": 5}).index.dims_used) == {"batch", "x:1", "y:0", "y:1"}
    assert np.prod(scan_model(m, {"x:1": 5}).index.shape("r")) == 20


@pytest.mark.parametrize("command", ["scan", "fuse", "profile"])
@pytest.mark.parametrize(("dim", "needle"), [("nope=3", "valid: batch, seq"), ("seq=0", "at least 1")])
def test_every_command_has_one_syntax_and_one_error(command, dim, needle, tmp_path):
    args = [sys.executable, "-m", "fuseview", command, str(GPT2), "--dim", dim]
    if command == "fuse":
        args += ["-o", str(tmp_path / "f.onnx")]
    r = subprocess.run(args, capture_output=True, text=True)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("fuseview: error:"), r.stderr
    assert needle in lines[0]
