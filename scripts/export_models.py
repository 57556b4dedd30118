"""Export small real-architecture test models (random weights) to assets/models, with INDEX.json.

Every model is built in code from a transformers config or plain torch modules: nothing is downloaded.
Widths and vocabularies are tiny so the files can be committed; layer structure is the real one.
Needs torch and transformers (scripts only; fuseview itself never imports them).

    python scripts/export_models.py [--out assets/models] [--only NAME ...]

Requires: torch, transformers, numpy, onnx, onnxruntime
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
VOCAB = 1000
# ORT must reproduce torch on the sample input within this bound, or the export is rejected.
MAX_ABS_DIFF = 1e-4


@dataclass
class Spec:
    """What to build and how to export it."""

    name: str
    architecture: str
    build: Callable[[], tuple[nn.Module, dict]]  # -> (module in eval mode, facts for INDEX.json)
    inputs: list[tuple[str, str, list]]  # (name, kind, shape); kind: ids, type_ids, mask, float
    outputs: list[str]
    exporter: str  # "torchscript" or "dynamo"
    opset: int | None
    notes: str = ""
    export_kwargs: dict = field(default_factory=dict)


# ---------------------------------------------------------------- model builders


def perturb_norms(model: nn.Module) -> None:
    """Move every norm's scale/bias (and BatchNorm statistics) away from 1/0, seeded."""
    # Random-init norms are exactly scale 1 / bias 0, which would hide a fused norm that drops either.
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for mod in model.modules():
            cls = type(mod).__name__
            if "Norm" not in cls:
                continue
            w = getattr(mod, "weight", None)
            if isinstance(w, torch.Tensor):
                w.copy_(1.0 + 0.1 * torch.randn(w.shape, generator=g))
            b = getattr(mod, "bias", None)
            if isinstance(b, torch.Tensor):
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                mod.running_mean.copy_(0.1 * torch.randn(mod.running_mean.shape, generator=g))
                mod.running_var.copy_(0.5 + torch.rand(mod.running_var.shape, generator=g))


