"""`fuseview scan` and `fuseview fuse` end to end, including bad input; the EyeLike example end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from fuseview.cli import main
from fuseview.fusion.reference_ops import REFERENCE_OPS

from .conftest import GPT2_MODELS

ROOT = Path(__file__).resolve().parent.parent
GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"
EYELIKE = ROOT / "assets" / "eyelike_linreg.onnx"


def test_scan_json(capsys):
    assert main(["scan", str(GPT2), "--json", "--dim", "seq=16"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model"] == str(GPT2)
    c = data["candidates"][0]
    assert {
        "id",
        "rule",
        "fused_op",
        "domain",
        "nodes",
        "removed_tensors",
        "saved_bytes",
        "conflicts",
    } <= set(c)
    ids = {x["id"] for x in data["candidates"]}
    assert all(set(x["conflicts"]) <= ids for x in data["candidates"])
    assert data["dims"]["seq"] == 16


def test_scan_text_and_bytes_follow_dims(capsys):
    assert main(["scan", str(GPT2), "--json", "--dim", "seq=8"]) == 0
    small = {c["id"]: c["saved_bytes"] for c in json.loads(capsys.readouterr().out)["candidates"]}
    assert main(["scan", str(GPT2), "--json", "--dim", "seq=64"]) == 0
    big = {c["id"]: c["saved_bytes"] for c in json.loads(capsys.readouterr().out)["candidates"]}
    assert small.keys() == big.keys()
    assert any(big[k] and small[k] and big[k] == 8 * small[k] for k in big)
    assert main(["scan", str(GPT2)]) == 0
    assert "candidates" in capsys.readouterr().out


def test_fuse_writes_validated_model_and_plan(tmp_path, capsys):
    out, plan = tmp_path / "fused.onnx", tmp_path / "plan.json"
    assert (
        main(
            [
                "fuse",
                str(GPT2),
                "-o",
                str(out),
                "--reject",
                "fast_gelu",
                "--reject",
                "bias_fast_gelu",
                "--save-plan",
                str(plan),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "applied" in text and "max abs" in text and "validate   onnxruntime (ok)" in text
    fused = onnx.load(str(out))
    ops = {n.op_type for n in fused.graph.node}
    assert "Attention" in ops and "FastGelu" not in ops  # SkipLayerNormalization: a CPU near miss here
    out2 = tmp_path / "again.onnx"
    assert main(["fuse", str(GPT2), "-o", str(out2), "--plan", str(plan)]) == 0
    assert onnx.load(str(out2)).SerializeToString() == fused.SerializeToString()
    assert not list(tmp_path.glob(".*.tmp"))


def test_fuse_accept_one_id(tmp_path, capsys):
    assert main(["scan", str(GPT2), "--json"]) == 0
    cid = json.loads(capsys.readouterr().out)["candidates"][0]["id"]
    out = tmp_path / "one.onnx"
    assert main(["fuse", str(GPT2), "-o", str(out), "--accept", cid]) == 0
    meta = [
        {p.key: p.value for p in n.metadata_props} for n in onnx.load(str(out)).graph.node if n.metadata_props
    ]
    assert {m["fuseview.candidate"] for m in meta} == {cid}


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_bad_input_is_one_line_exit_2(tmp_path):
    src = tmp_path / "m.onnx"
    shutil.copy(GPT2, src)
    garbage = tmp_path / "junk.onnx"
    garbage.write_bytes(b"\x00not an onnx file at all")
    cases = [
        ["scan", str(tmp_path / "missing.onnx")],
        ["scan", str(garbage)],
        ["scan", str(src), "--dim", "seq"],
        ["fuse", str(src), "-o", str(src)],
        ["fuse", str(src), "-o", str(tmp_path / "x.onnx"), "--accept", "no_such_rule"],
        ["fuse", str(src), "-o", str(tmp_path / "x.onnx"), "--plan", str(tmp_path / "none.json")],
        ["fuse", str(src), "-o", str(tmp_path / "nodir" / "x.onnx")],
    ]
    before = src.read_bytes()
    for args in cases:
        r = subprocess.run(
            [sys.executable, "-m", "fuseview", *args], capture_output=True, text=True, cwd=ROOT
        )
        assert r.returncode == 2, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("fuseview: error:"), r.stderr
    assert src.read_bytes() == before


def test_eyelike_linear_regression_end_to_end(tmp_path, capsys):
    out = tmp_path / "ridge_fused.onnx"
    assert main(["fuse", str(EYELIKE), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "AddEyeLike" in text and "reference-only" in text and "validate   reference (ok)" in text
    original, fused = onnx.load(str(EYELIKE)), onnx.load(str(out))
    onnx.checker.check_model(fused)
    assert "AddEyeLike" in {n.op_type for n in fused.graph.node}
    assert "EyeLike" not in {n.op_type for n in fused.graph.node}
    rng = np.random.default_rng(1)
    feeds = {
        "X": rng.standard_normal((20, 4)).astype(np.float32),
        "y": rng.standard_normal((20, 1)).astype(np.float32),
    }
    a = ReferenceEvaluator(original).run(None, feeds)[0]
    b = ReferenceEvaluator(fused, new_ops=REFERENCE_OPS).run(None, feeds)[0]
    np.testing.assert_array_equal(a, b)
    import onnxruntime as ort

    with pytest.raises(Exception):  # noqa: B017 - onnxruntime really cannot run the custom op
        ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
