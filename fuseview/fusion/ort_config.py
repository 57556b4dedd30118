"""fuseview's fusion decisions as onnxruntime, Optimum and Olive read them (`fuse --emit ort-config DIR`).

Each fuseview rule is made, outside fuseview, by some layer of the onnxruntime stack:

- the transformers optimizer (``onnxruntime.transformers.optimizer.optimize_model``) through a
  ``FusionOptions`` attribute (``enable_attention``, ``enable_skip_layer_norm``, ...); Olive's
  ``OrtTransformersOptimization`` pass takes the same keys as ``optimization_options``;
- Optimum's ``ORTOptimizer``, whose ``ort_config.json`` ``optimization`` section turns those off with
  ``disable_*_fusion`` flags;
- onnxruntime's own load-time graph transformers (``AttentionFusion``, ``SkipLayerNormFusion``,
  ``GeluFusionL1``, ...), which ``InferenceSession(..., disabled_optimizers=[...])`` leaves out.

A rule with an accepted candidate is wanted: its keys are on. A rule whose every candidate was rejected is
unwanted: its keys are off, and its onnxruntime transformers are disabled unless another wanted rule needs
the same transformer. A rule the model has no candidate of is not mentioned (each tool keeps its default).
Plain Python: no onnxruntime import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fuseview.atomic import write_text_atomic


@dataclass(frozen=True)
class Layers:
    """Where a fuseview rule's fusion is made outside fuseview."""

    fusion_options: tuple[str, ...] = ()  # transformers optimizer FusionOptions / Olive optimization_options
    optimum: tuple[str, ...] = ()  # Optimum OptimizationConfig disable_* flags
    onnxruntime: tuple[str, ...] = ()  # onnxruntime graph transformers (names for disabled_optimizers)


_ATTENTION = Layers(("enable_attention",), ("disable_attention_fusion",), ("AttentionFusion",))
_SKIP_LN = Layers(("enable_skip_layer_norm",), ("disable_skip_layer_norm_fusion",), ("SkipLayerNormFusion",))
_GELU = Layers(("enable_gelu",), ("disable_gelu_fusion",), ("GeluFusionL1", "GeluFusionL2"))
_BIAS_GELU = Layers(("enable_bias_gelu",), ("disable_bias_gelu_fusion",), ("BiasGeluFusion",))

# fuseview rule -> the layers that make the same fusion (a rule no layer makes maps to nothing)
RULE_LAYERS: dict[str, Layers] = {
    "attention_mha": _ATTENTION,
    "attention_packed": _ATTENTION,
    "attention_gqa": Layers(("enable_attention",), ("disable_attention_fusion",),
                            ("GroupQueryAttentionFusion",)),
    "attention_gqa_rotary": Layers(("enable_attention", "enable_rotary_embeddings"),
                                   ("disable_attention_fusion",), ("GroupQueryAttentionFusion",)),
    "attention_gqa_rotary_qkv": Layers(("enable_attention", "enable_rotary_embeddings"),
                                       ("disable_attention_fusion",), ("GroupQueryAttentionFusion",)),
    "attention_gqa_qkv": Layers(("enable_attention",), ("disable_attention_fusion",),
                                ("GroupQueryAttentionFusion",)),
    "embed_layer_norm": Layers(("enable_embed_layer_norm",), ("disable_embed_layer_norm_fusion",),
                               ("EmbedLayerNormFusion",)),
    "skip_layer_norm": _SKIP_LN,
    "skip_layer_norm_bias": Layers(("enable_bias_skip_layer_norm",), ("disable_bias_skip_layer_norm_fusion",),
                                   ("BiasSkipLayerNormFusion", "SkipLayerNormFusion")),
    "skip_rms_norm": _SKIP_LN,
    "layer_norm": Layers(("enable_layer_norm",), ("disable_layer_norm_fusion",),
                         ("LayerNormFusionL1", "LayerNormFusionL2")),
    "rms_norm": Layers(("enable_layer_norm",), ("disable_layer_norm_fusion",),
                       ("SimplifiedLayerNormFusion",)),
    "gelu_erf": _GELU,
    "bias_gelu_erf": _BIAS_GELU,
    "fast_gelu": Layers(("enable_gelu",), ("disable_gelu_fusion",), ("FastGeluFusion",)),
    "bias_fast_gelu": Layers(("enable_bias_gelu",), ("disable_bias_gelu_fusion",), ("FastGeluFusion",)),
    "quick_gelu": Layers(onnxruntime=("QuickGeluFusion",)),
    "matmul_add_gemm": Layers(onnxruntime=("MatMulAddFusion",)),
    "fused_matmul": Layers(onnxruntime=("MatMulScaleFusion", "MatmulTransposeFusion")),
    "conv_activation": Layers(onnxruntime=("ConvActivationFusion",)),
    "conv_bn": Layers(onnxruntime=("ConvBNFusion",)),
    "conv_bias_add": Layers(onnxruntime=("ConvAddFusion",)),
    "dynamic_quantize_matmul": Layers(onnxruntime=("DynamicQuantizeMatMulFusion",)),
    "matmul_integer_to_float": Layers(onnxruntime=("MatMulIntegerToFloatFusion",)),
    "shape_chain": Layers(onnxruntime=("ReshapeFusion",)),
}


