"""`fuseview render` and `fuseview open --screenshot`: real models drawn to real SVG and PNG files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from fuseview.cli import main
from fuseview.graph.groups import expansion_for
from fuseview.graph.layout import layout_graph
from fuseview.graph.loader import load_document
from fuseview.ui.export import MAX_PNG_SIDE, png_size
from tests.conftest import GPT2_MODELS, ROOT, backend_models, gpt2_models

SVG_NS = "{http://www.w3.org/2000/svg}"
GPT2_2L = GPT2_MODELS / "gpt2_2l_ts17.onnx"


def _render(capsys, model: Path, out: Path, *extra: str) -> dict:
    code = main(["render", str(model), "-o", str(out), "--timings", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def _svg_shapes(path: Path) -> int:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG_NS}svg"
    return sum(1 for el in root.iter() if el.tag in (f"{SVG_NS}path", f"{SVG_NS}rect", f"{SVG_NS}polyline"))


@pytest.mark.parametrize("expansion", ["flat", "collapsed"])
@pytest.mark.parametrize("model", gpt2_models(), ids=lambda p: p.stem)
def test_render_every_shared_model(qapp, capsys, tmp_path, model, expansion):
    info = _render(capsys, model, tmp_path / "g.png", f"--{expansion}")
    doc = load_document(model)
    lay = layout_graph(doc.graph, expansion_for(doc.graph, expansion))
    assert info["nodes"] == len(doc.graph.visible_nodes())
    assert info["boxes"] == len(lay.boxes) and info["routes"] == len(lay.routes)
    if expansion == "flat":
        assert info["boxes"] == info["nodes"] + len(doc.graph.inputs) + len(doc.graph.outputs)
    else:
        assert info["boxes"] < info["nodes"]
    for key in ("load_s", "layout_s", "draw_s"):
        assert info[key] >= 0
    img = QImage(str(tmp_path / "g.png"))
    assert not img.isNull()
    assert (img.width(), img.height()) == (info["width"], info["height"])
    assert max(img.width(), img.height()) <= MAX_PNG_SIDE
    # something other than background was drawn
    assert len({img.pixel(x, img.height() // 3) for x in range(0, img.width(), 3)}) > 1


@pytest.mark.parametrize("model", ["gpt2_2l_ts17", "gpt2_12l_ts13"])
def test_render_svg_has_a_shape_per_box(qapp, capsys, tmp_path, model):
    out = tmp_path / "g.svg"
    info = _render(capsys, GPT2_MODELS / f"{model}.onnx", out)
    assert out.stat().st_size > 0
    # every box draws at least one path (rounded rect) and every route one path
    assert _svg_shapes(out) >= info["boxes"] + info["routes"]
    text = out.read_text()
    doc = load_document(GPT2_MODELS / f"{model}.onnx")
    assert doc.graph.inputs[0] in text  # labels are real text in the SVG


def test_render_cnn_png_and_svg(qapp, capsys, tmp_path):
    model = backend_models()[0].parent / "light_resnet50.onnx"
    png = _render(capsys, model, tmp_path / "r.png", "--scale", "0.5")
    assert png["scale"] == pytest.approx(0.5)
    assert not QImage(str(tmp_path / "r.png")).isNull()
    svg = _render(capsys, model, tmp_path / "r.svg")
    assert _svg_shapes(tmp_path / "r.svg") >= svg["boxes"]


def test_png_is_capped_in_size():
    from PySide6.QtCore import QRectF

    w, h, s = png_size(QRectF(0, 0, 1200, 270_000), 1.0)
    assert max(w, h) <= MAX_PNG_SIDE and s < 1
    w, h, s = png_size(QRectF(0, 0, 16000, 16000), 1.0)
    assert w * h <= 120_000_000 and s < 1
    assert png_size(QRectF(0, 0, 100, 50), 2.0) == (200, 100, 2.0)


@pytest.mark.parametrize("bad", ["missing", "not_onnx", "bad_suffix", "no_folder"])
def test_render_bad_input_exits_2_and_writes_nothing(qapp, capsys, tmp_path, bad):
    model, out = GPT2_2L, tmp_path / "out.png"
    if bad == "missing":
        model = tmp_path / "nope.onnx"
    elif bad == "not_onnx":
        model = tmp_path / "junk.onnx"
        model.write_bytes(b"\x08\x07junk that is not a model" * 20)
    elif bad == "bad_suffix":
        out = tmp_path / "out.jpg"
    elif bad == "no_folder":
        out = tmp_path / "missing_dir" / "out.svg"
    code = main(["render", str(model), "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("fuseview: error:")
    assert sorted(p.name for p in tmp_path.iterdir()) == (["junk.onnx"] if bad == "not_onnx" else [])


_BACKEND = backend_models()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_render_every_backend_model_small(qapp, tmp_path):
    """Load, lay out and draw every onnx backend test model (issue 2): small PNGs, all in one test."""
    from fuseview.commands.render import render_model

    assert len(_BACKEND) > 100
    failures = []
    for i, model in enumerate(_BACKEND):
        out = tmp_path / f"m{i}.png"
        try:
            info = render_model(str(model), str(out), "auto", scale=0.1)
        except Exception as exc:  # noqa: BLE001 - collect them all, report once
            failures.append(f"{model.relative_to(model.parents[2])}: {type(exc).__name__}: {exc}")
            continue
        if not out.is_file() or info["boxes"] < 1 or QImage(str(out)).isNull():
            failures.append(f"{model}: no image")
        out.unlink()
    assert not failures, "\n".join(failures[:20])


def _cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "fuseview", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_open_screenshot_writes_a_png_of_the_window(tmp_path):
    out = tmp_path / "shot.png"
    proc = _cli("open", str(GPT2_2L), "--screenshot", str(out))
    assert proc.returncode == 0, proc.stderr
    img = QImage(str(out))
    assert not img.isNull() and img.width() >= 800 and img.height() >= 500


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_plain_fuseview_model_routes_to_open(tmp_path):
    out = tmp_path / "shot.png"
    proc = _cli(str(GPT2_2L), "--screenshot", str(out), "--collapsed")
    assert proc.returncode == 0, proc.stderr
    assert not QImage(str(out)).isNull()


@pytest.mark.parametrize("bad", ["missing", "empty"])
def test_open_bad_model_exits_2_without_window(tmp_path, bad):
    model = tmp_path / "x.onnx"
    if bad == "empty":
        model.write_bytes(b"")
    out = tmp_path / "shot.png"
    proc = _cli("open", str(model), "--screenshot", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and str(model) in proc.stderr
    assert not out.exists()


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_open_without_model_shows_the_bundled_demo(tmp_path):
    from fuseview import DEMO_MODEL

    assert DEMO_MODEL.is_file()
    out = tmp_path / "demo.png"
    proc = _cli("open", "--screenshot", str(out), "--flat")
    assert proc.returncode == 0, proc.stderr
    assert not QImage(str(out)).isNull()


def test_screenshot_must_be_png(tmp_path):
    proc = _cli("open", str(GPT2_2L), "--screenshot", str(tmp_path / "shot.jpg"))
    assert proc.returncode == 2 and "png" in proc.stderr
    assert list(tmp_path.iterdir()) == []