class LogitsOnly(nn.Module):
    """Call a causal LM without a cache and return only its logits."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits


class _BertOutputs(nn.Module):
    """Call BertModel and return (last_hidden_state, pooler_output) as a plain tuple."""

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001
        out = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
        return out.last_hidden_state, out.pooler_output


def _bert() -> tuple[nn.Module, dict]:
    cfg = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        max_position_embeddings=128,
        type_vocab_size=2,
        hidden_act="gelu",
        attn_implementation="eager",
    )
    torch.manual_seed(SEED)
    model = transformers.BertModel(cfg).eval()
    perturb_norms(model)
    facts = {"layers": 2, "hidden_size": 64, "heads": 4, "intermediate_size": 128, "vocab_size": VOCAB,
             "attn_implementation": "eager", "max_positions": 128}
    return _BertOutputs(model).eval(), facts


class _EncoderOutputs(nn.Module):
    """Call an encoder and return last_hidden_state only; token_type_ids is passed only if declared."""

    def __init__(self, enc: nn.Module, with_types: bool) -> None:
        super().__init__()
        self.enc = enc
        self.with_types = with_types

    def forward(self, input_ids, attention_mask, *rest):  # noqa: ANN001
        kw = {"token_type_ids": rest[0]} if self.with_types and rest else {}
        return self.enc(input_ids=input_ids, attention_mask=attention_mask, **kw).last_hidden_state


def _encoder(kind: str, with_types: bool = False, attn: str = "eager") -> Callable[[], tuple]:
    """A 2-layer encoder of one transformers architecture (bert, roberta, distilbert, mpnet), width 64."""

    def build() -> tuple[nn.Module, dict]:
        common = {"vocab_size": VOCAB, "max_position_embeddings": 130, "attn_implementation": attn}
        if kind == "distilbert":
            cfg = transformers.DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128, **common)
            cls = transformers.DistilBertModel
        elif kind == "mpnet":  # a relative-position bias added to the scores before the mask
            cfg = transformers.MPNetConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                           intermediate_size=128, pad_token_id=1, **common)
            cls = transformers.MPNetModel
        elif kind == "roberta":
            cfg = transformers.RobertaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                             intermediate_size=128, type_vocab_size=1, pad_token_id=1,
                                             **common)
            cls = transformers.RobertaModel
        else:
            cfg = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                          intermediate_size=128, type_vocab_size=2, **common)
            cls = transformers.BertModel
        torch.manual_seed(SEED)
        model = cls(cfg, add_pooling_layer=False).eval() if kind != "distilbert" else cls(cfg).eval()
        perturb_norms(model)
        facts = {"layers": 2, "hidden_size": 64, "heads": 4, "intermediate_size": 128, "vocab_size": VOCAB,
                 "attn_implementation": attn, "max_positions": 130}
        return _EncoderOutputs(model, with_types).eval(), facts

    return build


class _VitOutputs(nn.Module):
    """Call ViTModel on pixel values and return last_hidden_state."""

    def __init__(self, vit: nn.Module) -> None:
        super().__init__()
        self.vit = vit

    def forward(self, pixel_values):  # noqa: ANN001
        return self.vit(pixel_values=pixel_values).last_hidden_state


def _vit() -> tuple[nn.Module, dict]:
    cfg = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=128, image_size=32, patch_size=8, num_channels=3,
                                 attn_implementation="eager")
    torch.manual_seed(SEED)
    model = transformers.ViTModel(cfg, add_pooling_layer=False).eval()
    perturb_norms(model)
    facts = {"layers": 2, "hidden_size": 64, "heads": 4, "intermediate_size": 128, "image": [3, 32, 32],
             "patch": 8, "attn_implementation": "eager"}
    return _VitOutputs(model).eval(), facts


def _llama(kv_heads: int) -> Callable[[], tuple[nn.Module, dict]]:
    def build() -> tuple[nn.Module, dict]:
        cfg = transformers.LlamaConfig(
            vocab_size=VOCAB,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=kv_heads,
            intermediate_size=128,
            max_position_embeddings=256,
            hidden_act="silu",
            tie_word_embeddings=False,
            attn_implementation="eager",
            use_cache=False,
        )
        torch.manual_seed(SEED)
        model = transformers.LlamaForCausalLM(cfg).eval()
        perturb_norms(model)
        facts = {"layers": 2, "hidden_size": 64, "heads": 4, "kv_heads": kv_heads, "intermediate_size": 128,
                 "vocab_size": VOCAB, "attn_implementation": "eager", "max_positions": 256}
        return LogitsOnly(model).eval(), facts

    return build


def _gpt2(layers: int, n_embd: int, heads: int) -> Callable[[], tuple[nn.Module, dict]]:
    def build() -> tuple[nn.Module, dict]:
        cfg = transformers.GPT2Config(
            vocab_size=VOCAB,
            n_positions=256,
            n_embd=n_embd,
            n_layer=layers,
            n_head=heads,
            bos_token_id=VOCAB - 1,
            eos_token_id=VOCAB - 1,
            activation_function="gelu_new",
            attn_implementation="eager",
            use_cache=False,
        )
        torch.manual_seed(SEED)
        model = transformers.GPT2LMHeadModel(cfg).eval()
        perturb_norms(model)
        facts = {"layers": layers, "hidden_size": n_embd, "heads": heads, "intermediate_size": 4 * n_embd,
                 "vocab_size": VOCAB, "attn_implementation": "eager", "max_positions": 256}
        return LogitsOnly(model).eval(), facts

    return build


class _Mlp(nn.Module):
    """Two transformer-style MLP blocks: Linear -> GELU -> Linear, residual, LayerNorm."""

    def __init__(self, width: int, approximate: str) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.ModuleDict(
                {
                    "fc1": nn.Linear(width, 4 * width),
                    "act": nn.GELU(approximate=approximate),
                    "fc2": nn.Linear(4 * width, width),
                    "norm": nn.LayerNorm(width),
                }
            )
            for _ in range(2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b["norm"](x + b["fc2"](b["act"](b["fc1"](x))))
        return x


def _mlp(approximate: str) -> Callable[[], tuple[nn.Module, dict]]:
    def build() -> tuple[nn.Module, dict]:
        torch.manual_seed(SEED)
        model = _Mlp(64, approximate).eval()
        perturb_norms(model)
        return model, {"layers": 2, "hidden_size": 64, "intermediate_size": 256, "gelu": approximate}

    return build


class _ConvNet(nn.Module):
    """Conv-BN-ReLU x2, max pool, global average pool, Linear classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.pool(self.features(x)), 1))


