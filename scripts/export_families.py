"""Export small test models for the non-transformer rule families to assets/models/families, with INDEX.json.

Every model is built in code (plain torch modules, seeded random weights; nothing is downloaded):
a MobileNetV3-like CNN (HardSwish / HardSigmoid / ReLU6, squeeze-excite), a YOLO-like block (Conv-BN-SiLU,
residual bottleneck, SPPF-like pooling), a Paddle-style graph (weights in Constant nodes, bias-free Conv plus
a per-channel Add, decomposed LayerNorm at opset 12), a GRU and an LSTM tagger, an LSTM tagger wrapped in an
If (onnx.helper), and int8 models made by onnxruntime.quantization: an MLP quantized dynamically and a CNN
quantized statically to QDQ. Needs torch, onnx and onnxruntime (scripts only; fuseview never imports torch).

    /work/venvs/torch/bin/python scripts/export_families.py [--out assets/models/families] [--only NAME ...]

Requires: torch, numpy, onnx, onnxruntime, fuseview
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import helper, numpy_helper
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # fuseview's guarded writer, from the checkout (the torch venv lacks it)
from fuseview.atomic import write_atomic, write_text_atomic  # noqa: E402

SEED = 0
MAX_ABS_DIFF = 1e-4


def _perturb_bn(model: nn.Module) -> None:
    # Fresh BatchNorm statistics are 0/1, which would hide a fold that drops either.
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                mod.weight.copy_(1.0 + 0.1 * torch.randn(mod.weight.shape, generator=g))
                mod.bias.copy_(0.1 * torch.randn(mod.bias.shape, generator=g))
                mod.running_mean.copy_(0.1 * torch.randn(mod.running_mean.shape, generator=g))
                mod.running_var.copy_(0.5 + torch.rand(mod.running_var.shape, generator=g))


# ------------------------------------------------------------------------------------- MobileNetV3-like
class _ManualHardSwish(nn.Module):
    """x * relu6(x + 3) / 6 as many MobileNetV3 repositories write it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * nn.functional.relu6(x + 3.0) / 6.0


class _SqueezeExcite(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // 4, 1)
        self.fc2 = nn.Conv2d(c // 4, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean((2, 3), keepdim=True)
        s = nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s


def _cbn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: nn.Module | None = None):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, *([act] if act is not None else []))


