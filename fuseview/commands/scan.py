"""`fuseview scan MODEL`: list fusion candidates (and near misses) without changing the model."""

from __future__ import annotations

import argparse
import json

from fuseview.fusion.graphindex import parse_dims
from fuseview.fusion.scan import scan_file

HELP = "list the fusion candidates of a model (never changes it)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `fuseview scan`."""
    p.add_argument("model", help="path to an .onnx file")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    p.add_argument(
        "--dim",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="value of a symbolic input dim for tensor sizes (default batch 1, sequence 128)",
    )
    p.add_argument("--near-misses", action="store_true", help="also list rules that nearly matched, and why")


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def run(args: argparse.Namespace) -> int:
    """Print the candidates."""
    dims = parse_dims(args.dim)
    result = scan_file(args.model, dims)
    if args.json:
        print(json.dumps(result.to_json(), indent=1))
        return 0
    cands = result.candidates
    print(f"model      {args.model}")
    print("dims       " + (", ".join(f"{k}={v}" for k, v in result.index.dims_used.items()) or "-"))
    print(f"candidates {len(cands)}")
    for c in cands:
        where = (c.nodes[-1] if c.nodes else "-") + (f" in {c.scope}" if c.scope else "")
        conflicts = f"  conflicts {len(c.conflicts)}" if c.conflicts else ""
        dom = f"{c.domain}:" if c.domain else ""
        print(
            f"  {c.id:<32} {dom}{c.fused_op:<28} {len(c.nodes):>3} nodes"
            f"  saves {_fmt_bytes(c.saved_bytes):>10}"
            f"  at {where}{conflicts}"
        )
    by_rule: dict[str, int] = {}
    for c in cands:
        by_rule[c.rule] = by_rule.get(c.rule, 0) + 1
    if by_rule:
        print("by rule    " + ", ".join(f"{k} {v}" for k, v in by_rule.items()))
    if args.near_misses:
        print(f"near misses {len(result.near_misses)}")
        for nm in result.near_misses:
            print(f"  {nm.rule:<24} {nm.nodes[-1] if nm.nodes else '-'}: {nm.reason}")
    elif result.near_misses:
        print(f"near misses {len(result.near_misses)} (--near-misses lists them)")
    for note in result.notes:
        print(f"note       {note}")
    return 0
