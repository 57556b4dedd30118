"""Does onnxruntime make a fusion by itself? Compare each candidate with onnxruntime's optimized graph.

onnxruntime's load-time optimizer (at a chosen level) rewrites the *unfused* model; its result is saved
through ``optimized_model_filepath`` and read back. Fusions keep the name of the tensor the fused pattern
produced, so for each candidate the producer of its kept output(s) in onnxruntime's graph tells:

- ``True``: produced by an op that does the candidate's job (e.g. SkipLayerNormalization, or Attention for
  MultiHeadAttention), or turned into an initializer for a constant-folding candidate;
- ``False``: still produced by one of the candidate's original ops (onnxruntime left the pattern alone);
- ``None``: the tensor is gone (folded into a bigger onnxruntime fusion) or produced by something else,
  so the answer cannot be read off the graph.

Fused nodes onnxruntime creates whose output is no candidate's output are listed as fusions fuseview lacks.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import onnx

from fuseview.fusion.rule import Candidate
from fuseview.runtime.sessions import ModelSource, create_session

# Ops of onnxruntime's optimized graph that count as doing a candidate's fused op.
EQUIVALENT_OPS: dict[str, frozenset[str]] = {
    "MultiHeadAttention": frozenset(
        {"MultiHeadAttention", "Attention", "GroupQueryAttention", "PackedAttention"}
    ),
    "Attention": frozenset({"Attention", "MultiHeadAttention"}),
    "Gelu": frozenset({"Gelu", "BiasGelu", "FastGelu"}),
    "BiasGelu": frozenset({"BiasGelu", "FastGelu"}),
    "FastGelu": frozenset({"FastGelu"}),
    "LayerNormalization": frozenset({"LayerNormalization", "SkipLayerNormalization"}),
    "SimplifiedLayerNormalization": frozenset(
        {"SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "RMSNormalization"}
    ),
    "SkipLayerNormalization": frozenset({"SkipLayerNormalization"}),
    "SkipSimplifiedLayerNormalization": frozenset({"SkipSimplifiedLayerNormalization"}),
    "Gemm": frozenset({"Gemm", "FusedGemm"}),
    "FusedConv": frozenset({"FusedConv", "NchwcConv"}),
    "FusedMatMul": frozenset({"FusedMatMul"}),
    "QuickGelu": frozenset({"QuickGelu"}),
}
# Ops onnxruntime's optimizer creates only by fusing (a node of one of these that the original lacks).
FUSED_BY_ORT = frozenset(
    {
        "Attention",
        "MultiHeadAttention",
        "GroupQueryAttention",
        "SkipLayerNormalization",
        "SkipSimplifiedLayerNormalization",
        "LayerNormalization",
        "SimplifiedLayerNormalization",
        "EmbedLayerNormalization",
        "Gelu",
        "BiasGelu",
        "FastGelu",
        "QuickGelu",
        "FusedMatMul",
        "FusedGemm",
        "FusedConv",
        "MatMulNBits",
        "RotaryEmbedding",
        "BiasSoftmax",
        "BiasDropout",
        "DynamicQuantizeMatMul",
        "MatMulIntegerToFloat",
        "GemmFastGelu",
        "Gemm",
    }
)


@dataclass
class OrtComparison:
    """Per-candidate verdicts and the fusions onnxruntime makes that no candidate covers."""

    opt_level: str
    provider: str
    does_it: dict[str, bool | None]
    ort_only: list[dict] = field(default_factory=list)

    def to_json(self) -> dict:
        """JSON-ready summary (the per-candidate verdicts go into each candidate's entry)."""
        return {"opt_level": self.opt_level, "provider": self.provider, "ort_only": list(self.ort_only)}


def ort_optimized(
    model: ModelSource,
    opt_level: str = "all",
    provider: str = "cpu",
    base_dir: str | os.PathLike | None = None,
) -> tuple[onnx.ModelProto, str]:
    """onnxruntime's optimized graph of a model at a level (weights not loaded), and the provider used."""
    with tempfile.TemporaryDirectory(prefix="fuseview-ortcheck-") as tmp:
        out = str(Path(tmp) / "optimized.onnx")
        sess, choice = create_session(model, provider, opt_level, optimized_model_path=out, base_dir=base_dir)
        del sess
        return onnx.load(out, load_external_data=False), choice.provider


def _verdict(c: Candidate, producers: dict[str, onnx.NodeProto], inits: set[str]) -> bool | None:
    match = c.match
    outputs = list(match.outputs) if match is not None else []
    if match is None or not outputs:
        return None
    if c.fused_op == "initializer":
        if all(o in inits for o in outputs):
            return True
        return False if any(o in producers for o in outputs) else None
    if c.fused_op == "Reshape":  # shape_chain: did onnxruntime fold the computed target to a constant?
        p = producers.get(outputs[0])
        if p is None or p.op_type != "Reshape":
            return None
        return p.input[1] in inits
    want = EQUIVALENT_OPS.get(c.fused_op, frozenset({c.fused_op}))
    original_ops = {n.op_type for n in match.node_list}
    verdicts: list[bool | None] = []
    for o in outputs:
        p = producers.get(o)
        if p is None:
            verdicts.append(None)
        elif p.op_type in want:
            verdicts.append(True)
        elif p.op_type in original_ops:
            verdicts.append(False)
        else:
            verdicts.append(None)
    if any(v is True for v in verdicts):
        return True
    if all(v is False for v in verdicts):
        return False
    return None


def compare_with_ort(
    model: ModelSource,
    candidates: Iterable[Candidate],
    opt_level: str = "all",
    provider: str = "cpu",
    optimized: onnx.ModelProto | None = None,
    base_dir: str | os.PathLike | None = None,
) -> OrtComparison:
    """For each candidate, whether onnxruntime's optimizer makes the same fusion from the unfused model.

    base_dir: the folder an in-memory model's external weights are relative to (see create_session)."""
    src = (
        model if isinstance(model, onnx.ModelProto) else onnx.load(os.fspath(model), load_external_data=False)
    )
    used_provider = provider
    if optimized is None:
        optimized, used_provider = ort_optimized(model, opt_level, provider, base_dir)
    producers = {o: n for n in optimized.graph.node for o in n.output if o}
    inits = {t.name for t in optimized.graph.initializer}
    cands = list(candidates)
    does = {c.id: _verdict(c, producers, inits) for c in cands}
    covered = {o for c in cands if c.match is not None for o in c.match.outputs}
    original_names = {n.name for n in src.graph.node if n.name}
    ort_only = []
    for n in optimized.graph.node:
        if n.op_type not in FUSED_BY_ORT or (n.name and n.name in original_names):
            continue
        if any(o in covered for o in n.output):
            continue
        ort_only.append(
            {
                "op": f"{n.domain}:{n.op_type}" if n.domain else n.op_type,
                "node": n.name,
                "outputs": list(n.output),
            }
        )
    return OrtComparison(opt_level, used_provider, does, ort_only)
