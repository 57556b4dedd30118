"""Issue 28.5: every script in scripts/ says what it needs and checks it in one line; make_traces.py needs
per case only what that case uses."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted(p for p in (ROOT / "scripts").glob("*.py") if not p.name.startswith("_"))
# run a script with some modules blocked (as if not installed): sys.modules[name] = None
RUN_BLOCKED = ("import os, runpy, sys\nfor m in sys.argv[1].split(','):\n    sys.modules[m] = None\n"
               "script = sys.argv[2]\nsys.argv = sys.argv[2:]\nsys.path.insert(0, os.path.dirname(script))\n"
               "runpy.run_path(script, run_name='__main__')\n")
MAKE_TRACES = str(ROOT / "scripts" / "make_traces.py")


def _requires_line(path) -> list[str]:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    lines = [ln for ln in doc.splitlines() if ln.startswith("Requires:")]
    assert len(lines) == 1, f"{path.name}: no `Requires:` line in its docstring"
    return [n.strip() for n in lines[0].split(":", 1)[1].split(",")]


@pytest.mark.parametrize("path", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_each_script_states_and_checks_its_requirements_first(path):
    needs = _requires_line(path)
    assert needs and all(n for n in needs)
    tree = ast.parse(path.read_text())
    order = []
    for node in tree.body:  # module-level imports, in order
        if isinstance(node, ast.Import):
            order += [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            order.append(node.module.split(".")[0])
    assert "_requires" in order, f"{path.name} never imports _requires"
    named = {n for n in needs if not n.startswith("bin:")} | {"_export_builders"}
    first = order.index("_requires")
    assert not [m for m in order[:first] if m in named], f"{path.name} imports what it needs before checking"


def test_a_missing_requirement_is_one_line_naming_every_missing_module(tmp_path):
    script = ROOT / "scripts" / "make_eyelike_linreg.py"
    r = subprocess.run([sys.executable, "-c", RUN_BLOCKED, "onnx", str(script), str(tmp_path / "m.onnx")],
                       capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == ["make_eyelike_linreg.py: needs onnx (pip install onnx)"]
    assert not (tmp_path / "m.onnx").exists()


@pytest.mark.slow
def test_make_traces_only_cos_relu_needs_no_transformers(tmp_path):
    """The case that needs transformers is neither built nor imported when not asked for."""
    pytest.importorskip("torch")
    r = subprocess.run([sys.executable, "-c", RUN_BLOCKED, "transformers,onnxruntime", MAKE_TRACES, "--only",
                        "cos_relu", "--out", str(tmp_path), "--steps", "3"], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    made = sorted(p.name for p in tmp_path.glob("*.json"))
    assert made == ["cos_relu_compiled.json", "cos_relu_eager.json"]
    r = subprocess.run([sys.executable, "-c", RUN_BLOCKED, "transformers", MAKE_TRACES, "--only",
                        "gpt2_block", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        "make_traces.py gpt2_block: needs transformers")
