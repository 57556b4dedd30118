"""Real models at real size, in small: weights left on disk, one weightless shape inference, dims as users'
files write them (Paddle's [-1, 3, "?", "?"], If bodies, KV caches), the opset kept unless asked."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from fuseview.cli import main as cli_main
from fuseview.dims import cache_dims, declared_dim, dim_keys, resolve_dims
from fuseview.fusion.pipeline import FuseOptions, build_fused, load_for_fusion, scan_for_fusion
from fuseview.fusion.scan import scan_model
from fuseview.graph import inference, loader
from fuseview.graph.inference import shared_inference, weightless_copy
from fuseview.graph.lazy_weights import has_disk_weights, read_lazily, write_streaming
from fuseview.graph.loader import load_document
from fuseview.runtime.inputs import load_feeds, make_feeds

F = TensorProto.FLOAT
RNG = np.random.default_rng(0)
FAMILIES = Path(__file__).resolve().parent.parent / "assets" / "models" / "families"


def _vi(name: str, shape: list) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, F, shape)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fuseview", *args], capture_output=True, text=True)


# ------------------------------------------------------------------------------------- Paddle classifier
def paddle_classifier() -> onnx.ModelProto:
    """x: [-1, 3, "?", "?"] as a PaddlePaddle classifier declares it: Conv, Relu, pooling, Gemm, Softmax."""
    x = helper.make_tensor_value_info("x", F, [-1, 3, "?", "?"])
    y = helper.make_tensor_value_info("prob", F, [-1, 5])
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3, "conv_w")
    b = numpy_helper.from_array(RNG.standard_normal(4).astype(np.float32), "conv_b")
    fc = numpy_helper.from_array(RNG.standard_normal((4, 5)).astype(np.float32), "fc_w")
    fb = numpy_helper.from_array(RNG.standard_normal(5).astype(np.float32), "fc_b")
    nodes = [
        helper.make_node("Conv", ["x", "conv_w", "conv_b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "fc_w"], ["mm"]),
        helper.make_node("Add", ["mm", "fc_b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["prob"], axis=-1),
    ]
    g = helper.make_graph(nodes, "paddle", [x], [y], [w, b, fc, fb])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("param", ["?", "", "   ", "unk__12"])
def test_names_that_say_nothing_are_unknowns(param):
    d = onnx.TensorShapeProto.Dimension()
    d.dim_param = param
    assert declared_dim(d) is None


def test_paddle_dims_are_three_independent_unknowns():
    m = paddle_classifier()
    assert dim_keys(m) == ["x:0", "x:2", "x:3"]
    scan = scan_model(m, {"x:2": 48, "x:3": 192})
    assert scan.index.shape("c") == [1, 4, 24, 96]  # H and W are two dims, not one "?"


def test_paddle_fuses_and_profiles_with_its_real_input(tmp_path):
    src = tmp_path / "paddle.onnx"
    onnx.save(paddle_classifier(), src)
    npz = tmp_path / "x.npz"
    np.savez(npz, x=RNG.standard_normal((1, 3, 48, 192)).astype(np.float32))
    assert load_feeds(str(npz), paddle_classifier())["x"].shape == (1, 3, 48, 192)
    r = _run("fuse", str(src), "-o", str(tmp_path / "fused.onnx"), "--inputs", str(npz))
    assert r.returncode == 0, r.stderr
    assert "dims x:0=1, x:2=48, x:3=192" in r.stdout
    r = _run("profile", str(src), "--against", str(tmp_path / "fused.onnx"), "--inputs", str(npz),
             "--runs", "3", "--warmup", "1")
    assert r.returncode == 0, r.stderr
    fused = onnx.load(tmp_path / "fused.onnx")
    assert fused.opset_import[0].version == 13  # kept
    sess = ort.InferenceSession(str(tmp_path / "fused.onnx"), providers=["CPUExecutionProvider"])
    assert sess.run(None, {"x": np.zeros((1, 3, 48, 192), np.float32)})[0].shape == (1, 5)


# -------------------------------------------------------------------------------- If bodies (silero-vad)
def _gelu_body(name: str, src: str, out: str) -> onnx.GraphProto:
    """A branch that reads the outer tensor `src` and computes an erf-GELU of it (a fusable body)."""
    def const(k: str, v: float) -> onnx.NodeProto:
        return helper.make_node("Constant", [], [f"{name}_{k}"], value=numpy_helper.from_array(np.float32(v)))

    c = {k: const(k, v) for k, v in (("sqrt2", 1.4142135623730951), ("one", 1.0), ("half", 0.5))}
    nodes = [*c.values(),
             helper.make_node("Div", [src, f"{name}_sqrt2"], [f"{name}_d"]),
             helper.make_node("Erf", [f"{name}_d"], [f"{name}_e"]),
             helper.make_node("Add", [f"{name}_e", f"{name}_one"], [f"{name}_a"]),
             helper.make_node("Mul", [src, f"{name}_a"], [f"{name}_m"]),
             helper.make_node("Mul", [f"{name}_m", f"{name}_half"], [out])]
    return helper.make_graph(nodes, name, [], [_vi(out, ["batch", "sequence", 8])])


def if_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", F, ["batch", "sequence", 8])
    cond = helper.make_tensor_value_info("use_gelu", TensorProto.BOOL, [])
    nodes = [helper.make_node("Relu", ["x"], ["h"]),
             helper.make_node("If", ["use_gelu"], ["y"], then_branch=_gelu_body("then", "h", "t_out"),
                              else_branch=helper.make_graph(
                                  [helper.make_node("Identity", ["h"], ["e_out"])], "else", [],
                                  [_vi("e_out", ["batch", "sequence", 8])]))]
    g = helper.make_graph(nodes, "vad", [x, cond], [_vi("y", ["batch", "sequence", 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_dim_names_top_level_inputs_only_for_models_with_if(tmp_path):
    m = if_model()
    scan = scan_model(m, {"batch": 1, "sequence": 512})  # refused before: the bodies got the outer --dim
    inner = [c for c in scan.candidates if c.scope]
    assert inner and inner[0].rule == "gelu_erf"
    with pytest.raises(Exception, match=r"valid: batch, sequence\)"):
        scan_model(m, {"then_d:0": 1})  # the error lists the model's own input dims
    src = tmp_path / "vad.onnx"
    onnx.save(m, src)
    r = _run("fuse", str(src), "-o", str(tmp_path / "f.onnx"), "--dim", "batch=1", "--dim", "sequence=512")
    assert r.returncode == 0, r.stderr
    assert "validated on onnxruntime" in r.stdout


# ------------------------------------------------------------------------------------ KV-cache decoders
def cached_decoder(own_symbols: bool) -> onnx.ModelProto:
    """One attention layer with a KV cache; the dynamo exporter's way gives each past tensor and the mask a
    symbol of their own (s15, s89, s53). onnxruntime refuses inputs where mask != past + new."""
    past = ("s15", "s89") if own_symbols else ("past_sequence", "past_sequence")
    total = "s53" if own_symbols else "total_sequence"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", total]),
              helper.make_tensor_value_info("past_key_values.0.key", F, ["batch", 2, past[0], 4]),
              helper.make_tensor_value_info("past_key_values.0.value", F, ["batch", 2, past[1], 4])]
    emb = numpy_helper.from_array(RNG.standard_normal((10, 2, 4)).astype(np.float32), "emb")
    nodes = [
        helper.make_node("Gather", ["emb", "input_ids"], ["e"]),  # [b, s, 2, 4]
        helper.make_node("Transpose", ["e"], ["q"], perm=[0, 2, 1, 3]),  # [b, 2, s, 4]
        helper.make_node("Concat", ["past_key_values.0.key", "q"], ["present.0.key"], axis=2),
        helper.make_node("Concat", ["past_key_values.0.value", "q"], ["present.0.value"], axis=2),
        helper.make_node("Transpose", ["present.0.key"], ["kt"], perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),  # [b, 2, s, total]
        helper.make_node("Cast", ["attention_mask"], ["mf"], to=F),
        helper.make_node("Unsqueeze", ["mf", "axes"], ["m4"]),  # [b, 1, 1, total]
        helper.make_node("Add", ["scores", "m4"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "present.0.value"], ["out"]),
    ]
    axes = numpy_helper.from_array(np.array([1, 2], np.int64), "axes")
    outs = [helper.make_tensor_value_info("out", F, ["batch", 2, "sequence", 4])] + [
        _vi(n, ["batch", 2, "present", 4]) for n in ("present.0.key", "present.0.value")]
    g = helper.make_graph(nodes, "decoder", inputs, outs, [emb, axes])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("own_symbols", [False, True])
def test_cached_decoder_runs_with_no_dim(own_symbols, tmp_path):
    m = cached_decoder(own_symbols)
    cache = cache_dims(m)
    assert cache is not None and cache.new == "sequence" and len(cache.total) == 1
    used = resolve_dims(m)
    past = {used[k] for k in cache.past}
    assert past == {1} and used[cache.total[0]] == 1 + used["sequence"]
    used = resolve_dims(m, {cache.past[0]: 64, "sequence": 16})
    assert {used[k] for k in cache.past} == {64} and used[cache.total[0]] == 80
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    assert sess.run(None, make_feeds(m))[1].shape == (1, 2, 129, 4)  # onnxruntime takes the inputs
    src = tmp_path / "dec.onnx"
    onnx.save(m, src)
    r = _run("fuse", str(src), "-o", str(tmp_path / "f.onnx"))
    assert r.returncode == 0, r.stderr


# ------------------------------------------------------------------------------- weightless inference
def _big_model(tmp_path: Path) -> tuple[Path, np.ndarray]:
    """A model with one 2 MiB weight inside the file, as real exports keep theirs."""
    w = RNG.standard_normal((512, 1024)).astype(np.float32)
    x = helper.make_tensor_value_info("x", F, ["batch", "sequence", 512])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["y"])]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(RNG.standard_normal(1024).astype(np.float32), "b")]
    g = helper.make_graph(nodes, "big", [x], [_vi("y", ["batch", "sequence", 1024])], inits)
    path = tmp_path / "big.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path, w


def test_shape_inference_input_carries_no_weight(tmp_path):
    path, _w = _big_model(tmp_path)
    model = onnx.load(path)
    copy = weightless_copy(model)
    t = next(t for t in copy.graph.initializer if t.name == "w")
    assert not t.HasField("raw_data") and list(t.dims) == [512, 1024] and t.data_type == F
    assert copy.ByteSize() < 2000 < model.ByteSize()
    assert next(i for i in model.graph.initializer if i.name == "w").HasField("raw_data")  # source untouched
    inf = shared_inference(model)
    assert inf.shapes["y"][0] == ["batch", "sequence", 1024]


def test_loader_and_scan_share_one_inference(tmp_path, monkeypatch):
    path, _w = _big_model(tmp_path)
    seen: list[int] = []
    real = onnx.shape_inference.infer_shapes

    def counting(model, *args, **kwargs):
        seen.append(model.ByteSize())
        return real(model, *args, **kwargs)

    monkeypatch.setattr(inference.onnx.shape_inference, "infer_shapes", counting)
    doc = load_document(path)
    scan = scan_model(doc.model, {"sequence": 4}, base_dir=path.parent)
    assert len(seen) == 1 and seen[0] < 2000  # once, and on the weightless copy
    assert scan.index.shape("y") == [1, 4, 1024]
    assert doc.graph.tensors["y"].shape == ("batch", "sequence", 1024)


def test_big_weights_stay_on_disk_and_stream_out(tmp_path, monkeypatch):
    path, w = _big_model(tmp_path)
    lazy = read_lazily(path)
    t = next(t for t in lazy.graph.initializer if t.name == "w")
    assert t.data_location == TensorProto.EXTERNAL and not t.HasField("raw_data")
    assert np.array_equal(numpy_helper.to_array(t, base_dir=str(path.parent)), w)
    assert next(t for t in lazy.graph.initializer if t.name == "b").HasField("raw_data")  # small stays
    write_streaming(lazy, tmp_path / "again.onnx")
    assert onnx.load(tmp_path / "again.onnx") == onnx.load(path)
    # the loader takes this path for big files: fuse then never holds the weights
    monkeypatch.setattr(loader, "LAZY_FILE_BYTES", 0)
    model = load_for_fusion(path)
    assert has_disk_weights(model)
    scan = scan_for_fusion(model, {"sequence": 4}, path)
    read = scan.index.const_value("w")  # a rule reading the weight gets a map of the file, not a copy
    assert isinstance(read, np.memmap) and np.array_equal(read, w)
    outcome = build_fused(model, scan, [c.id for c in scan.candidates],
                          FuseOptions(dims={"sequence": 4}, weights_on_disk=True), path.parent)
    assert outcome.validation is not None and outcome.validation.ok
    assert cli_main(["fuse", str(path), "-o", str(tmp_path / "fused.onnx"), "--dim", "sequence=4"]) == 0
    fused = onnx.load(tmp_path / "fused.onnx")
    assert all(t.data_location == TensorProto.DEFAULT for t in fused.graph.initializer)
    got = next((t for t in fused.graph.initializer if t.name == "w"), None)
    assert got is not None and np.array_equal(numpy_helper.to_array(got), w)


# ----------------------------------------------------------------------------------------- opset kept
@pytest.mark.parametrize(("target", "opset", "has_hardswish"), [(None, 13, False), (14, 14, True)])
def test_fuse_keeps_the_opset_unless_asked(tmp_path, target, opset, has_hardswish):
    src = FAMILIES / "mobilenet_hswish_ts13.onnx"
    extra = ["--target-opset", str(target)] if target else []
    r = _run("fuse", str(src), "-o", str(tmp_path / "f.onnx"), *extra)
    assert r.returncode == 0, r.stderr
    fused = onnx.load(tmp_path / "f.onnx")
    assert next(o.version for o in fused.opset_import if o.domain == "") == opset
    assert ("HardSwish" in {n.op_type for n in fused.graph.node}) == has_hardswish
    assert ("--target-opset 14 applies it" in r.stdout) != has_hardswish


def test_profile_against_keeps_both_models_weights_on_disk(tmp_path, monkeypatch):
    # profile used to read both models whole and serialize them into every session (a 622 MB pair:
    # 88 s, 9.9 GB); the one loader leaves big weights in their files, sessions reach them by links
    from fuseview.graph import lazy_weights
    from fuseview.runtime.job import ProfileRequest, run_profile

    path, _w = _big_model(tmp_path)
    fused = tmp_path / "fused.onnx"
    shutil.copy(path, fused)  # a same-signature model to compare against
    monkeypatch.setattr(loader, "LAZY_FILE_BYTES", 0)
    read_whole = []
    real = lazy_weights.materialized
    monkeypatch.setattr(lazy_weights, "materialized", lambda m, b: read_whole.append(1) or real(m, b))
    monkeypatch.setattr(onnx, "load_external_data_for_model", lambda *a: read_whole.append(1))
    rep = run_profile(ProfileRequest(str(path), str(fused), provider="cpu", runs=4, dims={"sequence": 4},
                                     threads=1, sessions=2))
    assert not read_whole
    assert rep["comparison"]["outputs"] and all(o["passed"] for o in rep["comparison"]["outputs"].values())
