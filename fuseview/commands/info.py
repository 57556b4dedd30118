"""`fuseview info MODEL`: what the model is, in a few lines or one JSON object."""

from __future__ import annotations

import argparse
import json

HELP = "print a model's opsets, producer, node count, op histogram, inputs and outputs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview info`."""
    p.add_argument("model", help="path to an .onnx file")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def run(args: argparse.Namespace) -> int:
    """Print the model summary."""
    from fuseview import collector

    collector.no_blas_threads()
    with collector.paused():  # onnx's import and the document make many objects and few cycles
        collector.import_onnx_shallow()
        from fuseview.graph.loader import load_document
        from fuseview.reports import InfoReport

        info = InfoReport.of(load_document(args.model, inner_dims=False))  # it shows inputs and outputs
    if args.json:
        print(json.dumps(info.to_json(), indent=1))
        return 0
    print("\n".join(info.lines()))
    return 0
