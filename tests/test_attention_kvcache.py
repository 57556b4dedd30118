"""KV-cache decoders as exported in the wild (assets/models/kvcache, scripts/make_kvcache_exports.py): dims
named `seq`/`total_seq`/`past_seq` or `x`/`y`/`z`, and exports traced at one new token (transformers' packed
grouped query, which TorchScript bakes in). The dims relations come from the graph, not the names; every
attention layer fuses and validates at past 0/1/64 x new 1/16 (new 1 only where the original runs only
there); `fuse` with no --dim validates."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import onnx
import pytest

from fuseview.dims import DECODE_PAST_DEFAULT, cache_dims, decode_step, resolve_dims
from fuseview.fusion.pipeline import FuseOptions, build_fused, load_for_fusion, scan_for_fusion
from fuseview.fusion.plan import Plan
from fuseview.fusion.validate import validate
from fuseview.fusion.validate_cache import validate_cache_lengths

from .conftest import ASSET_MODELS

KVCACHE = ASSET_MODELS / "kvcache"
INDEX = json.loads((KVCACHE / "INDEX.json").read_text())["models"]
ATTENTION_OPS = ("MultiHeadAttention", "Attention", "GroupQueryAttention")
MAX_ABS = 1e-4


def _decode_only(name: str) -> bool:
    return name.endswith("_decode")


def _fuse(name: str, dims: dict[str, int] | None = None) -> tuple[onnx.ModelProto, onnx.ModelProto, object]:
    model = load_for_fusion(KVCACHE / f"{name}.onnx")
    scan = scan_for_fusion(model, dims)
    plan = Plan(scan.candidates)
    plan.accept_all()
    return model, build_fused(model, scan, plan.accepted(), FuseOptions(validate=False)).model, scan


@pytest.mark.parametrize("name", sorted(INDEX))
def test_every_attention_layer_fuses_and_validates_at_every_cache_length(name: str) -> None:
    model, fused, _scan = _fuse(name)
    kinds = Counter(n.op_type for n in fused.graph.node if n.op_type in ATTENTION_OPS + ("Softmax",))
    grouped = INDEX[name]["kv_heads"] < INDEX[name]["heads"]
    assert kinds == {"GroupQueryAttention" if grouped else "MultiHeadAttention": INDEX[name]["layers"]}
    runs = validate_cache_lengths(model, fused, news=(1,) if _decode_only(name) else (1, 16))
    assert [(p, n) for p, n, _v in runs] == [(p, n) for p in (0, 1, 64)
                                             for n in ((1,) if _decode_only(name) else (1, 16))]
    for past, new, v in runs:
        assert v.ok and v.max_abs <= MAX_ABS, (past, new, v.figures())


def test_dims_relations_come_from_the_graph_not_the_names() -> None:
    """x, y, z say nothing: the Concat of past and new makes z the past length, the present outputs make y
    past + new, and x is the new tokens."""
    model = load_for_fusion(KVCACHE / "llama_2l_past_ts17_xyzdims.onnx")
    cache = cache_dims(model)
    assert cache is not None and cache.past == ("z",) and cache.new == "x" and cache.total == ("y",)
    used = resolve_dims(model)
    assert used["z"] == 1 and used["y"] == used["x"] + 1
    used = resolve_dims(model, {"z": 64, "x": 16})
    assert used["y"] == 80


def test_short_dim_names_relate_as_the_long_ones() -> None:
    model = load_for_fusion(KVCACHE / "llama_2l_past_ts17_seqdims.onnx")
    cache = cache_dims(model)
    assert cache is not None and cache.past == ("past_seq",) and cache.new == "seq"
    assert cache.total == ("total_seq",)
    assert resolve_dims(model) == {"seq": 128, "total_seq": 129, "past_seq": 1}


def test_a_decode_step_export_is_validated_at_one_new_token() -> None:
    """Traced at one new token, the original does not run at the default 128: validation says so and
    validates at seq=1 (the user gave no dim); with --dim seq=128 it stays an error."""
    model, fused, _scan = _fuse("llama_2l_past_ts17_decode")
    assert decode_step(model, None) == {"seq": 1, "past_seq": DECODE_PAST_DEFAULT}  # the one decode-step rule
    assert decode_step(model, {"seq": 4}) is None
    v = validate(model, fused, False, seeds=1)
    assert v.ok and v.dims["seq"] == 1 and "one new token" in v.note and v.note in v.headline()
    from fuseview.errors import FuseviewError

    with pytest.raises(FuseviewError, match="does not run on generated inputs"):
        validate(model, fused, False, {"seq": 128}, seeds=1)


def fuse_with_no_dim(src: Path, out: Path) -> Counter:
    """`fuseview fuse SRC -o OUT` with no --dim: it must validate; the fused model's op histogram."""
    r = subprocess.run([sys.executable, "-m", "fuseview", "fuse", str(src), "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "validated on onnxruntime" in r.stdout and "(ok)" in r.stdout
    return Counter(n.op_type for n in onnx.load(str(out)).graph.node)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(INDEX))
def test_fuse_with_no_dim_validates(name: str, tmp_path) -> None:
    ops = fuse_with_no_dim(KVCACHE / f"{name}.onnx", tmp_path / "f.onnx")
    assert sum(ops[o] for o in ATTENTION_OPS) == INDEX[name]["layers"]