@dataclass(frozen=True)
class Decision:
    """One rule's decision over a model's candidates and the layers it maps to."""

    rule: str
    accepted: int
    rejected: int

    @property
    def wanted(self) -> bool:
        """True when some candidate of the rule was accepted."""
        return self.accepted > 0


def decisions(candidates: list, accepted_ids: set[str], rejected: set[str] | frozenset = frozenset()
              ) -> list[Decision]:
    """Per rule (in the order the candidates name them): how many candidates were accepted and rejected.

    `rejected` holds the ids and rule names the user rejected. Any other candidate left out because an
    accepted one overlaps it (skip_layer_norm under skip_layer_norm_bias, attention_mha under attention_gqa)
    is neither: its nodes were fused by the other rule."""
    counts: dict[str, list[int]] = {}
    for c in candidates:
        k = counts.setdefault(c.rule, [0, 0])
        if c.id in accepted_ids:
            k[0] += 1
        elif c.id in rejected or c.rule in rejected or not any(x in accepted_ids for x in c.conflicts):
            k[1] += 1
    return [Decision(rule, a, r) for rule, (a, r) in counts.items() if a or r]


def fusion_options(ds: list[Decision]) -> dict[str, bool]:
    """FusionOptions attributes (transformers optimizer, Olive optimization_options): on where wanted, off
    where every rule that maps to the key was rejected."""
    out: dict[str, bool] = {}
    for d in ds:
        for key in RULE_LAYERS.get(d.rule, Layers()).fusion_options:
            out[key] = out.get(key, False) or d.wanted
    if any(d.wanted and d.rule == "attention_mha" for d in ds):
        out["use_multi_head_attention"] = True  # fuseview wrote MultiHeadAttention, not packed Attention
    return out


def optimum_optimization(ds: list[Decision]) -> dict:
    """The ``optimization`` section of Optimum's ort_config.json (OptimizationConfig's fields)."""
    section: dict = {"optimization_level": 1, "optimize_for_gpu": False, "fp16": False,
                     "enable_transformers_specific_optimizations": True}
    for d in ds:
        for key in RULE_LAYERS.get(d.rule, Layers()).optimum:
            section[key] = section.get(key, True) and not d.wanted
    if any(d.wanted and d.rule == "attention_mha" for d in ds):
        section["use_multi_head_attention"] = True
    return section


def disabled_optimizers(ds: list[Decision]) -> list[str]:
    """onnxruntime graph transformers to leave out: those of rejected rules that no wanted rule needs."""
    needed = {t for d in ds if d.wanted for t in RULE_LAYERS.get(d.rule, Layers()).onnxruntime}
    off = [t for d in ds if not d.wanted for t in RULE_LAYERS.get(d.rule, Layers()).onnxruntime]
    return sorted(set(off) - needed)


def mapping(ds: list[Decision]) -> list[dict]:
    """Each decision with the layer keys it sets (what decisions.json lists)."""
    rows = []
    for d in ds:
        lay = RULE_LAYERS.get(d.rule, Layers())
        rows.append({"rule": d.rule, "decision": "accepted" if d.wanted else "rejected",
                     "accepted": d.accepted, "rejected": d.rejected,
                     "transformers_optimizer": list(lay.fusion_options), "optimum": list(lay.optimum),
                     "onnxruntime": list(lay.onnxruntime),
                     "made_by_no_other_layer": not (lay.fusion_options or lay.onnxruntime)})
    return rows


FILES = ("fusion_options.json", "ort_config.json", "session_options.json", "olive_pass.json",
         "decisions.json")


def write_ort_config(folder: str | Path, ds: list[Decision], source: str) -> list[Path]:
    """Write the five files into an existing folder (each atomically); their paths."""
    folder = Path(folder)
    opts = fusion_options(ds)
    docs = {
        "fusion_options.json": opts,
        "ort_config.json": {"optimization": optimum_optimization(ds), "quantization": {},
                            "use_external_data_format": False, "one_external_file": True},
        "session_options.json": {"disabled_optimizers": disabled_optimizers(ds)},
        "olive_pass.json": {"type": "OrtTransformersOptimization", "optimization_options": opts},
        "decisions.json": {"model": source, "decisions": mapping(ds)},
    }
    paths = []
    for name in FILES:
        path = folder / name
        write_text_atomic(path, json.dumps(docs[name], indent=1) + "\n")
        paths.append(path)
    return paths