def _convnet() -> tuple[nn.Module, dict]:
    torch.manual_seed(SEED)
    model = _ConvNet().eval()
    perturb_norms(model)
    return model, {"layers": 2, "hidden_size": 32, "image": [3, 32, 32], "classes": 10}


# ---------------------------------------------------------------- the list

_TOKENS = [("input_ids", "ids", ["batch", "seq"]), ("attention_mask", "mask", ["batch", "seq"])]
_BERT_IN = _TOKENS + [("token_type_ids", "type_ids", ["batch", "seq"])]

SPECS: list[Spec] = [
    Spec("bert_2l_ts17", "BertModel", _bert, _BERT_IN, ["last_hidden_state", "pooler_output"],
         "torchscript", 17,
         "LayerNormalization is native at opset 17; erf GELU decomposed (Div/Erf/Add/Mul)."),
    Spec("bert_2l_ts13", "BertModel", _bert, _BERT_IN, ["last_hidden_state", "pooler_output"],
         "torchscript", 13,
         "LayerNorm decomposed (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add)."),
    Spec("gpt2_96l_ts13", "GPT2LMHeadModel", _gpt2(96, 16, 2), _TOKENS, ["logits"], "torchscript", 13,
         "Large graph for the layout benchmark; n_embd 16 (not 32) keeps the file under 6 MB. "
         "Decomposed LayerNorm, tanh GELU (gelu_new), Conv1D as Gemm, "
         "eager attention with causal+padding mask."),
    Spec("llama_2l_ts17", "LlamaForCausalLM", _llama(4), _TOKENS, ["logits"], "torchscript", 17,
         "RMSNorm (Pow/ReduceMean/Add/Sqrt/Div/Mul), rotary (Cos/Sin), SiLU MLP, causal mask."),
    Spec("llama_2l_gqa_ts17", "LlamaForCausalLM", _llama(2), _TOKENS, ["logits"], "torchscript", 17,
         "Grouped-query attention: 4 query heads share 2 key/value heads (repeat_kv Expand/Reshape)."),
    Spec("llama_2l_dynamo", "LlamaForCausalLM", _llama(4), _TOKENS, ["logits"], "dynamo", None,
         "torch.onnx dynamo exporter (torch.export + onnxscript), default optimisation."),
    Spec("mlp_gelu_tanh_ts17", "MLP (Linear-GELU(tanh)-Linear, residual, LayerNorm) x2", _mlp("tanh"),
         [("x", "float", ["batch", "seq", 64])], ["y"], "torchscript", 17, "tanh GELU decomposed."),
    Spec("mlp_gelu_erf_ts17", "MLP (Linear-GELU(erf)-Linear, residual, LayerNorm) x2", _mlp("none"),
         [("x", "float", ["batch", "seq", 64])], ["y"], "torchscript", 17, "erf GELU decomposed."),
    Spec("roberta_2l_dynamo18", "RobertaModel", _encoder("roberta"), _TOKENS, ["last_hidden_state"],
         "dynamo", 18, "dynamo exporter, opset 18, symbolic batch/seq: ONNX LayerNormalization and Gelu ops, "
         "position ids from a cumulative sum over the padding mask."),
    Spec("mpnet_2l_ts17", "MPNetModel", _encoder("mpnet"), _TOKENS, ["last_hidden_state"], "torchscript", 17,
         "MPNet (all-mpnet-base-v2's architecture): relative-position bias + mask, two Adds before Softmax."),
    Spec("mpnet_2l_dynamo18", "MPNetModel", _encoder("mpnet"), _TOKENS, ["last_hidden_state"], "dynamo", 18,
         "MPNet by the dynamo exporter, opset 18."),
    Spec("distilbert_2l_dynamo20", "DistilBertModel", _encoder("distilbert"), _TOKENS, ["last_hidden_state"],
         "dynamo", 20, "dynamo exporter, opset 20, no token types, boolean mask via Where."),
    Spec("bert_2l_notypes_dynamo18", "BertModel", _encoder("bert"), _TOKENS, ["last_hidden_state"],
         "dynamo", 18, "BERT exported WITHOUT token_type_ids: the segment embedding comes from a constant."),
    Spec("bert_2l_notypes_ts17", "BertModel", _encoder("bert"), _TOKENS, ["last_hidden_state"],
         "torchscript", 17, "BERT exported WITHOUT token_type_ids (TorchScript): constant segment ids."),
    Spec("bert_2l_sdpa_dynamo18", "BertModel", _encoder("bert", attn="sdpa"), _TOKENS, ["last_hidden_state"],
         "dynamo", 18, "BERT with attn_implementation='sdpa': torch's scaled_dot_product_attention "
         "decomposed by the dynamo exporter; no token_type_ids."),
    Spec("vit_2l_dynamo18", "ViTModel", _vit, [("pixel_values", "float", ["batch", 3, 32, 32])],
         ["last_hidden_state"], "dynamo", 18, "ViT, patch 8 on 32x32 images, symbolic batch."),
    Spec("convnet_bn_relu_ts17", "CNN (Conv2d-BatchNorm2d-ReLU) x2, MaxPool, GlobalAvgPool, Linear", _convnet,
         [("image", "float", ["batch", 3, 32, 32])], ["logits"], "torchscript", 17,
         "Exported in EVAL mode with do_constant_folding=False so BatchNormalization stays in the graph.",
         {"training": torch.onnx.TrainingMode.EVAL, "do_constant_folding": False}),
]


