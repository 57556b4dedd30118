"""Issue 16: options and models that ended in internal errors, silent no-ops or gigabytes.

Each case runs the real `python -m fuseview` in its own process under a time and an address-space limit
(tests/hostile_cli.py): a refusal is exit 2, one `fuseview: error:` line, nothing written.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from onnx import TensorProto as T
from onnx import helper

from tests import hostile_cases as hc
from tests.hostile_cli import refuse, run_cli

PROFILE = ["--runs", "2", "--warmup", "0", "--quiet"]
TRACE = json.dumps({"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 2,
                                     "pid": 1, "tid": 1}]})


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A folder with a small MLP model, the 2-layer GPT-2 demo (symbolic dims) and a tiny trace."""
    (tmp_path / "m.onnx").write_bytes(hc.mlp().SerializeToString())
    demo = Path(hc.ROOT, "fuseview", "data", "demo_gpt2_2l.onnx")
    (tmp_path / "g.onnx").write_bytes(demo.read_bytes())
    (tmp_path / "t.json").write_text(TRACE)
    return tmp_path


@pytest.mark.parametrize("argv", [
    ["fuse", "m.onnx", "-o", "X.onnx", "--save-plan", "X.onnx"],
    ["fuse", "m.onnx", "-o", "X.onnx", "--save-plan", "./sub/../X.onnx"],
    ["fuse", "m.onnx", "-o", "old.onnx", "--save-plan", "hard.onnx"],
], ids=["same name", "same path", "hard link"])
def test_two_outputs_of_one_run_must_be_two_files(folder: Path, argv) -> None:
    (folder / "sub").mkdir()
    (folder / "old.onnx").write_bytes(b"previous result")
    os.link(folder / "old.onnx", folder / "hard.onnx")
    refuse(argv, folder, match="the same file as")


@pytest.mark.parametrize("argv", [
    ["trace", "t.json", "--json", ""],
    ["profile", "m.onnx", *PROFILE, "--json", ""],
    ["fuse", "m.onnx", "-o", "f.onnx", "--save-plan", ""],
    ["fuse", "m.onnx", "-o", ""],
    ["render", "m.onnx", "-o", ""],
])
def test_an_empty_output_name_is_refused_not_ignored(folder: Path, argv) -> None:
    refuse(argv, folder, match="an empty file name")


def test_json_dash_prints_the_trace_report_on_stdout_and_writes_no_file(folder: Path) -> None:
    run = run_cli(["trace", "t.json", "--json", "-"], folder)
    assert run.code == 0, run.stderr
    rep = json.loads(run.stdout)
    assert rep["kind"] == "fuseview.trace_compare" and rep["traces"][0]["events"][0]["name"] == "aten::mm"
    assert not (folder / "-").exists()


def test_json_dash_prints_the_profile_report_on_stdout_and_writes_no_file(folder: Path) -> None:
    run = run_cli(["profile", "m.onnx", *PROFILE, "--json", "-"], folder, timeout_s=120)
    assert run.code == 0, run.stderr
    rep = json.loads(run.stdout)
    assert rep["kind"] == "fuseview.profile" and rep["models"][0]["runs"] == 2
    assert not (folder / "-").exists()


@pytest.mark.parametrize(("argv", "match"), [
    (["profile", "m.onnx", "--runs", "100001", "--quiet"], "--runs 100001: must be from 1 to 100000"),
    (["profile", "m.onnx", "--warmup", "1000000000", "--quiet"], "--warmup"),
    (["profile", "m.onnx", "--profile-runs", "1000000000", "--quiet"], "--profile-runs"),
    (["profile", "m.onnx", *PROFILE, "--seed", "-1"], "--seed -1: must be from 0"),
    (["profile", "m.onnx", *PROFILE, "--sessions", "100000"], "--sessions"),
    (["profile", "m.onnx", *PROFILE, "--threshold", "nan"], "--threshold"),
    (["fuse", "m.onnx", "-o", "f.onnx", "--seeds", "1000000000"], "--seeds"),
    (["fuse", "m.onnx", "-o", "f.onnx", "--atol", "inf"], "--atol"),
    (["render", "m.onnx", "-o", "r.svg", "--scale", "1e308"], "--scale"),
    (["render", "m.onnx", "-o", "r.png", "--scale", "inf"], "--scale"),
    (["render", "m.onnx", "-o", "r.svg", "--scale", "nan"], "--scale"),
    (["render", "m.onnx", "-o", "r.svg", "--scale", "-1"], "--scale"),
    (["trace", "t.json", "--top", "-5"], "--top"),
    (["scan", "g.onnx", "--dim", "sequence=99999999999999999999999"], "--dim"),
    (["scan", "g.onnx", "--dim", "sequence=" + "9" * 5000], "--dim"),
    (["profile", "g.onnx", *PROFILE, "--dim", "batch=3000000000"], "--dim"),
])
def test_numbers_out_of_bounds_are_one_line(folder: Path, argv, match) -> None:
    run = refuse(argv, folder, match=match, timeout_s=30)
    assert run.seconds < 30


