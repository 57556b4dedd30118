"""The committed transformers 5.x exports (default sdpa attention) open in fuseview and run on its inputs."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from fuseview.cli import main
from fuseview.runtime.inputs import make_feeds
from tests.conftest import ASSET_MODELS

CURRENT = ASSET_MODELS / "current"
INDEX = json.loads((CURRENT / "INDEX.json").read_text())["models"]
NAMES = sorted(INDEX)
KV_NAMES = [n for n in NAMES if INDEX[n]["has_kv_cache"]]


def _session(path) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def test_index_lists_every_file_and_the_set_is_complete() -> None:
    on_disk = {p.name for p in CURRENT.glob("*.onnx")}
    assert on_disk == {INDEX[n]["file"] for n in NAMES}
    for name in NAMES:
        assert (CURRENT / INDEX[name]["file"]).stat().st_size == INDEX[name]["bytes"] < 2_000_000
    kinds = {(e["architecture"], e["exporter"], e["has_kv_cache"]) for e in INDEX.values()}
    for arch in ("GPT2LMHeadModel", "LlamaForCausalLM"):
        for exporter in ("torchscript", "dynamo"):
            assert {(arch, exporter, False), (arch, exporter, True)} <= kinds
    assert {("BertModel", "torchscript", False), ("BertModel", "dynamo", False)} <= kinds
    assert ("T5EncoderModel", "torchscript", False) in kinds
    assert {e["attn_implementation"] for e in INDEX.values()} == {"sdpa"}


@pytest.mark.parametrize("name", NAMES)
def test_fuseview_info_reads_the_export(name: str, capsys) -> None:
    entry = INDEX[name]
    assert main(["info", str(CURRENT / entry["file"]), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["nodes"] == entry["nodes"] > 0
    assert info["ops"] == entry["ops"]
    assert [i["name"] for i in info["inputs"]] == [i["name"] for i in entry["inputs"]]
    assert [o["name"] for o in info["outputs"]] == [o["name"] for o in entry["outputs"]]
    past_inputs = [i["name"] for i in info["inputs"] if i["name"].startswith("past_key_values.")]
    assert bool(past_inputs) == entry["has_kv_cache"]


def test_info_from_the_command_line() -> None:
    entry = INDEX["llama_2l_sdpa_past_dynamo"]
    out = subprocess.run([sys.executable, "-m", "fuseview", "info", str(CURRENT / entry["file"])],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert f"nodes      {entry['nodes']}" in out.stdout
    assert "past_key_values.1.value: float32 [1, 2, past_sequence, 16]" in out.stdout


@pytest.mark.parametrize("name", [n for n in NAMES if n not in KV_NAMES])
def test_runs_on_fuseview_inputs(name: str) -> None:
    path = CURRENT / INDEX[name]["file"]
    model = onnx.load(str(path))
    feeds = make_feeds(model, {"sequence": 7}, seed=1)
    outs = _session(path).run(None, feeds)
    assert outs[0].shape[:2] == (1, 7) and all(np.isfinite(o).all() for o in outs)


def _mask_dim(model: onnx.ModelProto) -> str:
    (mask,) = [i for i in model.graph.input if i.name == "attention_mask"]
    return mask.type.tensor_type.shape.dim[1].dim_param  # total_sequence (TorchScript), s53 or so (dynamo)


@pytest.mark.parametrize("name", KV_NAMES)
def test_kv_cache_presents_grow_by_the_new_tokens(name: str) -> None:
    path = CURRENT / INDEX[name]["file"]
    model = onnx.load(str(path))
    sess = _session(path)
    out_names = [o.name for o in sess.get_outputs()]
    layers = INDEX[name]["layers"]
    assert out_names == ["logits"] + [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    total = _mask_dim(model)
    for past in (0, 1, 16):
        for new in (1, 4):
            feeds = make_feeds(model, {"sequence": new, "past_sequence": past, total: past + new}, seed=past)
            assert feeds["past_key_values.0.key"].shape[2] == past
            outs = dict(zip(out_names, sess.run(None, feeds), strict=True))
            assert outs["logits"].shape[:2] == (1, new)
            for out_name, value in outs.items():
                assert np.isfinite(value).all()
                if out_name.startswith("present."):
                    assert value.shape == (1, INDEX[name]["kv_heads"], past + new, INDEX[name]["head_dim"])
            # The present cache carries the past through unchanged, then the new tokens' keys/values.
            assert np.array_equal(outs["present.0.key"][:, :, :past], feeds["past_key_values.0.key"])
