"""`fuse --emit ort-config DIR`: fuseview's decisions as onnxruntime, its transformers optimizer, Optimum and
Olive read them; each file is loaded by the tool that reads it and the fusions that come out are checked."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest

from fuseview.fusion.ort_config import RULE_LAYERS, Decision, disabled_optimizers, fusion_options

from .conftest import ASSET_MODELS

BERT = ASSET_MODELS / "current" / "bert_2l_sdpa_ts17.onnx"
GELUS = ("Gelu", "BiasGelu", "FastGelu")


@pytest.fixture(scope="module")
def emitted(tmp_path_factory) -> Path:
    """The BERT export fused with the GELU rules rejected, its decisions emitted."""
    folder = tmp_path_factory.mktemp("emit")
    rejects = ["--reject", "gelu_erf", "--reject", "bias_gelu_erf"]
    r = subprocess.run([sys.executable, "-m", "fuseview", "fuse", str(BERT), "-o", str(folder / "f.onnx"),
                        *rejects, "--emit", "ort-config", str(folder)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return folder


def _ort_ops(tmp: Path, disabled: list[str]) -> Counter:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    so.optimized_model_filepath = str(tmp / "ort_optimized.onnx")
    ort.InferenceSession(str(BERT), so, providers=["CPUExecutionProvider"], disabled_optimizers=disabled)
    return Counter(n.op_type for n in onnx.load(str(tmp / "ort_optimized.onnx")).graph.node)


def test_onnxruntime_leaves_out_the_rejected_fusions(emitted: Path, tmp_path: Path) -> None:
    disabled = json.loads((emitted / "session_options.json").read_text())["disabled_optimizers"]
    assert "GeluFusionL1" in disabled and "AttentionFusion" not in disabled
    plain, told = _ort_ops(tmp_path, []), _ort_ops(tmp_path, disabled)
    assert sum(plain[o] for o in GELUS) == 2  # onnxruntime fuses the two GELUs by itself ...
    assert sum(told[o] for o in GELUS) == 0 and told["Erf"] == 2  # ... and not when told
    kept = ("LayerNormalization", "SkipLayerNormalization", "Attention")
    assert {o: told[o] for o in kept} == {o: plain[o] for o in kept} and plain["LayerNormalization"] > 0


def test_the_transformers_optimizer_reads_the_fusion_options(emitted: Path) -> None:
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    keys = json.loads((emitted / "fusion_options.json").read_text())
    assert keys["enable_gelu"] is False and keys["enable_attention"] is True

    def ops(options: FusionOptions) -> Counter:
        m = optimize_model(str(BERT), "bert", num_heads=4, hidden_size=64, optimization_options=options,
                           opt_level=0)
        return Counter(n.op_type for n in m.model.graph.node)

    options = FusionOptions("bert")
    for k, v in keys.items():
        assert hasattr(options, k), k
        setattr(options, k, v)
    plain, told = ops(FusionOptions("bert")), ops(options)
    assert sum(plain[o] for o in GELUS) == 2 and sum(told[o] for o in GELUS) == 0
    assert told["SkipLayerNormalization"] > 0 and told["Attention"] == plain["Attention"]


def test_olive_and_optimum_files_name_their_tools_keys(emitted: Path) -> None:
    from onnxruntime.transformers.fusion_options import FusionOptions

    olive = json.loads((emitted / "olive_pass.json").read_text())
    assert olive["type"] == "OrtTransformersOptimization"
    assert all(hasattr(FusionOptions("bert"), k) for k in olive["optimization_options"])
    section = json.loads((emitted / "ort_config.json").read_text())["optimization"]
    assert section["disable_gelu_fusion"] is True and section["disable_attention_fusion"] is False
    rows = json.loads((emitted / "decisions.json").read_text())["decisions"]
    gelu = next(r for r in rows if r["rule"] == "gelu_erf")
    assert gelu["decision"] == "rejected" and gelu["onnxruntime"] == ["GeluFusionL1", "GeluFusionL2"]


def test_a_transformer_another_wanted_rule_needs_stays_on() -> None:
    ds = [Decision("skip_layer_norm", 0, 3), Decision("skip_rms_norm", 2, 0)]
    assert "SkipLayerNormFusion" not in disabled_optimizers(ds)
    assert fusion_options(ds) == {"enable_skip_layer_norm": True}
    assert set(RULE_LAYERS) <= {r.name for r in __import__("fuseview.fusion.rules", fromlist=["catalogue"])
                                .catalogue()}


def test_emit_needs_ort_config_and_a_folder(tmp_path: Path) -> None:
    def fuse(*emit: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fuseview", "fuse", str(BERT), "-o",
                               str(tmp_path / "f.onnx"), "--emit", *emit], capture_output=True, text=True)

    r = fuse("ort-config", str(tmp_path / "missing"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and r.stderr.startswith("fuseview: error: --emit")
    (tmp_path / "decisions.json").symlink_to(BERT)  # never written through, and refused before the model
    r = fuse("ort-config", str(tmp_path))
    assert r.returncode == 2 and "symbolic link" in r.stderr and not (tmp_path / "f.onnx").exists()
