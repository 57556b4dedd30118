"""The import contracts hold on the tree and catch the window reaching below the session: `lint-imports`, run
on a copy of fuseview, passes as it is and fails once a module of ui/ imports runtime, tuning, targets or
fusion."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

# one window module per layer the window may reach only through the session
ILLEGAL = {
    "fuseview/ui/profile_panel.py": "fuseview.runtime.sessions",
    "fuseview/ui/tune_dialog.py": "fuseview.tuning.settings",
    "fuseview/ui/target_selector.py": "fuseview.targets",
    "fuseview/ui/candidates_panel.py": "fuseview.fusion.plan",
}


def _lint(tree: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([exe, "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    skip = shutil.ignore_patterns("data", "__pycache__")
    shutil.copytree(ROOT / "fuseview", tmp_path / "fuseview", ignore=skip)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_window_reaching_below_the_session_breaks_the_contract(tree: Path) -> None:
    kept = _lint(tree)
    assert kept.returncode == 0, kept.stdout[-2000:]
    for module, target in ILLEGAL.items():
        with open(tree / module, "a", encoding="utf-8") as f:
            f.write(f"\nimport {target}  # noqa\n")
    broken = _lint(tree)
    assert broken.returncode != 0
    out = broken.stdout
    assert "Contracts: 6 kept, 1 broken." in out, out[-3000:]  # the window's contract, no other
    for module, target in ILLEGAL.items():
        importer = module[:-3].replace("/", ".")
        assert f"{importer} -> {target}" in out, (importer, target, out[-3000:])
