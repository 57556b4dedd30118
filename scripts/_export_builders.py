"""Build transformers 5.x models from configs (random weights) and export them as users do today.

Shared by make_current_exports.py (narrow widths, committed) and make_realsize_models.py (real widths, for
benches). Attention is whatever the config defaults to (``sdpa`` in transformers 5.x). Decoders are also
exported with a KV cache: ``past_key_values.N.key/value`` in, ``present.N.key/value`` out, as optimum's
``decoder_with_past``. Batch is 1; sequence and past length are dynamic. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
import transformers
from export_models import LogitsOnly, io_rows, parse_selection, perturb_norms
from torch import nn
from torch.export import Dim

SEED = 0
# onnxruntime must reproduce torch within this bound on every checked shape, or the export is rejected.
MAX_ABS_DIFF = {"narrow": 1e-4, "real": 2e-3}
PAST_LENGTHS = (0, 1, 16)
NEW_TOKENS = (1, 4)
PLAIN_SEQUENCES = (1, 4, 16)
# The example the exporters trace with: a past length and a sequence unlike the checked ones.
EXAMPLE_PAST, EXAMPLE_SEQ = 3, 5


# ------------------------------------------------------------------------------------ configs per width


def gpt2_config(width: str) -> transformers.PretrainedConfig:
    """GPT-2: 2 layers x 64 (4 heads) narrow, GPT2Config() (GPT-2 small, 12 x 768) real."""
    if width == "real":
        return transformers.GPT2Config()
    return transformers.GPT2Config(vocab_size=1000, n_positions=256, n_embd=64, n_layer=2, n_head=4,
                                   bos_token_id=999, eos_token_id=999)


def bert_config(width: str) -> transformers.PretrainedConfig:
    """BERT: 2 layers x 64 (4 heads) narrow, BertConfig() (BERT-base, 12 x 768) real."""
    if width == "real":
        return transformers.BertConfig()
    return transformers.BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=128, max_position_embeddings=256)


def llama_config(width: str) -> transformers.PretrainedConfig:
    """Llama with grouped-query attention (3 query heads per kv head) and rotary embedding."""
    if width == "real":
        return transformers.LlamaConfig(hidden_size=768, num_hidden_layers=8, num_attention_heads=12,
                                        num_key_value_heads=4, intermediate_size=2048,
                                        max_position_embeddings=2048, tie_word_embeddings=False)
    return transformers.LlamaConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
                                    max_position_embeddings=256, tie_word_embeddings=False, bos_token_id=1,
                                    eos_token_id=2)


def t5_config(width: str) -> transformers.PretrainedConfig:
    """T5 encoder (relative position bias, unscaled attention): 2 layers x 64 narrow, T5Config() real."""
    if width == "real":
        return transformers.T5Config()
    return transformers.T5Config(vocab_size=1000, d_model=64, d_kv=16, num_heads=4, d_ff=128, num_layers=2,
                                 num_decoder_layers=2, relative_attention_num_buckets=32)


def _narrow_only(width: str, name: str) -> None:
    if width != "narrow":
        raise ValueError(f"{name}: only a narrow export is made (tests of rules on architectures beyond the "
                         "real-width three)")


# Decoders the rules were not written against (fused QKV projections, partial rotary, learned positions,
# q/k/v biases): narrow, for tests. 2 layers x 32, 4 heads of 8 (2 kv heads where the family has grouped
# KV), a vocabulary of 256: each file is about 0.2 MB.
_NARROW = {"vocab_size": 256, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 64, "max_position_embeddings": 256}


def qwen2_config(width: str) -> transformers.PretrainedConfig:
    """Qwen2: grouped-query attention with biases on Q, K and V."""
    _narrow_only(width, "qwen2")
    return transformers.Qwen2Config(**_NARROW, num_key_value_heads=2, tie_word_embeddings=False)


def mistral_config(width: str) -> transformers.PretrainedConfig:
    """Mistral: Llama-like grouped-query attention (no sliding window at these lengths)."""
    _narrow_only(width, "mistral")
    return transformers.MistralConfig(**_NARROW, num_key_value_heads=2, tie_word_embeddings=False,
                                      sliding_window=None)


def phi3_config(width: str) -> transformers.PretrainedConfig:
    """Phi-3: one packed qkv_proj sliced into Q, K and V, then rotary; grouped KV."""
    _narrow_only(width, "phi3")
    return transformers.Phi3Config(**_NARROW, num_key_value_heads=2, tie_word_embeddings=False,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)


def gpt_neox_config(width: str) -> transformers.PretrainedConfig:
    """GPT-NeoX (Pythia): packed query_key_value viewed per head and split; rotary on a quarter of a head."""
    _narrow_only(width, "gpt_neox")
    return transformers.GPTNeoXConfig(**_NARROW, rotary_pct=0.25, bos_token_id=1, eos_token_id=2)


def opt_config(width: str) -> transformers.PretrainedConfig:
    """OPT: learned positions, Q scaled after its projection, ReLU MLP."""
    _narrow_only(width, "opt")
    cfg = dict(_NARROW, ffn_dim=_NARROW["intermediate_size"])
    del cfg["intermediate_size"]
    return transformers.OPTConfig(**cfg, word_embed_proj_dim=32, bos_token_id=1, eos_token_id=2,
                                  pad_token_id=0)


def gemma_config(width: str) -> transformers.PretrainedConfig:
    """Gemma: scaled embeddings, RMSNorm with (1 + w), GeGLU MLP, grouped KV."""
    _narrow_only(width, "gemma")
    return transformers.GemmaConfig(**_NARROW, num_key_value_heads=2, head_dim=8)


# ------------------------------------------------------------------------------------ wrappers


class DecoderWithPast(nn.Module):
    """A causal LM with flat past tensors: (ids, mask on past+new, k/v per layer) -> logits, presents."""

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm
        self.layers = lm.config.num_hidden_layers

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                past: tuple[torch.Tensor, ...]) -> tuple[torch.Tensor, ...]:
        """Logits for the new tokens, then present key/value of every layer (past + new along axis 2)."""
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(self.layers)]
        cache = transformers.DynamicCache(ddp_cache_data=pairs, config=self.lm.config)
        out = self.lm(input_ids=input_ids, attention_mask=attention_mask, cache=cache, use_cache=True)
        presents: list[torch.Tensor] = []
        for layer in out.cache.layers:
            presents += [layer.keys, layer.values]
        return (out.logits, *presents)


class EncoderOutputs(nn.Module):
    """An encoder called with keywords, returning its hidden states (and BERT's pooler output)."""

    def __init__(self, enc: nn.Module, pooled: bool) -> None:
        super().__init__()
        self.enc = enc
        self.pooled = pooled

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """last_hidden_state (and pooler_output when pooled)."""
        kw = {"token_type_ids": token_type_ids} if token_type_ids is not None else {}
        out = self.enc(input_ids=input_ids, attention_mask=attention_mask, **kw)
        return (out.last_hidden_state, out.pooler_output) if self.pooled else (out.last_hidden_state,)


# ------------------------------------------------------------------------------------ specs


@dataclass(frozen=True)
class Spec:
    """One export: which model, which exporter, with or without a KV cache."""

    name: str
    family: str  # gpt2, bert, llama, t5
    exporter: str  # torchscript or dynamo
    opset: int | None  # None: the dynamo exporter's default
    kv_cache: bool = False
    # TorchScript's names for the new tokens, the mask's past + new and the past length (dynamo names its own)
    dim_names: tuple[str, str, str] = ("sequence", "total_sequence", "past_sequence")
    # traced at this many new tokens; 1 as a decode-step export (transformers then packs the grouped query per
    # key/value head, and TorchScript bakes that in: such an export runs on one new token only)
    traced_new: int = EXAMPLE_SEQ


_FAMILIES: dict[str, tuple[Callable[[str], transformers.PretrainedConfig], type, bool]] = {
    # family -> (config for a width, model class, is a decoder)
    "gpt2": (gpt2_config, transformers.GPT2LMHeadModel, True),
    "bert": (bert_config, transformers.BertModel, False),
    "llama": (llama_config, transformers.LlamaForCausalLM, True),
    "t5": (t5_config, transformers.T5EncoderModel, False),
}


DECODER_FAMILIES: dict[str, tuple[Callable[[str], transformers.PretrainedConfig], type, bool]] = {
    "qwen2": (qwen2_config, transformers.Qwen2ForCausalLM, True),
    "mistral": (mistral_config, transformers.MistralForCausalLM, True),
    "phi3": (phi3_config, transformers.Phi3ForCausalLM, True),
    "gpt_neox": (gpt_neox_config, transformers.GPTNeoXForCausalLM, True),
    "opt": (opt_config, transformers.OPTForCausalLM, True),
    "gemma": (gemma_config, transformers.GemmaForCausalLM, True),
}
_ALL_FAMILIES = {**_FAMILIES, **DECODER_FAMILIES}


# torch 2.13's dynamo exporter fails on T5's attention ("Cannot view a tensor with shape [1, s53, 4, 16] and
# strides (64*s53, 16, 16*s53, 1) as (1, s53, 64)", in the decomposition step).
_NOT_EXPORTABLE = {("t5", "dynamo")}


def all_specs(width: str, families: dict | None = None) -> list[Spec]:
    """Every export for a width: each family by both exporters, decoders also with a KV cache."""
    specs = []
    for family, (make_config, _, decoder) in (_FAMILIES if families is None else families).items():
        layers = make_config(width).num_hidden_layers
        for exporter, opset, tag in (("torchscript", 17, "ts17"), ("dynamo", None, "dynamo")):
            if (family, exporter) in _NOT_EXPORTABLE:
                continue
            for kv in (False, True) if decoder else (False,):
                past = "_past" if kv else ""
                specs.append(Spec(f"{family}_{layers}l_sdpa{past}_{tag}", family, exporter, opset, kv))
    return specs


def build(spec: Spec, width: str) -> tuple[nn.Module, transformers.PretrainedConfig]:
    """The seeded model in eval mode, wrapped for export, and its config."""
    make_config, cls, decoder = _ALL_FAMILIES[spec.family]
    cfg = make_config(width)
    torch.manual_seed(SEED)
    model = cls(cfg).eval()
    perturb_norms(model)
    if decoder:
        wrapped: nn.Module = DecoderWithPast(model) if spec.kv_cache else LogitsOnly(model)
    else:
        wrapped = EncoderOutputs(model, pooled=spec.family == "bert")
    return wrapped.eval(), model.config


def _kv_shape(cfg: transformers.PretrainedConfig) -> tuple[int, int]:
    heads = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or heads
    return kv_heads, getattr(cfg, "head_dim", None) or cfg.hidden_size // heads


def io_names(spec: Spec, cfg: transformers.PretrainedConfig) -> tuple[list[str], list[str]]:
    """Graph input and output names, optimum style."""
    ins = ["input_ids", "attention_mask"] + (["token_type_ids"] if spec.family == "bert" else [])
    if spec.family in ("bert", "t5"):
        outs = ["last_hidden_state"] + (["pooler_output"] if spec.family == "bert" else [])
        return ins, outs
    if not spec.kv_cache:
        return ins, ["logits"]
    layers = range(cfg.num_hidden_layers)
    ins += [f"past_key_values.{i}.{kv}" for i in layers for kv in ("key", "value")]
    return ins, ["logits"] + [f"present.{i}.{kv}" for i in layers for kv in ("key", "value")]


def sample_feed(spec: Spec, cfg: transformers.PretrainedConfig, seq: int, past: int, seed: int
                ) -> dict[str, np.ndarray]:
    """Batch-1 inputs: ids in the vocabulary, a mask of ones over past+new, past k/v ~ N(0, 1)."""
    rng = np.random.default_rng(seed)
    ins, _ = io_names(spec, cfg)
    feed = {"input_ids": rng.integers(0, cfg.vocab_size, size=(1, seq), dtype=np.int64),
            "attention_mask": np.ones((1, past + seq), dtype=np.int64)}
    if spec.family == "bert":
        feed["token_type_ids"] = (np.arange(seq) >= seq // 2).astype(np.int64)[None, :]
    kv_heads, head_dim = _kv_shape(cfg)
    for name in ins[len(feed):]:
        feed[name] = rng.standard_normal((1, kv_heads, past, head_dim)).astype(np.float32)
    return feed


def _torch_args(spec: Spec, feed: dict[str, np.ndarray], ins: list[str]) -> tuple:
    tensors = [torch.from_numpy(feed[n]) for n in ins]
    if spec.kv_cache:
        return (tensors[0], tensors[1], tuple(tensors[2:]))
    return tuple(tensors)


def export(spec: Spec, model: nn.Module, cfg: transformers.PretrainedConfig, path: Path) -> None:
    """Export with torch.onnx.export (the spec's exporter), weights inside the one file."""
    ins, outs = io_names(spec, cfg)
    past = EXAMPLE_PAST if spec.kv_cache else 0
    args = _torch_args(spec, sample_feed(spec, cfg, spec.traced_new, past, SEED), ins)
    if spec.exporter == "torchscript":
        new, total, past_name = spec.dim_names
        total = total if spec.kv_cache else new
        axes = {n: {1: total if n == "attention_mask" else new} for n in ins
                if not n.startswith("past_key_values.")}
        axes.update({n: {2: past_name} for n in ins if n.startswith("past_key_values.")})
        axes.update({n: {2: total} if n.startswith("present.") else {1: new}
                     for n in outs if n != "pooler_output"})
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=spec.opset, input_names=ins,
                              output_names=outs, dynamic_axes=axes, do_constant_folding=True)
        return
    seq = Dim("sequence", min=1, max=1024)
    if spec.kv_cache:
        # The mask spans past + new, a sum torch.export cannot name: let it find the relation (AUTO).
        past_dim = Dim("past_sequence", min=0, max=1024)
        dyn = {"input_ids": {1: seq}, "attention_mask": {1: Dim.AUTO},
               "past": tuple({2: past_dim} for _ in ins[2:])}
    else:
        dyn = {n: {1: seq} for n in ins}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = torch.onnx.export(model, args, dynamo=True, opset_version=spec.opset, input_names=ins,
                                 output_names=outs, dynamic_shapes=dyn)
    # Each node's Python stack trace names this checkout's paths and line numbers: dropped, so a rerun from
    # any checkout writes the same bytes. The name scopes and class hierarchy stay.
    for node in prog.model.graph.all_nodes():
        node.metadata_props.pop("pkg.torch.onnx.stack_trace", None)
    prog.save(str(path), external_data=False)


def _max_diff(got: list[np.ndarray], ref: list[torch.Tensor], outs: list[str], skip_rows: int) -> float:
    # Rows whose every key is masked out (left padding without a past) are undefined: torch and onnxruntime
    # each give their own values there, so those query rows are left out of the comparison.
    diffs = []
    for name, g, r in zip(outs, got, ref, strict=True):
        if skip_rows and name == "pooler_output":
            continue
        cut = (slice(None), slice(skip_rows, None)) if skip_rows else (slice(None),)
        diffs.append(float(np.max(np.abs(g[cut] - r.numpy()[cut]))))
    return max(diffs)


def check(spec: Spec, model: nn.Module, cfg: transformers.PretrainedConfig, path: Path, width: str
          ) -> list[dict]:
    """onnx.checker, then onnxruntime (CPU) against torch on every checked shape; raises on a mismatch.

    The last shape is left-padded by 2 (the mask's first two positions 0), so a mask the export ignored fails.
    """
    onnx.checker.check_model(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ins, outs = io_names(spec, cfg)
    if spec.kv_cache:
        news = (1,) if spec.traced_new == 1 else NEW_TOKENS
        shapes = [(p, n, 0) for p in PAST_LENGTHS for n in news]
        shapes.append((PAST_LENGTHS[-1], news[-1], 2))
    else:
        shapes = [(0, n, 0) for n in PLAIN_SEQUENCES] + [(0, PLAIN_SEQUENCES[-1], 2)]
    rows = []
    for k, (past, new, pad) in enumerate(shapes):
        feed = sample_feed(spec, cfg, new, past, SEED + 7 + k)
        feed["attention_mask"][0, :pad] = 0
        got = sess.run(outs, feed)
        with torch.no_grad():
            ref = model(*_torch_args(spec, feed, ins))
        ref = [ref] if isinstance(ref, torch.Tensor) else list(ref)
        diff = _max_diff(got, ref, outs, skip_rows=max(pad - past, 0))
        present_ok = all(g.shape[2] == past + new for n, g in zip(outs, got, strict=True)
                         if n.startswith("present."))
        rows.append({"past": past, "new": new, "left_padding": pad, "max_abs_diff_vs_torch": diff,
                     "present_length_ok": present_ok})
        if not (diff <= MAX_ABS_DIFF[width] and present_ok):
            raise RuntimeError(f"{spec.name}: past {past} new {new} padding {pad}: |ort-torch| {diff:g}, "
                               f"present lengths ok: {present_ok}")
    return rows


def export_one(spec: Spec, width: str, out_dir: Path) -> dict:
    """Build, export, check one model (written atomically); returns its INDEX.json entry."""
    t0 = time.perf_counter()
    model, cfg = build(spec, width)
    final = out_dir / f"{spec.name}.onnx"
    tmp = out_dir / f".{spec.name}.onnx.tmp"
    try:
        export(spec, model, cfg, tmp)
        export_s = time.perf_counter() - t0
        rows = check(spec, model, cfg, tmp, width)
        os.replace(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)
    proto = onnx.load(str(final), load_external_data=False)
    opset = next(o.version for o in proto.opset_import if o.domain in ("", "ai.onnx"))
    ops = Counter(n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op_type}"
                  for n in proto.graph.node)
    kv_heads, head_dim = _kv_shape(cfg)
    entry = {
        "file": final.name, "architecture": type(model.lm if hasattr(model, "lm") else model.enc).__name__,
        "exporter": spec.exporter, "opset": opset, "has_kv_cache": spec.kv_cache,
        "attn_implementation": cfg._attn_implementation, "layers": cfg.num_hidden_layers,
        "hidden_size": cfg.hidden_size, "heads": cfg.num_attention_heads, "kv_heads": kv_heads,
        "head_dim": head_dim, "vocab_size": cfg.vocab_size, "bytes": final.stat().st_size,
        "nodes": len(proto.graph.node), "functions": len(proto.functions), "ops": dict(sorted(ops.items())),
        "inputs": io_rows(proto.graph.input), "outputs": io_rows(proto.graph.output),
        "ort_checks": rows,
    }
    worst = max(r["max_abs_diff_vs_torch"] for r in rows)
    shapes = " ".join(f"{r['past']}+{r['new']}" + (f"(pad {r['left_padding']})" if r["left_padding"] else "")
                      for r in rows)
    print(f"{final.name}: {entry['bytes'] / 1e6:.2f} MB, {entry['nodes']} nodes, opset {opset}, "
          f"export {export_s:.1f} s, ort ok on past+new {shapes}, max|ort-torch| {worst:.1e}", flush=True)
    return entry


def write_index(out_dir: Path, entries: dict[str, dict], script: str, width: str) -> None:
    """Merge entries into out_dir/INDEX.json (written atomically)."""
    path = out_dir / "INDEX.json"
    index = json.loads(path.read_text()) if path.exists() else {}
    index["_about"] = {
        "script": script, "torch": torch.__version__, "transformers": transformers.__version__,
        "onnx": onnx.__version__, "onnxruntime": ort.__version__, "seed": SEED, "batch": 1,
        "weights": "random (seeded); norm scales/biases perturbed away from 1/0",
        "max_abs_diff_allowed": MAX_ABS_DIFF[width],
        "checks": "onnx.checker; onnxruntime CPU vs torch at past+new in "
                  f"{[f'{p}+{n}' for p in PAST_LENGTHS for n in NEW_TOKENS]} (KV cache) or "
                  f"sequence {list(PLAIN_SEQUENCES)}, attention_mask all ones; then the longest shape "
                  "with the mask's first 2 positions 0 (rows with every key masked are not compared)",
    }
    index["models"] = dict(sorted({**index.get("models", {}), **entries}.items()))
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(index, indent=1) + "\n")
    os.replace(tmp, path)


def run_cli(doc: str, width: str, default_out: Path, script: str, limit_bytes: int | None,
            families: dict | None = None) -> int:
    """The front scripts' command line: export the selected specs one at a time, merge INDEX.json."""
    specs = all_specs(width, families)
    out_dir, only = parse_selection(doc, default_out, {s.name for s in specs})
    failed = []
    for spec in specs:
        if only and spec.name not in only:
            continue
        try:
            entry = export_one(spec, width, out_dir)
            if limit_bytes is not None and entry["bytes"] > limit_bytes:
                raise RuntimeError(f"{entry['file']} is {entry['bytes']} bytes, over {limit_bytes}")
        except Exception as exc:  # noqa: BLE001 - report it and go on with the others
            print(f"FAILED {spec.name}: {type(exc).__name__}: {str(exc)[:2000]}", file=sys.stderr, flush=True)
            failed.append(spec.name)
            continue
        write_index(out_dir, {spec.name: entry}, script, width)
    return 1 if failed else 0
