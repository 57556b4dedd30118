"""`fuseview render MODEL -o OUT.svg|OUT.png`: the viewer's drawing of a model, written to a file."""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from fuseview.commands._expansion import add_expansion_arguments

HELP = "draw a model's graph to an SVG or PNG file (the same drawing as the window)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview render`."""
    p.add_argument("model", help="path to an .onnx file")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="output file: .svg or .png")
    add_expansion_arguments(p)
    p.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="pixels per layout unit (PNG is scaled down to at most 16384 px a side)",
    )
    p.add_argument(
        "--timings",
        action="store_true",
        help="print one JSON object with load_s, layout_s, draw_s and counts",
    )


def render_model(model: str, output: str, expansion: str = "auto", scale: float = 1.0) -> dict:
    """Load, lay out, build the viewer's scene and write it; returns timings and counts."""
    from fuseview.errors import FuseviewError
    from fuseview.graph.groups import expansion_for
    from fuseview.graph.layout import layout_graph
    from fuseview.graph.loader import load_document
    from fuseview.qt_libs import check_qt_libraries, missing_qt_libraries

    out = _check_image_path(output)  # before any work: a bad path costs nothing
    if not scale > 0:
        raise FuseviewError(f"--scale must be positive, not {scale}")
    # render never shows a window: draw offscreen unless the caller chose a platform
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    without_qt = out.suffix.lower() == ".svg" and bool(missing_qt_libraries())
    if not without_qt:  # a PNG needs Qt: where it cannot start, one whole line names the packages
        check_qt_libraries("render", other="or write an .svg instead (drawn without Qt)")
    t0 = time.perf_counter()
    doc = load_document(model)
    t1 = time.perf_counter()
    expanded = expansion_for(doc.graph, expansion)
    lay = layout_graph(doc.graph, expanded)
    t2 = time.perf_counter()
    if without_qt:
        from fuseview.atomic import write_text_atomic
        from fuseview.commands._plain_svg import layout_svg

        write_text_atomic(out, layout_svg(lay, scale))
        t3 = t4 = time.perf_counter()
        image = {"width": round((lay.width + 6) * scale), "height": round((lay.height + 6) * scale),
                 "scale": scale, "drawn_by": "plain svg (Qt cannot start here)"}
        return _figures(model, out, expansion, (t0, t1, t2, t3, t4), doc, lay, image)
    from fuseview.ui.app import ensure_app
    from fuseview.ui.export import render_scene
    from fuseview.ui.graph_scene import GraphScene

    ensure_app()
    scene = GraphScene(doc.graph, lay)
    t3 = time.perf_counter()
    image = render_scene(scene, out, scale=scale)
    t4 = time.perf_counter()
    return _figures(model, out, expansion, (t0, t1, t2, t3, t4), doc, lay, image)


def _check_image_path(path: str) -> Path:
    """The output path if its suffix is .svg or .png and its folder exists (ui.export's rule, no Qt)."""
    from fuseview.errors import FuseviewError

    p = Path(path)
    if p.suffix.lower() not in (".svg", ".png"):
        raise FuseviewError(f"{p}: output must end in .svg or .png")
    if not p.parent.resolve().is_dir():
        raise FuseviewError(f"{p.parent}: no such folder")
    return p


def _figures(model: str, out: Path, expansion: str, t: tuple[float, ...], doc, lay, image: dict) -> dict:
    t0, t1, t2, t3, t4 = t
    return {
        "model": str(model),
        "output": str(out),
        "expansion": expansion,
        "load_s": round(t1 - t0, 4),
        "layout_s": round(t2 - t1, 4),
        "scene_s": round(t3 - t2, 4),
        "draw_s": round(t4 - t2, 4),
        "write_s": round(t4 - t3, 4),
        "nodes": len(doc.graph.visible_nodes()),
        "boxes": len(lay.boxes),
        "routes": len(lay.routes),
        "frames": len(lay.frames),
        "width": image["width"],
        "height": image["height"],
        "scale": round(image["scale"], 5),
        "drawn_by": image.get("drawn_by", "qt"),
    }


def run(args: argparse.Namespace) -> int:
    """Render; with --timings print the figures as JSON."""
    info = render_model(args.model, args.output, args.expansion, args.scale)
    if args.timings:
        print(json.dumps(info))  # the figures alone: one JSON object a script reads
    else:
        print(f"wrote {info['output']} ({info['width']}x{info['height']} px, {info['nodes']} nodes,"
              f" drawn by {info['drawn_by']})")
    return 0
