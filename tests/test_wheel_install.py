"""A built wheel, installed away from the checkout, opens its bundled demo: package data travels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT


def _run(
    cmd: list[str], cwd: Path, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # build from a copy of what the wheel is made of, so the checkout gets no build/ or egg-info writes
    src = out / "src"
    shutil.copytree(ROOT / "fuseview", src / "fuseview", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    r = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        cwd=out,
    )
    if r.returncode != 0:
        pytest.fail(f"pip wheel failed: {r.stderr[-2000:]}")
    wheels = list(out.glob("fuseview-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.slow  # measured over 10 s; `-m "not slow"` skips it
def test_wheel_carries_the_demo_model(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "fuseview/data/demo_gpt2_2l.onnx" in names
    assert not any(n.startswith(("tests/", "assets/")) for n in names)


@pytest.mark.slow  # measured over 10 s; `-m "not slow"` skips it
def test_installed_wheel_opens_its_demo(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    r = _run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shot = elsewhere / "demo.png"
    # the installed copy only: the checkout is neither the cwd nor on the path (the test venv's editable
    # install of fuseview is shadowed by the target folder, which comes first)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=str(target), QT_QPA_PLATFORM="offscreen")
    probe = _run(
        [sys.executable, "-c", "import fuseview; print(fuseview.__file__, fuseview.DEMO_MODEL)"],
        cwd=elsewhere,
        env=env,
    )
    assert probe.returncode == 0, probe.stderr
    module_file, demo = probe.stdout.split()
    assert Path(module_file).is_relative_to(target) and Path(demo).is_relative_to(target)
    assert Path(demo).is_file()
    r = _run(
        [sys.executable, "-m", "fuseview", "open", "--screenshot", str(shot)],
        cwd=elsewhere,
        env=env,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000