# ---------------------------------------------------------------- inputs, export, check


def sample_inputs(spec: Spec, batch: int, seq: int, seed: int) -> dict[str, np.ndarray]:
    """Inputs for a model: token ids in range, right-padded mask on the last row, floats ~ N(0,1)."""
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for name, kind, shape in spec.inputs:
        dims = [batch if d == "batch" else seq if d == "seq" else d for d in shape]
        if kind == "ids":
            out[name] = rng.integers(0, VOCAB, size=dims, dtype=np.int64)
        elif kind == "type_ids":
            t = np.zeros(dims, dtype=np.int64)
            t[:, seq // 2 :] = 1
            out[name] = t
        elif kind == "mask":
            m = np.ones(dims, dtype=np.int64)
            if batch > 1:
                m[-1, seq - 2 :] = 0
            out[name] = m
        else:
            out[name] = rng.standard_normal(dims).astype(np.float32)
    return out


def _export(spec: Spec, model: nn.Module, path: Path) -> None:
    example = sample_inputs(spec, batch=2, seq=8, seed=SEED)
    args = tuple(torch.from_numpy(example[n]) for n, _, _ in spec.inputs)
    names = [n for n, _, _ in spec.inputs]
    if spec.exporter == "torchscript":
        axes: dict[str, dict[int, str]] = {}
        for n, _, shape in spec.inputs:
            axes[n] = {i: d for i, d in enumerate(shape) if isinstance(d, str)}
        has_seq = "seq" in spec.inputs[0][2]
        for o in spec.outputs:
            axes[o] = {0: "batch", 1: "seq"} if has_seq and o != "pooler_output" else {0: "batch"}
        kwargs = {"do_constant_folding": True, **spec.export_kwargs}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=spec.opset,
                              input_names=names, output_names=spec.outputs, dynamic_axes=axes, **kwargs)
    else:
        batch = torch.export.Dim("batch", min=1, max=64)
        seq = torch.export.Dim("seq", min=2, max=128)
        dyn = {n: {i: (batch if d == "batch" else seq) for i, d in enumerate(shape) if isinstance(d, str)}
               for n, _, shape in spec.inputs}
        prog = torch.onnx.export(model, args, dynamo=True, opset_version=spec.opset, input_names=names,
                                 output_names=spec.outputs, dynamic_shapes=dyn, **spec.export_kwargs)
        prog.save(str(path), external_data=False)


def io_rows(values) -> list[dict]:  # noqa: ANN001
    """Name, numpy dtype and shape (dim names, sizes or None) of graph inputs or outputs."""
    rows = []
    for vi in values:
        tt = vi.type.tensor_type
        dims = [
            d.dim_param if d.HasField("dim_param") else int(d.dim_value) if d.HasField("dim_value") else None
            for d in tt.shape.dim
        ]
        rows.append({"name": vi.name, "dtype": str(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)),
                     "shape": dims})
    return rows


