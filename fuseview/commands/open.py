"""`fuseview open [MODEL]`: the window (also what plain `fuseview` and `fuseview MODEL` run)."""

from __future__ import annotations

import argparse

from fuseview.commands._expansion import add_expansion_arguments

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
    p.add_argument(
        "--plan", metavar="PLAN.json", help="load this plan's accept/reject decisions (by candidate id)"
    )
    p.add_argument(
        "--apply",
        action="store_true",
        help="build the fused model and show it beside the original (the plan's accepted candidates, "
        "or all candidates without --plan)",
    )
    p.add_argument(
        "--profile", action="store_true", help="profile the original (and fused) model in the Profile panel"
    )
    add_expansion_arguments(p)


def run(args: argparse.Namespace) -> int:
    """Load the model (bad input: one line, exit 2, no window), then run the window."""
    from fuseview import DEMO_MODEL
    from fuseview.graph.loader import load_document

    doc = load_document(args.model or DEMO_MODEL)  # FuseviewError before any window appears
    if args.plan or args.apply or args.profile:
        from fuseview.ui.headless import run_workbench

        return run_workbench(
            doc, args.plan, args.apply, args.profile, args.screenshot, expansion_mode=args.expansion
        )
    from fuseview.ui.app import run_app

    return run_app(doc=doc, expansion_mode=args.expansion, screenshot=args.screenshot)
