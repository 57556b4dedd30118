"""onnxruntime-genai's builder models run where fuseview measures: their head size and cache length.

The builder names its past inputs' head size `kv_cache_dim` (a word the dims policy reads as a cache) and
reads its cos/sin caches in GroupQueryAttention (no Gather a position table is found by). Both decide
whether `profile BUILDER --against FUSED`, the comparison users make, runs at all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

from fuseview.dims import cache_dims, head_size_dims, position_table, run_dims

ROOT = Path(__file__).resolve().parent.parent
BUILDER = ROOT / "assets" / "models" / "genai" / "llama_2l_builder_fp32.onnx"
EXPORT = ROOT / "assets" / "models" / "current" / "llama_2l_sdpa_past_ts17.onnx"  # the same seeded weights


def test_the_head_size_comes_from_the_attention_ops_projection() -> None:
    model = onnx.load(str(BUILDER))
    assert head_size_dims(model) == {"kv_cache_dim": 16}  # 4:2 heads of 16 over a packed [64, 128] weight
    cache = cache_dims(model)
    assert cache is not None and cache.past == ("past_sequence_length",)


def test_the_decode_step_stays_inside_the_rotary_cache() -> None:
    model = onnx.load(str(BUILDER))
    assert position_table(model) == 256  # max_position_embeddings of the narrow config
    dims = run_dims(model, None).values
    assert dims == {"batch_size": 1, "sequence_length": 1, "total_sequence_length": 256,
                    "past_sequence_length": 255, "kv_cache_dim": 16}


@pytest.mark.slow  # a profile of two models in a child process: about 4 s
def test_profile_the_builders_model_against_an_export_of_the_same_weights(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "fuseview", "profile", str(BUILDER), "--against", str(EXPORT),
                        "--runs", "4", "--sessions", "2", "--quiet", "--json", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    report = json.loads(out.read_text())
    assert report["comparison"]["passed"] is True  # the same weights: the same logits and cache


@pytest.mark.parametrize("heads", [(0, 2), (2, -1), (-3, 1), (5, 2)])
def test_head_counts_that_say_nothing_leave_the_dim_at_its_default(heads: tuple[int, int]) -> None:
    """No head count, a negative one, or one that does not divide the projection: no head size is read."""
    model = onnx.load(str(BUILDER))
    for n in model.graph.node:
        for a in n.attribute:
            if n.op_type == "GroupQueryAttention" and a.name in ("num_heads", "kv_num_heads"):
                a.i = heads[a.name == "kv_num_heads"]
    assert head_size_dims(model) == {}
    assert run_dims(model, None).values["kv_cache_dim"] == 1