def export_one(spec: Spec, out_dir: Path) -> dict:
    """Build, export and check one model; returns its INDEX.json entry."""
    t0 = time.perf_counter()
    model, facts = spec.build()
    final = out_dir / f"{spec.name}.onnx"
    fd, tmp = tempfile.mkstemp(suffix=".onnx.tmp", dir=out_dir)
    os.close(fd)
    try:
        _export(spec, model, Path(tmp))
        proto = onnx.load(tmp)
        onnx.checker.check_model(proto)
        # Check on a shape other than the export example, so dynamic axes are exercised too.
        feed = sample_inputs(spec, batch=3, seq=11, seed=SEED + 7)
        sess = ort.InferenceSession(tmp, providers=["CPUExecutionProvider"])
        got = sess.run(None, feed)
        with torch.no_grad():
            ref = model(*(torch.from_numpy(feed[n]) for n, _, _ in spec.inputs))
        ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
        diff = max(float(np.max(np.abs(g - r.numpy()))) for g, r in zip(got, ref, strict=True))
        if not diff <= MAX_ABS_DIFF:
            raise RuntimeError(f"{spec.name}: onnxruntime differs from torch by {diff:g}")
        os.chmod(tmp, 0o644)  # mkstemp makes it private
        os.replace(tmp, final)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    opset = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    ops = Counter(
        n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}" for n in proto.graph.node
    )
    entry = {
        "name": spec.name,
        "file": final.name,
        "architecture": spec.architecture,
        "exporter": spec.exporter,
        "opset": opset,
        **facts,
        "bytes": final.stat().st_size,
        "nodes": len(proto.graph.node),
        "functions": len(proto.functions),
        "ops": dict(sorted(ops.items())),
        "inputs": io_rows(proto.graph.input),
        "outputs": io_rows(proto.graph.output),
        "check_input": {"batch": 3, "seq": 11, "mask": "ones, last row right-padded by 2"},
        "ort_vs_torch_max_abs_diff": diff,
        "notes": spec.notes,
    }
    print(f"{spec.name}: {entry['nodes']} nodes, opset {opset}, {entry['bytes'] / 1e6:.2f} MB, "
          f"max|ort-torch| {diff:.2e}, {time.perf_counter() - t0:.1f} s")
    return entry


def parse_selection(doc: str, default_out: Path, known: set[str], argv: list[str] | None = None
                    ) -> tuple[Path, list[str] | None]:
    """--out (created) and --only NAME ...; an unknown name is listed on stderr and exits 2."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=str(default_out), help=f"output folder (default {default_out})")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="export only these models")
    args = ap.parse_args(argv)
    if args.only and (bad := sorted(set(args.only) - known)):
        print(f"unknown model(s): {', '.join(bad)}; known: {', '.join(sorted(known))}", file=sys.stderr)
        sys.exit(2)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir, args.only


def main(argv: list[str] | None = None) -> int:
    """Export the selected models and merge their entries into INDEX.json."""
    out_dir, only = parse_selection(__doc__, ROOT / "assets" / "models", {s.name for s in SPECS}, argv)
    index_path = out_dir / "INDEX.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {}
    index["_about"] = {
        "script": "scripts/export_models.py",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "onnx": onnx.__version__,
        "onnxruntime": ort.__version__,
        "seed": SEED,
        "weights": "random (seeded); norm scales/biases and BN statistics perturbed away from 1/0",
        "max_abs_diff_allowed": MAX_ABS_DIFF,
    }
    index.setdefault("models", {})
    failed = []
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        try:
            entry = export_one(spec, out_dir)
        except Exception as exc:  # noqa: BLE001 - report and go on with the others
            print(f"FAILED {spec.name}: {type(exc).__name__}: {str(exc)[:2000]}", file=sys.stderr)
            failed.append(spec.name)
            continue
        index["models"][spec.name] = entry
        index["models"] = dict(sorted(index["models"].items()))
        tmp = index_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(index, indent=1) + "\n")
        os.replace(tmp, index_path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