class _MobileNetish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = _cbn(3, 16, 3, 2, act=nn.Hardswish())
        self.dw = _cbn(16, 16, 3, 1, groups=16, act=nn.ReLU6())
        self.se = _SqueezeExcite(16)
        self.pw = _cbn(16, 24, 1, act=_ManualHardSwish())
        self.expand = _cbn(24, 48, 1, act=nn.Hardswish())
        self.head = nn.Linear(48, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.se(self.dw(self.stem(x)))
        y = self.expand(self.pw(y))
        return self.head(y.mean((2, 3)))


# ------------------------------------------------------------------------------------------ YOLO-like
class _ConvSiLU(nn.Module):
    def __init__(self, cin: int, cout: int, k: int = 1, s: int = 1) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, s, k // 2, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.bn(self.conv(x)))


class _Yoloish(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = _ConvSiLU(3, 16, 3, 2)
        self.b1, self.b2 = _ConvSiLU(16, 16, 1), _ConvSiLU(16, 16, 3)
        self.sppf_in = _ConvSiLU(16, 8, 1)
        self.sppf_out = _ConvSiLU(32, 16, 1)
        self.detect = nn.Conv2d(16, 18, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        x = x + self.b2(self.b1(x))  # bottleneck with a shortcut
        y = self.sppf_in(x)
        p1 = nn.functional.max_pool2d(y, 5, 1, 2)
        p2 = nn.functional.max_pool2d(p1, 5, 1, 2)
        p3 = nn.functional.max_pool2d(p2, 5, 1, 2)
        x = self.sppf_out(torch.cat([y, p1, p2, p3], 1))
        return torch.sigmoid(self.detect(x))


# -------------------------------------------------------------------------------------- Paddle-style
class _PaddleStyle(nn.Module):
    """Bias-free Conv + per-channel Add + ReLU6, flatten, x @ W + b (2-D), decomposed LayerNorm."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, 1, 1, bias=False)
        self.cbias = nn.Parameter(torch.randn(1, 8, 1, 1) * 0.1)
        self.w = nn.Parameter(torch.randn(8 * 8 * 8, 32) * 0.05)
        self.b = nn.Parameter(torch.randn(32) * 0.1)
        self.gamma = nn.Parameter(1 + 0.1 * torch.randn(32))
        self.beta = nn.Parameter(0.1 * torch.randn(32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.clamp(self.conv(x) + self.cbias, 0.0, 6.0)
        h = torch.matmul(y.flatten(1), self.w) + self.b
        mu = h.mean(-1, keepdim=True)
        d = h - mu
        var = (d * d).mean(-1, keepdim=True)
        return d / torch.sqrt(var + 1e-5) * self.gamma + self.beta


def _to_constant_nodes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Move every initializer into a Constant node (as PaddlePaddle's exporter writes weights)."""
    g = model.graph
    consts = [helper.make_node("Constant", [], [t.name], name=f"const_{t.name}", value=t)
              for t in g.initializer]
    nodes = consts + list(g.node)
    del g.initializer[:]
    del g.node[:]
    g.node.extend(nodes)
    return model


# --------------------------------------------------------------------------------------------- RNNs
class _Tagger(nn.Module):
    def __init__(self, cell: str) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 16)
        rnn = nn.GRU if cell == "gru" else nn.LSTM
        self.rnn = rnn(16, 32, batch_first=True, bidirectional=cell == "lstm")
        width = 64 if cell == "lstm" else 32
        self.fc = nn.Linear(width, 48)
        self.out = nn.Linear(48, 9)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h, _ = self.rnn(self.embed(ids))
        return self.out(nn.functional.gelu(self.fc(h)))


# ----------------------------------------------------------------------------------------------- int8
class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(64, 128), nn.Linear(128, 128), nn.Linear(128, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l3(torch.relu(self.l2(torch.relu(self.l1(x)))))


class _SmallCnn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 16, 3, 1, 1), nn.Conv2d(16, 16, 3, 1, 1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c2(torch.relu(self.c1(x)))
        return self.fc(torch.relu(y).mean((2, 3)))


# ------------------------------------------------------------------------------------------- exporting
def _torch_export(model: nn.Module, example: dict[str, np.ndarray], path: Path, opset: int,
                  axes: dict[str, dict[int, str]], outputs: list[str], fold: bool) -> None:
    args = tuple(torch.from_numpy(v) for v in example.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model.eval(), args, str(path), dynamo=False, opset_version=opset,
                          input_names=list(example), output_names=outputs, dynamic_axes=axes,
                          training=torch.onnx.TrainingMode.EVAL, do_constant_folding=fold)


def _image(batch: int = 2, size: int = 16, seed: int = SEED) -> dict[str, np.ndarray]:
    return {"image": np.random.default_rng(seed).standard_normal((batch, 3, size, size)).astype(np.float32)}


def _ids(seed: int = SEED) -> dict[str, np.ndarray]:
    return {"ids": np.random.default_rng(seed).integers(0, 100, (2, 7)).astype(np.int64)}


def _seeded(cls: Callable[[], nn.Module]) -> nn.Module:
    torch.manual_seed(SEED)
    m = cls().eval()
    _perturb_bn(m)
    return m


IMAGE_AXES = {"image": {0: "batch"}, "out": {0: "batch"}}
SEQ_AXES = {"ids": {0: "batch", 1: "seq"}, "out": {0: "batch", 1: "seq"}}


def _export_torch(cls, example, opset, axes, fold=False, post=None):  # noqa: ANN001, ANN202
    def make(path: Path) -> dict:
        model = _seeded(cls)
        _torch_export(model, example, path, opset, axes, ["out"], fold)
        if post is not None:
            m = post(onnx.load(str(path)))
            onnx.save(m, str(path))
        with torch.no_grad():
            ref = model(*[torch.from_numpy(v) for v in example.values()]).numpy()
        return {"reference": ref}

    return make


def _if_wrapped_lstm(path: Path) -> dict:
    """An LSTM tagger inside both branches of an If (reverse the sequence or not), built with onnx.helper."""
    inner = path.with_suffix(".inner.onnx")
    _export_torch(lambda: _Tagger("lstm"), _ids(), 14, SEQ_AXES)(inner)
    m = onnx.load(str(inner))
    inner.unlink()
    g = m.graph

    def branch(name: str, reverse: bool) -> onnx.GraphProto:
        nodes = []
        ren = {}
        src = "ids"
        if reverse:  # ids[:, ::-1] with a Slice of step -1 (any batch and sequence length)
            for key, val in (("starts", -1), ("ends", np.iinfo(np.int64).min), ("axes", 1), ("steps", -1)):
                nodes.append(helper.make_node("Constant", [], [f"{name}_{key}"],
                                              value=numpy_helper.from_array(np.array([val], np.int64))))
            nodes.append(helper.make_node("Slice", ["ids"] + [f"{name}_{k}" for k in
                                                              ("starts", "ends", "axes", "steps")],
                                          [f"{name}_rev"], name=f"{name}/reverse"))
            src = f"{name}_rev"
        for n in g.node:
            c = onnx.NodeProto()
            c.CopyFrom(n)
            c.name = f"{name}/{n.name}"
            for i, x in enumerate(c.input):
                if x == "ids":
                    c.input[i] = src
                elif x:
                    c.input[i] = ren.get(x, x if x in {t.name for t in g.initializer} else f"{name}/{x}")
            for i, x in enumerate(c.output):
                ren[x] = f"{name}/{x}" if x != "out" else f"{name}_out"
                c.output[i] = ren[x]
            nodes.append(c)
        out = helper.make_tensor_value_info(f"{name}_out", onnx.TensorProto.FLOAT, None)
        return helper.make_graph(nodes, name, [], [out])

    cond = helper.make_tensor_value_info("reverse", onnx.TensorProto.BOOL, [])
    node = helper.make_node("If", ["reverse"], ["out"], name="maybe_reverse",
                            then_branch=branch("then", True), else_branch=branch("else", False))
    graph = helper.make_graph([node], "if_lstm", [g.input[0], cond], [g.output[0]], list(g.initializer))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return {}


def _quantized(cls, example, fmt: str) -> Callable[[Path], dict]:  # noqa: ANN001
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_dynamic,
        quantize_static,
    )

    class _Reader(CalibrationDataReader):
        def __init__(self) -> None:
            name = next(iter(example))
            self.items = iter([{name: (np.random.default_rng(s).standard_normal(v.shape)).astype(np.float32)}
                               for s in range(8) for v in example.values()])

        def get_next(self):  # noqa: ANN202
            return next(self.items, None)

    def make(path: Path) -> dict:
        fp32 = path.with_suffix(".fp32.onnx")
        axes = {k: {0: "batch"} for k in [*example, "out"]}
        _export_torch(cls, example, 17, axes, fold=True)(fp32)
        if fmt == "dynamic":
            quantize_dynamic(str(fp32), str(path), weight_type=QuantType.QInt8)
        else:
            quantize_static(str(fp32), str(path), _Reader(), quant_format=QuantFormat.QDQ,
                            activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        fp32.unlink()
        return {}

    return make


MODELS: dict[str, tuple[str, Callable[[Path], dict], dict[str, np.ndarray]]] = {
    "mobilenet_hswish_ts13": ("MobileNetV3-like CNN: Conv-BN-HardSwish, depthwise ReLU6, squeeze-excite "
                              "HardSigmoid, manual x*relu6(x+3)/6 (opset 13: HardSwish is HardSigmoid+Mul)",
                              _export_torch(_MobileNetish, _image(), 13, IMAGE_AXES), _image()),
    "yolo_silu_ts17": ("YOLO-like block: Conv-BN-SiLU, residual bottleneck, SPPF pooling, sigmoid head",
                       _export_torch(_Yoloish, _image(), 17, IMAGE_AXES), _image()),
    "paddle_style_ts12": ("Paddle-style: weights in Constant nodes, bias-free Conv + channel Add + ReLU6, "
                          "2-D x@W+b, decomposed LayerNorm, opset 12",
                          _export_torch(_PaddleStyle, _image(size=8), 12, IMAGE_AXES, fold=True,
                                        post=_to_constant_nodes), _image(size=8)),
    "gru_tagger_ts14": ("Embedding + GRU + Linear-GELU-Linear tagger",
                        _export_torch(lambda: _Tagger("gru"), _ids(), 14, SEQ_AXES), _ids()),
    "lstm_tagger_ts14": ("Embedding + bidirectional LSTM + Linear-GELU-Linear tagger",
                         _export_torch(lambda: _Tagger("lstm"), _ids(), 14, SEQ_AXES), _ids()),
    "if_lstm_tagger": ("the LSTM tagger inside both branches of an If (then: reversed sequence), onnx.helper",
                       _if_wrapped_lstm, {**_ids(), "reverse": np.array(True)}),
    "mlp_int8_dynamic": ("3-layer MLP quantized by onnxruntime.quantization.quantize_dynamic (QInt8 weights)",
                         _quantized(_Mlp, {"x": np.zeros((2, 64), np.float32)}, "dynamic"),
                         {"x": np.zeros((2, 64), np.float32)}),
    "cnn_int8_qdq": ("2-conv CNN quantized statically to QDQ (uint8 activations, int8 weights)",
                     _quantized(_SmallCnn, _image(), "qdq"), _image()),
}


def export_one(name: str, out_dir: Path) -> dict:
    """Export one model, check it and run it in onnxruntime; returns its INDEX.json entry."""
    about, make, example = MODELS[name]
    path = out_dir / f"{name}.onnx"
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp) / path.name
        facts = make(tmp_path)
        model = onnx.load(str(tmp_path))
        onnx.checker.check_model(model, full_check=True)
        sess = ort.InferenceSession(str(tmp_path), providers=["CPUExecutionProvider"])
        feeds = {i.name: example[i.name] for i in sess.get_inputs()}
        got = sess.run(None, feeds)[0]
        ref = facts.get("reference")
        diff = None if ref is None else float(np.max(np.abs(got - ref)))
        if diff is not None and diff > MAX_ABS_DIFF:
            raise SystemExit(f"{name}: onnxruntime differs from torch by {diff:g}")
        write_atomic(path, lambda out: shutil.copyfile(tmp_path, out))
    opset = next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    ops = Counter(n.op_type for n in model.graph.node)
    for n in model.graph.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops.update(f"{a.name}:{x.op_type}" for x in a.g.node)
    return {"file": path.name, "about": about, "opset": opset, "bytes": path.stat().st_size,
            "nodes": len(model.graph.node), "ops": dict(sorted(ops.items())),
            "inputs": {k: list(v.shape) for k, v in example.items()}, "ort_vs_torch_max_abs": diff}


def main() -> None:
    """Export the models named (all by default) and rewrite INDEX.json."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "assets" / "models" / "families")
    ap.add_argument("--only", nargs="*", default=None)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    index_path = args.out / "INDEX.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"models": {}}
    index["_about"] = {"script": "scripts/export_families.py", "torch": torch.__version__,
                       "onnx": onnx.__version__, "onnxruntime": ort.__version__, "seed": SEED}
    for name in args.only or list(MODELS):
        entry = export_one(name, args.out)
        index["models"][name] = entry
        print(f"{name:24} {entry['bytes']:>8} bytes  {entry['nodes']:>4} nodes  opset {entry['opset']}")
    write_text_atomic(index_path, json.dumps(index, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
