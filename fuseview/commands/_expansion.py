"""The --flat / --collapsed choice shared by the commands that draw a graph."""

from __future__ import annotations

import argparse


def add_expansion_arguments(p: argparse.ArgumentParser) -> None:
    """Add --flat | --collapsed (default: auto, grouped by name scope above 400 visible nodes)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--flat",
        action="store_const",
        dest="expansion",
        const="flat",
        help="every node, no name-scope groups",
    )
    group.add_argument(
        "--collapsed",
        action="store_const",
        dest="expansion",
        const="collapsed",
        help="name-scope groups collapsed (default: only graphs of more than 400 visible nodes)",
    )
    p.set_defaults(expansion="auto")
