"""`fuseview open [MODEL]`: the window (also what plain `fuseview` and `fuseview MODEL` run)."""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

from fuseview.commands._expansion import add_expansion_arguments
from fuseview.errors import FuseviewError

HELP = "open a model in the graph viewer window (no MODEL: the bundled GPT-2 demo)"
NAME = "open"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview open`."""
    p.add_argument("model", nargs="?", help="path to an .onnx file (default: the bundled demo model)")
    p.add_argument(
        "--screenshot",
        metavar="OUT.png",
        help="wait for the work the picture shows (load, layout, scan, onnxruntime check; --apply, "
        "--profile), save a picture of the window and exit",
    )
    p.add_argument(
        "--size",
        metavar="WxH",
        type=parse_size,
        help="window size in pixels, e.g. 1400x900 (default: the screen's; 1400x900 without a real screen)",
    )
    p.add_argument(
        "--plan", metavar="PLAN.json", help="load this plan's accept/reject decisions (by candidate id)"
    )
    for flag, text in (("--apply", "build the fused model and show it beside the original (the plan's"
                                   " accepted candidates, or all candidates without --plan)"),
                       ("--profile", "profile the original (and fused) model in the Profile panel")):
        p.add_argument(flag, action="store_true", help=text)
    p.add_argument(
        "--tab",
        metavar="NAME",
        help="with --screenshot: what the picture shows: graphs, tune, or a Profile tab (Op types, Slowest "
        "nodes, Fusions, Outputs, Roofline; needs --profile); a capture folder: a trace workspace tab",
    )
    p.add_argument(
        "--tune", metavar="SECONDS", type=float,
        help="tune the model (Fusion → Tune…, 1 thread, this budget) after its scan; with --apply, apply "
        "the chosen set",
    )
    p.add_argument("--provider", choices=("auto", "cpu", "cuda"),
                   help="the provider the scan offers fused ops for (the candidates dock's Fuse for;"
                   " without it every fused op is offered)")
    p.add_argument("--float16", action="store_true",
                   help="show, scan and fuse the model's float16 conversion (I/O types kept), as fuse"
                   " --float16 does (the candidates dock's float16 box)")
    add_expansion_arguments(p)


def parse_size(text: str) -> tuple[int, int]:
    """WxH (e.g. 1400x900) as (width, height); each between 320 and 10000 pixels."""
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected WIDTHxHEIGHT, e.g. 1400x900")
    w, h = (int(p) for p in parts)
    if not (320 <= w <= 10_000 and 320 <= h <= 10_000):
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be 320 to 10000 pixels")
    return w, h


def _check_openable(path: Path) -> None:
    """The cheap checks before a window appears: a missing, folder or empty path is one line, exit 2."""
    if not path.exists():
        raise FuseviewError(f"{path}: no such file")
    if path.is_dir():
        raise FuseviewError(f"{path}: is a folder, not an ONNX file")
    if path.stat().st_size == 0:
        raise FuseviewError(f"{path}: file is empty")


def run(args: argparse.Namespace) -> int:
    """Run the window on a model: at once, loading with a progress bar (unattended runs load first)."""
    from fuseview import DEMO_MODEL
    from fuseview.qt_libs import check_display, check_qt_libraries, check_qt_platform, has_display

    path = Path(args.model) if args.model else DEMO_MODEL
    if path.is_dir():  # a capture folder (eager.json, compiled.json, torch_trace/): the trace workspace
        from fuseview.commands._trace_window import run_window

        return run_window([str(path)], None, None, args.screenshot, args.size, args.tab)
    _check_openable(path)
    if args.screenshot:
        if not has_display():
            os.environ["QT_QPA_PLATFORM"] = "offscreen"  # a picture needs no display
        check_qt_libraries("--screenshot", other="or draw the graph without Qt: `fuseview render M -o g.svg`")
    else:
        check_display()  # at once: no invisible window that never returns (over SSH it looks hung)
        check_qt_platform()  # before Qt starts: a missing X11 library is one line with the apt command
    if args.tune is not None and not (args.tune > 0 and math.isfinite(args.tune)):
        raise FuseviewError(f"--tune {args.tune}: the budget must be a finite number of seconds over 0")
    fusion = {"provider": args.provider or "any", "float16": args.float16}
    if not (args.plan or args.apply or args.profile or args.screenshot or args.tab or args.tune):
        from fuseview.ui.app import run_app

        # the window and its progress bar appear before the model is read (a 48-layer model takes seconds);
        # a model that fails to load is a dialog in that window, which stays usable
        kw: dict = {"size": args.size} if args.size else {}
        if args.provider or args.float16:
            kw["fusion"] = fusion
        return run_app(path=str(path), expansion_mode=args.expansion, end_process=True, **kw)
    from fuseview.graph.loader import load_document

    doc = load_document(path)  # FuseviewError before any window appears
    from fuseview.ui.headless import run_workbench

    # a plain screenshot waits for the scan and the onnxruntime check as --apply/--profile ones do
    return run_workbench(
        doc, args.plan, args.apply, args.profile, args.screenshot, expansion_mode=args.expansion,
        size=args.size, tab=args.tab, tune=args.tune, fusion=fusion,
    )