@pytest.mark.parametrize(("var", "value"), [
    ("FUSEVIEW_MAX_TRACE_BYTES", "1e400"),
    ("FUSEVIEW_MAX_TRACE_BYTES", "1e30"),
    ("FUSEVIEW_MAX_MODEL_BYTES", "1e400"),
    ("FUSEVIEW_MAX_MODEL_BYTES", "nan"),
])
def test_limit_variables_that_are_not_a_size_are_one_line(folder: Path, var, value) -> None:
    argv = ["trace", "t.json"] if "TRACE" in var else ["info", "m.onnx"]
    refuse(argv, folder, match=var, extra_env={var: value})


def _undefined_types(folder: Path) -> None:
    m = hc._relu()
    m.graph.input[0].type.tensor_type.elem_type = 999
    (folder / "e999.onnx").write_bytes(m.SerializeToString())
    m = hc.mlp()
    m.graph.initializer[0].data_type = 999
    (folder / "d999.onnx").write_bytes(m.SerializeToString())


@pytest.mark.parametrize("argv", [
    ["fuse", "e999.onnx", "-o", "o.onnx"],
    ["profile", "e999.onnx", *PROFILE],
    ["info", "d999.onnx"],
    ["fuse", "d999.onnx", "-o", "o.onnx"],
    ["profile", "d999.onnx", *PROFILE],
])
def test_an_element_type_onnx_does_not_define_is_one_line(folder: Path, argv) -> None:
    _undefined_types(folder)
    refuse(argv, folder, match="999")


@pytest.mark.parametrize("argv", [["info", "e999.onnx"], ["scan", "e999.onnx", "--json"],
                                  ["render", "e999.onnx", "-o", "r.svg"]])
def test_looking_at_a_model_with_an_undefined_element_type_names_it(folder: Path, argv) -> None:
    _undefined_types(folder)
    run = run_cli(argv, folder)
    assert run.code == 0 and run.stderr == "", run.stderr
    if argv[0] == "info":
        assert "undefined type 999" in run.stdout


@pytest.mark.parametrize("argv", [
    ["scan", "f.onnx"],
    ["info", "f.onnx"],
    ["fuse", "f.onnx", "-o", "o.onnx", "--no-validate"],
    ["open", "f.onnx", "--screenshot", "s.png"],
])
def test_declared_float_vectors_of_2p24_elements_cost_no_gigabytes(tmp_path: Path, argv) -> None:
    big = [hc._vi("a", [1 << 24], T.FLOAT), hc._vi("b", [1 << 24], T.FLOAT)]
    m = hc._model([helper.make_node("Add", ["a", "b"], ["y"])], big, [hc._vi("y", [1 << 24], T.FLOAT)])
    (tmp_path / "f.onnx").write_bytes(m.SerializeToString())
    run = run_cli(argv, tmp_path, timeout_s=60, mem_bytes=8 * hc.GiB)
    assert run.code in (0, 2) and "Traceback" not in run.stderr and "internal error" not in run.stderr
    assert run.peak_rss_mib < 900 and run.seconds < 60, (run.peak_rss_mib, run.seconds)


LONG = "x" * 5000


@pytest.mark.parametrize("argv", [
    ["info", LONG + ".onnx"], ["scan", LONG + ".onnx"], ["render", LONG + ".onnx", "-o", "r.svg"],
    ["fuse", LONG + ".onnx", "-o", "f.onnx"], ["profile", LONG + ".onnx"], ["open", LONG + ".onnx"],
    [LONG + ".onnx"], ["trace", LONG + ".json", "--json", "r.json"], ["fuse", "m.onnx", "-o", LONG + ".onnx"],
    ["scan", "m.onnx", "--profile", LONG + ".json"], ["fuse", "m.onnx", "-o", "f.onnx", "--plan", LONG],
])
def test_a_file_name_of_5000_characters_is_one_line(folder: Path, argv) -> None:
    run = refuse(argv, folder, match="too long")
    assert len(run.stderr) < 700
