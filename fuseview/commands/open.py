"""`fuseview open [MODEL]`: the window (also what plain `fuseview` and `fuseview MODEL` run)."""

from __future__ import annotations

import argparse

HELP = "open a model in the graph viewer window (no MODEL: the bundled GPT-2 demo)"
NAME = "open"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview open`."""
    p.add_argument("model", nargs="?", help="path to an .onnx file (default: the bundled demo model)")
    p.add_argument(
        "--screenshot",
        metavar="OUT.png",
        help="wait for the graph to be drawn, save a picture of the window and exit",
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--flat",
        action="store_const",
        dest="expansion",
        const="flat",
        help="show every node (no name-scope groups)",
    )
    group.add_argument(
        "--collapsed",
        action="store_const",
        dest="expansion",
        const="collapsed",
        help="start with name-scope groups collapsed",
    )
    p.set_defaults(expansion="auto")


def run(args: argparse.Namespace) -> int:
    """Load the model (bad input: one line, exit 2, no window), then run the window."""
    from fuseview import DEMO_MODEL
    from fuseview.graph.loader import load_document

    doc = load_document(args.model or DEMO_MODEL)  # FuseviewError before any window appears
    from fuseview.ui.app import run_app

    return run_app(doc=doc, expansion_mode=args.expansion, screenshot=args.screenshot)
