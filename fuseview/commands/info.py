"""`fuseview info MODEL`: what the model is, in a few lines or one JSON object."""

from __future__ import annotations

import argparse
import json

HELP = "print a model's opsets, producer, node count, op histogram, inputs and outputs"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview info`."""
    p.add_argument("model", help="path to an .onnx file")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def model_info(path: str) -> dict:
    """Summary facts of a model as a JSON-ready dict."""
    from fuseview.graph.loader import load_document

    doc = load_document(path)
    g = doc.graph

    def sig(names: list[str]) -> list[dict]:
        return [
            {"name": n, "dtype": g.tensors[n].dtype, "shape": list(g.tensors[n].shape or [])}
            if n in g.tensors
            else {"name": n, "dtype": None, "shape": None}
            for n in names
        ]

    return {
        "model": str(doc.path),
        "ir_version": doc.ir_version,
        "opsets": doc.opsets,
        "producer": doc.producer,
        "nodes": g.node_counts()[0],
        "visible_nodes": g.node_counts()[1],
        "initializers": sum(1 for t in g.tensors.values() if t.kind == "initializer"),
        "functions": sorted(doc.functions),
        "ops": doc.op_histogram(),
        "inputs": sig(g.inputs),
        "outputs": sig(g.outputs),
        "warnings": doc.warnings,
    }


def run(args: argparse.Namespace) -> int:
    """Print the model summary."""
    info = model_info(args.model)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"model      {info['model']}")
    print(f"producer   {info['producer'] or '-'}   ir {info['ir_version']}")
    print("opsets     " + ", ".join(f"{d or 'ai.onnx'} {v}" for d, v in info["opsets"].items()))
    print(f"nodes      {info['nodes']} ({info['visible_nodes']} drawn, constants folded)")
    print(f"weights    {info['initializers']} initializers")
    for label in ("inputs", "outputs"):
        for s in info[label]:
            shape = "[" + ", ".join(str(d) for d in s["shape"]) + "]" if s["shape"] is not None else "?"
            print(f"{label[:-1]:<10} {s['name']}: {s['dtype']} {shape}")
    print("ops        " + ", ".join(f"{k} {v}" for k, v in info["ops"].items()))
    for w in info["warnings"]:
        print(f"warning    {w}")
    return 0
