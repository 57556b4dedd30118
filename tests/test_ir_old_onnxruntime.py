"""onnx newer than onnxruntime, for real: fuseview's commands under onnxruntime 1.20.1 (max IR 10) exit 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

OLD_ORT = "1.20.1"
DEMO = ROOT / "fuseview" / "data" / "demo_gpt2_2l.onnx"


@pytest.fixture(scope="module")
def old_ort(request: pytest.FixtureRequest) -> Path:
    """onnxruntime 1.20.1 alone in a folder (cached under pytest's cache), put first on the path."""
    target = Path(request.config.cache.mkdir(f"onnxruntime-{OLD_ORT}"))
    if not (target / "onnxruntime" / "__init__.py").is_file():
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target)]
        r = subprocess.run([*pip, f"onnxruntime=={OLD_ORT}"], capture_output=True, text=True, timeout=300)
        if r.returncode:
            pytest.skip(f"pip cannot install onnxruntime=={OLD_ORT} here: {r.stderr.strip()[-300:]}")
    return target


def _fuseview(old_ort: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(old_ort), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "fuseview", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_commands_build_models_the_old_onnxruntime_reads(old_ort: Path, tmp_path: Path) -> None:
    code = "import onnxruntime, onnx; print(onnxruntime.__version__, onnx.IR_VERSION)"
    r = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(old_ort)},
                       capture_output=True, text=True, timeout=120)
    version, onnx_ir = r.stdout.split()
    assert version == OLD_ORT and int(onnx_ir) > 10  # onnxruntime 1.20 reads IR 10 at most
    fused = tmp_path / "fused.onnx"
    for args in (("fuse", str(DEMO), "-o", str(fused)),
                 ("profile", str(DEMO), "--provider", "cpu", "--runs", "3"),
                 ("profile", str(DEMO), "--against", str(fused), "--provider", "cpu", "--runs", "4",
                  "--sessions", "2")):
        done = _fuseview(old_ort, *args)
        assert done.returncode == 0, (args, done.stderr[-2000:])
    assert "max supported IR version" not in done.stdout + done.stderr
