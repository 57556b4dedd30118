"""Original vs fused on the same feeds: output errors, per-fusion errors and times, on real sessions."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from fuseview.errors import FuseviewError
from fuseview.runtime import samples
from fuseview.runtime.compare import compare_outputs, fusion_times, tensor_diff, with_outputs
from fuseview.runtime.inputs import make_feeds
from fuseview.runtime.profiling import profile_model
from tests.conftest import GPT2_MODELS


@pytest.fixture(scope="module")
def trio():
    orig, fused, broken = samples.gelu_original(), samples.gelu_fused(), samples.gelu_fused(bias=0.5)
    return orig, fused, broken, make_feeds(orig, {"seq": 32})


def test_correct_fusion_is_tiny_and_passes(trio):
    orig, fused, _, feeds = trio
    before = (orig.SerializeToString(), fused.SerializeToString())
    res = compare_outputs(orig, fused, feeds, "cpu")
    assert (orig.SerializeToString(), fused.SerializeToString()) == before  # sources untouched
    y = res["outputs"]["y"]
    assert res["passed"] and y["passed"]
    assert y["max_abs"] < 1e-4 and y["cosine"] > 0.999999
    (f,) = res["fusions"]
    assert f["node"] == "fused_gelu" and f["rule"] == "fast_gelu_tanh" and f["compared"] == ["gelu_out"]
    e = f["errors"]["gelu_out"]
    assert f["passed"] and e["max_abs"] < 1e-5 and e["shape"] == [1, 32, 256]


def test_broken_fusion_is_large_and_fails(trio):
    orig, _, broken, feeds = trio
    res = compare_outputs(orig, broken, feeds, "cpu")
    assert not res["passed"] and res["outputs"]["y"]["max_abs"] > 0.1
    (f,) = res["fusions"]
    assert f["passed"] is False and f["errors"]["gelu_out"]["max_abs"] > 0.1


def test_identical_models_are_exactly_equal(trio):
    orig, _, _, feeds = trio
    res = compare_outputs(orig, orig, feeds, "cpu", atol=0, rtol=0)
    assert res["passed"] and res["outputs"]["y"]["max_abs"] == 0.0 and res["fusions"] == []


def test_fusion_time_against_its_original_nodes(trio):
    orig, fused, _, feeds = trio
    pa = profile_model(orig, feeds, "cpu", runs=3, warmup=1)
    pb = profile_model(fused, feeds, "cpu", runs=3, warmup=1)
    (t,) = fusion_times(fused, orig, pa, pb)
    by_name = {n["name"]: n["mean_us"] for n in pa["nodes"]}
    assert t["node"] == "fused_gelu" and t["op_type"] == "FastGelu"
    assert t["original_nodes"] == t["original_timed"] == 8 and t["missing"] == []
    assert t["original_us"] == pytest.approx(sum(by_name[n] for n in samples.GELU_NODES))
    assert t["fused_us"] > 0 and t["speedup"] == pytest.approx(t["original_us"] / t["fused_us"])


def test_different_signatures_are_refused(trio):
    orig, _, _, feeds = trio
    gpt2 = onnx.load(str(GPT2_MODELS / "gpt2_2l_ts17.onnx"))
    with pytest.raises(FuseviewError, match="inputs differ"):
        compare_outputs(orig, gpt2, feeds, "cpu")
    renamed = onnx.ModelProto()
    renamed.CopyFrom(orig)
    renamed.graph.output[0].name = "z"
    renamed.graph.node[-1].output[0] = "z"
    with pytest.raises(FuseviewError, match="outputs differ"):
        compare_outputs(orig, renamed, feeds, "cpu")


def test_extra_outputs_on_a_copy_only(trio):
    orig = trio[0]
    copy = with_outputs(orig, ["g5"], {})
    assert [o.name for o in copy.graph.output] == ["y", "g5"]
    assert [o.name for o in orig.graph.output] == ["y"]


def test_tensor_diff_metrics():
    a = np.array([1.0, -2.0, 4.0], np.float32)
    d = tensor_diff(a, a + np.array([0, 0.5, 0], np.float32), atol=0.1, rtol=0.0)
    assert d["max_abs"] == pytest.approx(0.5) and d["max_rel"] == pytest.approx(0.25)
    assert d["mean_abs"] == pytest.approx(0.5 / 3) and not d["passed"]
    assert tensor_diff(a, a * 3, 1e-6, 0)["cosine"] == pytest.approx(1.0)
    assert tensor_diff(a, -a, 1e-6, 0)["cosine"] == pytest.approx(-1.0)
    assert tensor_diff(a, a[:2], 1, 1)["passed"] is False
    n = np.array([np.nan, 1.0])
    assert not tensor_diff(n, np.array([0.0, 1.0]), 1, 1)["passed"]
    assert tensor_diff(n, n.copy(), 0, 0)["passed"]
    ints = np.array([1, 2, 3])
    assert tensor_diff(ints, ints.copy(), 0, 0)["passed"]
    # near zero the relative error is taken against atol, not against the tiny reference
    tiny = tensor_diff(np.array([1e-9, 1.0]), np.array([3e-7, 1.0]), atol=1e-4, rtol=1e-3)
    assert tiny["passed"] and tiny["max_rel"] == pytest.approx((3e-7 - 1e-9) / 1e-4)


def test_a_fusion_that_writes_two_nodes_is_one_group(trio):
    """Like bias_fast_gelu: the MatMul and the FastGelu of one candidate share its id and origin."""
    import json

    from fuseview.provenance import CANDIDATE_KEY, ORIGIN_KEY, RULE_KEY
    from fuseview.runtime.profiling import fusion_groups

    orig, fused, _, feeds = trio
    two = onnx.ModelProto()
    two.CopyFrom(fused)
    fc_in = two.graph.node[0]
    assert fc_in.name == "fc_in"
    for key, value in ((ORIGIN_KEY, json.dumps(["fc_in"])), (RULE_KEY, "fast_gelu_tanh"),
                       (CANDIDATE_KEY, "fast_gelu_tanh:gelu_pow")):
        p = fc_in.metadata_props.add()
        p.key, p.value = key, value
    (g,) = fusion_groups(two)
    assert g["nodes"] == ["fc_in", "fused_gelu"] and g["node"] == "fused_gelu" and g["op_type"] == "FastGelu"
    assert g["origin"] == ["fc_in", *samples.GELU_NODES]
    res = compare_outputs(orig, two, feeds, "cpu")
    (f,) = res["fusions"]
    assert f["compared"] == ["h", "gelu_out"] and f["passed"]
    pa = profile_model(orig, feeds, "cpu", runs=3, warmup=1)
    pb = profile_model(two, feeds, "cpu", runs=3, warmup=1)
    (t,) = fusion_times(two, orig, pa, pb)
    a = {n["name"]: n["mean_us"] for n in pa["nodes"]}
    b = {n["name"]: n["mean_us"] for n in pb["nodes"]}
    assert t["fused_nodes"] == 2 and t["original_nodes"] == 9
    assert t["fused_us"] == pytest.approx(b["fc_in"] + b["fused_gelu"])
    assert t["original_us"] == pytest.approx(a["fc_in"] + sum(a[n] for n in samples.GELU_NODES))


def test_tensor_diff_with_infinities_and_nans():
    # a model whose weights overflow: infinities where both have them are equal, not NaN differences
    ref = np.array([np.inf, -np.inf, np.nan, 1.0, 2.0])
    same = tensor_diff(ref, ref.copy(), 1e-4, 1e-3)
    assert same["passed"] and same["max_abs"] == 0.0 and not same["nan_mismatch"]
    flipped = tensor_diff(ref, np.array([-np.inf, -np.inf, np.nan, 1.0, 2.0]), 1e-4, 1e-3)
    assert not flipped["passed"] and flipped["nan_mismatch"]
    only_inf = tensor_diff(np.array([np.inf]), np.array([np.inf]), 1e-4, 1e-3)
    assert only_inf["passed"] and only_inf["max_abs"] == 0.0
