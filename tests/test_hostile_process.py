"""Issue 16: signals, closed pipes, hostile file names, linked weights and a machine without X11 libraries.

Each case runs the real `python -m fuseview` in a fresh process (tests/hostile_cli.py).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from fuseview.qt_libs import missing_libraries, uses_xcb, xcb_plugin
from tests import hostile_cases as hc
from tests.hostile_cli import env, refuse, run_cli


def _signal_once_started(tmp_path: Path, argv: list[str], started: str, sig: int, **extra: str):
    """Run fuseview on a small model in work/ with TMPDIR tmp/; once a temp folder named `started...`
    exists, send sig. Returns (exit code, stderr, temp names left, whether work/ is unchanged)."""
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    (work / "m.onnx").write_bytes(hc.mlp().SerializeToString())
    before = hc.snapshot(work)
    proc = subprocess.Popen([sys.executable, "-m", "fuseview", *argv], cwd=work,
                            env=env(TMPDIR=str(tmp), **extra), stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not any(p.name.startswith(started) for p in tmp.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, f"{argv[0]} never started"
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    left = [p.name for p in tmp.iterdir() if p.name != ".ses"]  # .ses: onnxruntime's own, made at import
    return proc.returncode, err.decode(), left, hc.snapshot(work) == before


def test_sigterm_removes_the_profilers_temp_folder_and_writes_nothing(tmp_path: Path) -> None:
    argv = ["profile", "m.onnx", "--runs", "100000", "--profile-runs", "1000", "--quiet", "--json", "r.json"]
    code, err, left, unchanged = _signal_once_started(tmp_path, argv, "fuseview-prof-", signal.SIGTERM)
    assert code == 143 and err == "fuseview: terminated\n"
    assert left == [] and unchanged


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_ends_the_window_and_its_profile_without_leaving_temp_folders(tmp_path: Path, sig, code):
    # the window's Qt loop runs no Python while idle: the signal reaches it through a wakeup socket
    got, err, left, unchanged = _signal_once_started(
        tmp_path, ["open", "m.onnx", "--apply", "--profile"], "fuseview-profile-", sig, HOME=str(tmp_path))
    assert got == code, err[-2000:]
    assert "Traceback" not in err
    assert left == [] and unchanged


@pytest.mark.parametrize("argv", [["fuse", "m.onnx", "-o", "out.onnx"], ["scan", "g.onnx", "--near-misses"]])
def test_a_closed_stdout_does_not_lose_the_work(tmp_path: Path, argv) -> None:
    (tmp_path / "m.onnx").write_bytes(hc.mlp().SerializeToString())
    shutil.copy(Path(hc.ROOT, "fuseview", "data", "demo_gpt2_2l.onnx"), tmp_path / "g.onnx")
    proc = subprocess.Popen([sys.executable, "-m", "fuseview", *argv], cwd=tmp_path, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line (`| head -0`)
    err = proc.stderr.read()
    proc.wait(120)
    assert proc.returncode == 0 and err == b"", err[-500:]
    if argv[0] == "fuse":
        onnx.checker.check_model(onnx.load(str(tmp_path / "out.onnx")))


HOSTILE_NAME_CHARS = ["\u200e", "\u200f", "\u061c", "\u200b", "\u2028", "\u2029", "\ufeff", "\u00ad", "\n",
                      "\u202e", "\x1b"]


@pytest.mark.parametrize("argv", [["info", "NAME"], ["scan", "NAME"], ["fuse", "NAME", "-o", "o.onnx"],
                                  ["render", "NAME", "-o", "o.svg"]])
def test_bidi_invisible_and_invalid_utf8_file_names_are_escaped_on_stdout(tmp_path: Path, argv) -> None:
    raw = os.fsencode("m" + "".join(HOSTILE_NAME_CHARS) + "x") + b"\xff\xfe.onnx"  # not UTF-8 at the end
    (tmp_path / os.fsdecode(raw)).write_bytes(hc.mlp().SerializeToString())
    cmd = [sys.executable.encode(), b"-m", b"fuseview", *[raw if a == "NAME" else a.encode() for a in argv]]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env(), capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-500:]
    out = proc.stdout.decode("utf-8")  # strict: no byte that is not UTF-8 reached stdout
    assert not any(ch in out for ch in HOSTILE_NAME_CHARS if ch != "\n")
    name_lines = [ln for ln in out.splitlines() if "m\\u200e" in ln]
    assert name_lines or argv[0] == "render"  # render prints no name
    assert all("\\u2028" in ln and ("\\udcff" in ln or "\\xff" in ln) for ln in name_lines)
    assert not any(ln.strip() == "x\\udcff\\udcfe.onnx" for ln in out.splitlines())  # the newline stayed


def _model_with_line_breaks_in_its_names() -> onnx.ModelProto:
    """Names holding a newline that would print a fake error line, and a tab: GELU over x, as a rule sees."""
    from onnx import TensorProto, helper, numpy_helper

    x, mid = "x\nfuseview: error: fake", "a\tb"
    consts = [numpy_helper.from_array(np.array(v, np.float32), n)
              for n, v in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("Div", [x, "sqrt2"], [mid], name="div\nfuseview: error: fake node"),
             helper.make_node("Erf", [mid], ["e"]), helper.make_node("Add", ["e", "one"], ["e1"]),
             helper.make_node("Mul", [x, "e1"], ["m"]), helper.make_node("Mul", ["m", "half"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["n", 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8])], consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("argv", [["info", "m.onnx"], ["scan", "m.onnx", "--near-misses"],
                                  ["fuse", "m.onnx", "-o", "f.onnx"]])
def test_names_inside_a_model_that_hold_a_newline_print_escaped_whole(tmp_path: Path, argv) -> None:
    (tmp_path / "m.onnx").write_bytes(_model_with_line_breaks_in_its_names().SerializeToString())
    proc = subprocess.run([sys.executable, "-m", "fuseview", *argv], cwd=tmp_path, env=env(),
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-500:]
    lines = proc.stdout.splitlines()
    assert not any(ln.lstrip().startswith("fuseview: error: fake") for ln in lines), proc.stdout
    assert "\t" not in proc.stdout  # the tab inside "a\tb" too
    if argv[0] == "info":  # it lists the inputs by name
        assert any("x\\u000afuseview: error: fake" in ln for ln in lines), proc.stdout
    as_json = subprocess.run([sys.executable, "-m", "fuseview", "info", "m.onnx", "--json"], cwd=tmp_path,
                             env=env(), capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(as_json.stdout)["inputs"][0]["name"] == "x\nfuseview: error: fake"  # JSON keeps it


@pytest.mark.parametrize("argv", [["info", "m.onnx"], ["scan", "m.onnx"], ["render", "m.onnx", "-o", "g.svg"],
                                  ["fuse", "m.onnx", "-o", "f.onnx"],
                                  ["profile", "m.onnx", "--runs", "2", "--warmup", "0", "--quiet"]])
@pytest.mark.parametrize("where", ["outside", "inside"])
def test_external_data_through_a_link_is_refused_by_every_command(tmp_path: Path, argv, where) -> None:
    folder, outside = tmp_path / "model", tmp_path / "elsewhere"
    folder.mkdir()
    outside.mkdir()
    (folder / "m.onnx").write_bytes(hc._external_model("w.bin"))
    target = (outside if where == "outside" else folder) / "real.bin"
    target.write_bytes(b"\x00" * 64)
    os.symlink(target, folder / "w.bin")
    refuse(argv, folder, match="symbolic link")


def test_external_data_in_a_regular_file_still_loads(tmp_path: Path) -> None:
    (tmp_path / "m.onnx").write_bytes(hc._external_model("w.bin"))
    (tmp_path / "w.bin").write_bytes(b"\x00" * 64)
    run = run_cli(["fuse", "m.onnx", "-o", "f.onnx", "--no-validate"], tmp_path)
    assert run.code == 0, run.stderr


def _one_apt_line(run) -> None:
    lines = run.stderr.splitlines()
    assert run.code == 2 and len(lines) == 1, run.stderr[:500]
    assert lines[0].startswith("fuseview: error: the window needs system libraries")
    assert "sudo apt-get install -y " in lines[0] and "Traceback" not in run.stderr


@pytest.mark.skipif(not (xcb_plugin() and missing_libraries(xcb_plugin())),
                    reason="this machine has every library of Qt's xcb plugin")
def test_fuseview_on_a_machine_without_xcb_libraries_is_one_line_with_the_apt_command(tmp_path: Path) -> None:
    missing = missing_libraries(xcb_plugin())
    run = run_cli([], tmp_path, timeout_s=60, extra_env={"QT_QPA_PLATFORM": "", "DISPLAY": ":77"})
    _one_apt_line(run)
    assert all(m in run.stderr for m in missing)


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to build a plugin with a missing library")
def test_a_plugin_whose_library_is_missing_is_named_with_its_package(tmp_path: Path) -> None:
    # a stand-in libqxcb.so linked against a stand-in of a library this machine lacks, built then removed
    from .test_qt_libs import xcb_plugin_missing_a_known_library

    soname, package, plugins, extra = xcb_plugin_missing_a_known_library(tmp_path)
    assert uses_xcb(extra) and missing_libraries(plugins / "libqxcb.so")[:1] == [soname]
    run = run_cli([], tmp_path, timeout_s=60, extra_env=extra)
    _one_apt_line(run)
    assert package in run.stderr


def test_offscreen_and_wayland_are_not_checked_for_xcb() -> None:
    assert not uses_xcb({"QT_QPA_PLATFORM": "offscreen", "DISPLAY": ":0"})
    assert not uses_xcb({"DISPLAY": ":0", "WAYLAND_DISPLAY": "wayland-0"})
    assert uses_xcb({"DISPLAY": ":0"}) and uses_xcb({"QT_QPA_PLATFORM": "xcb:nograb"})
