"""The device check (scripts/gpu_check.py) and its models (scripts/gpu_models.py), run on the CPU.

On the device machine it runs at real width on CUDA; here the same stages run at tiny width with
--provider cpu: the models built without transformers, fused, timed, profiled and tuned, the table printed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.torch
if os.environ.get("FUSEVIEW_REQUIRE_TORCH") != "1":  # CI installs the extra: a missing torch fails there
    pytest.importorskip("torch")
ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=ROOT)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_the_models_are_built_without_transformers_and_their_attention_fuses(tmp_path):
    done = _run("scripts/gpu_models.py", "--out", str(tmp_path), "--width", "tiny", timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    from fuseview.fusion.scan import scan_model
    from fuseview.graph.loader import read_model

    want = {"gpt2": "attention_packed", "bert": "attention_packed", "llama": "attention_gqa"}
    for name, rule in want.items():
        model = read_model(tmp_path / f"{name}_tiny.onnx")
        rules = {c.rule for c in scan_model(model).candidates}
        assert rule in rules and any("layer_norm" in r or "rms_norm" in r for r in rules), (name, rules)
    assert "transformers" not in (ROOT / "scripts" / "gpu_models.py").read_text().split("Requires:")[1][:40]


@pytest.mark.slow
def test_the_check_runs_every_stage_and_prints_the_table_on_the_cpu(tmp_path):
    out = tmp_path / "out"
    done = _run("scripts/gpu_check.py", "--out", str(out), "--work", str(tmp_path / "work"), "--provider",
                "cpu", "--width", "tiny", "--shapes", "1x16", "--seq", "16", "--runs", "5",
                "--tune-budget", "8", "--budget", "400", timeout=600)
    assert done.returncode == 0, done.stdout[-3000:]
    text = done.stdout
    table = (out / "table.md").read_text().splitlines()
    assert table[0].startswith("| model | shape | fused ÷ original") and len(table) == 2 + 3
    assert table[2].startswith("| gpt2 | 1×16 | ") and "—" not in table[2].split("|")[3]
    assert table[4].split("|")[4].strip() == "—"  # onnxruntime's optimizer has no Llama type
    for stage in ("models", "fuse llama", "ort optimizer bert", "table", "profile bert", "tune llama"):
        assert f"== {stage}: ok" in text
    assert "fp16:" in text or "fuse --float16 gpt2" in text  # skipped in one line, or run
    assert text.count("placement: CPU") == 12 and "machine roofline" in text  # fp32 and fp16 pairs
    for stage in ("profile fp16 llama", "session llama", "tune --float16 llama"):
        assert f"== {stage}: ok" in text
    assert "session: provider auto -> cpu; float16 conversion on show: True" in text
    assert "at float16 tolerances" in text and "== criteria (issue 35, done means)" in text
    assert "llama 1×16 fp16 fused ÷ fp16 original: " in text
    assert "llama_fp16: outputs pass: met; no work moved to the CPU: met" in text
    assert {p.name for p in out.iterdir()} >= {"gpu_check.log", "table.md", "llama_profile.json",
                                               "llama_fp16_profile.json"}
    assert "all stages ok" in text
