"""Generated and loaded input feeds against real models (GPT-2 exports and hand-built graphs)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.dims import parse_dim_args, resolve_dims
from fuseview.errors import FuseviewError
from fuseview.runtime.inputs import (
    SAFE_INT_BOUND,
    embedding_bound,
    load_feeds,
    make_feeds,
)
from tests.conftest import GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"


@pytest.mark.parametrize("name", ["gpt2_2l_ts17.onnx", "gpt2_12l_dynamo.onnx", "gpt2_12l_ts13.onnx"])
def test_gpt2_ids_bounded_by_embedding_table(name):
    model = onnx.load(str(GPT2_MODELS / name), load_external_data=False)
    bound = embedding_bound(model, "input_ids")
    # GPT-2's LM head is tied to the token embedding: the vocabulary is the output's last dim.
    vocab = model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value
    assert bound == vocab > SAFE_INT_BOUND
    feeds = make_feeds(model, {"seq": 64})
    ids = feeds["input_ids"]
    assert ids.shape == (1, 64) and ids.dtype == np.int64
    assert 0 <= ids.min() and ids.max() < bound
    assert len(np.unique(ids)) > 10  # really random ids, not a constant
    assert np.all(feeds["attention_mask"] == 1)


def test_gpt2_feeds_run_in_onnxruntime():
    model = onnx.load(str(GPT2))
    feeds = make_feeds(model, {"batch": 2, "seq": 16}, seed=3)
    sess = ort.InferenceSession(str(GPT2), providers=["CPUExecutionProvider"])
    (out,) = sess.run(None, feeds)
    assert out.shape[:2] == (2, 16) and np.isfinite(out).all()
    # The embedding rows really are the bound: one past it fails in onnxruntime's Gather.
    bound = embedding_bound(model, "input_ids")
    bad = dict(feeds, input_ids=np.full((2, 16), bound, np.int64))
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime's own error type
        sess.run(None, bad)


def test_defaults_overrides_and_seed():
    model = onnx.load(str(GPT2), load_external_data=False)
    assert resolve_dims(model) == {"batch": 1, "seq": 128}
    assert resolve_dims(model, {"seq": 7}) == {"batch": 1, "seq": 7}
    a, b, c = make_feeds(model, seed=1), make_feeds(model, seed=1), make_feeds(model, seed=2)
    assert np.array_equal(a["input_ids"], b["input_ids"])
    assert not np.array_equal(a["input_ids"], c["input_ids"])


def _id_model(chain: bool, table_rows: int | None) -> onnx.ModelProto:
    ids = helper.make_tensor_value_info("ids", TensorProto.INT32, ["n"])
    tt = helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["n"])
    fl = helper.make_tensor_value_info("feat", TensorProto.FLOAT, ["n", 3])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    nodes, inits = [], []
    idx = "ids"
    if chain:
        nodes += [helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64),
                  helper.make_node("Unsqueeze", ["ids64", "ax"], ["ids2"])]
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "ax"))
        idx = "ids2"
    if table_rows:
        inits.append(numpy_helper.from_array(np.zeros((table_rows, 4), np.float32), "table"))
        nodes.append(helper.make_node("Gather", ["table", idx], ["out"]))
    else:
        nodes.append(helper.make_node("Cast", [idx], ["out"], to=TensorProto.FLOAT))
    g = helper.make_graph(nodes, "g", [ids, tt, fl], [out], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)


def test_bound_through_cast_unsqueeze_chain_and_fallback():
    m = _id_model(chain=True, table_rows=37)
    assert embedding_bound(m, "ids") == 37
    f = make_feeds(m, {"n": 500})
    assert f["ids"].dtype == np.int32 and f["ids"].max() < 37 and f["ids"].max() > 20
    assert np.all(f["token_type_ids"] == 0)
    assert f["feat"].dtype == np.float32 and f["feat"].shape == (500, 3) and f["feat"].std() > 0.5
    m2 = _id_model(chain=False, table_rows=None)
    assert embedding_bound(m2, "ids") is None
    assert make_feeds(m2, {"n": 100})["ids"].max() < SAFE_INT_BOUND


def test_parse_dim_args():
    assert parse_dim_args(["seq=64", "batch=2"]) == {"seq": 64, "batch": 2}
    for bad in ["seq", "seq=x", "=3", "seq=-1"]:
        with pytest.raises(FuseviewError):
            parse_dim_args([bad])


def test_npz_loading_and_its_errors(tmp_path):
    model = onnx.load(str(GPT2), load_external_data=False)
    good = make_feeds(model, {"seq": 8})
    p = tmp_path / "in.npz"
    np.savez(p, **good)
    loaded = load_feeds(p, model)
    assert all(np.array_equal(loaded[k], good[k]) for k in good)

    cases = {
        "missing": ({"input_ids": good["input_ids"]}, "missing attention_mask"),
        "extra": ({**good, "foo": np.zeros(3)}, "not model inputs: foo"),
        "dtype": ({**good, "input_ids": good["input_ids"].astype(np.int32)}, "is int32, the model expects"),
        "rank": ({**good, "input_ids": good["input_ids"][0]}, "expects rank 2"),
        "dims": ({**good, "attention_mask": np.ones((1, 9), np.int64)}, "dim 'seq' is 8 elsewhere"),
    }
    for name, (arrays, needle) in cases.items():
        q = tmp_path / f"{name}.npz"
        np.savez(q, **arrays)
        with pytest.raises(FuseviewError, match=needle):
            load_feeds(q, model)
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(FuseviewError, match="not a readable .npz"):
        load_feeds(tmp_path / "junk.npz", model)
    with pytest.raises(FuseviewError, match="not found"):
        load_feeds(tmp_path / "absent.npz", model)
