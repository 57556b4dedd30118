"""Scan time of every shared GPT-2 export (target: gpt2_48l_ts13 in <= 1 s on 2 cores).

    python bench/bench_scan.py [MODEL ...] [--repeat N]

Prints load and scan time (best and median of N, after one warm-up that also builds the rule catalogue),
the candidates per rule and the number of near misses.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import time
from pathlib import Path

from fuseview.fusion.rules import catalogue
from fuseview.fusion.scan import load_model, scan_model

SHARED = Path(__file__).resolve().parent.parent.parent / "shared" / "models"


def main() -> None:
    """Print scan figures for each model."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    models = args.models or sorted(SHARED.glob("*.onnx"))
    t = time.perf_counter()
    rules = catalogue()
    print(
        f"catalogue  {len(rules)} rules, {sum(len(r.compiled) for r in rules)} patterns, "
        f"built in {time.perf_counter() - t:.2f} s"
    )
    for path in models:
        t = time.perf_counter()
        model = load_model(path)
        t_load = time.perf_counter() - t
        scan_model(model)  # warm-up
        times = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            result = scan_model(model)
            times.append(time.perf_counter() - t)
        by_rule = collections.Counter(c.rule for c in result.candidates)
        print(
            f"{path.name:<24} {len(model.graph.node):>6} nodes  load {t_load:.2f} s"
            f"  scan best {min(times):.2f} s"
            f"  median {statistics.median(times):.2f} s  {len(result.candidates)} candidates"
            f"  {len(result.near_misses)} near misses"
        )
        print("    " + ", ".join(f"{k} {v}" for k, v in by_rule.items()))


if __name__ == "__main__":
    main()
