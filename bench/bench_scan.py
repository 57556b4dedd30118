"""Scan time of every shared GPT-2 export (target: gpt2_48l_ts13 in <= 1 s on 2 cores).

    python bench/bench_scan.py [MODEL ...] [--repeat N]
    python bench/bench_scan.py MODEL --cli [--repeat N]

Prints load and scan time (best and median of N, after one warm-up that also builds the rule catalogue),
the candidates per rule and the number of near misses. With --cli: `fuseview scan MODEL` as a user runs
it, beyond the command line's own start-up (`fuseview scan --help`), N fresh processes of each
interleaved: median wall and CPU seconds (user+sys) of each, and of the difference (target 0.8 s).
"""

from __future__ import annotations

import argparse
import collections
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from fuseview.fusion.rules import catalogue
from fuseview.fusion.scan import load_model, scan_model

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent.parent / "shared" / "models"


def _run(args: list[str]) -> tuple[float, float]:
    """Wall and CPU (user+sys) seconds of one fresh `python -m fuseview ARGS`."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's imports read cached bytecode
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "fuseview", *args], check=True, capture_output=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def cli(models: list[Path], repeat: int) -> None:
    """Print `fuseview scan MODEL` beyond `fuseview scan --help`, wall and CPU, median of fresh runs."""
    for path in models:
        cases = {"scan --help": ["scan", "--help"], "scan": ["scan", str(path)]}
        for args in cases.values():  # warm the bytecode and file caches
            _run(args)
        got: dict[str, list[tuple[float, float]]] = {k: [] for k in cases}
        for _ in range(repeat):
            for k, args in cases.items():
                got[k].append(_run(args))
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for k, v in got.items()}
        beyond = [w - h for (w, _), (h, _) in zip(got["scan"], got["scan --help"], strict=True)]
        print(f"{path.name}: load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs,"
              f" {repeat} runs each")
        for k, (w, c) in med.items():
            print(f"  fuseview {k:<12} wall {w:.3f} s  cpu {c:.3f} s")
        print(f"  scan beyond start-up: wall {statistics.median(beyond):.3f} s (min {min(beyond):.3f}),"
              f" cpu {med['scan'][1] - med['scan --help'][1]:.3f} s (target 0.8 s)")


def main() -> None:
    """Print scan figures for each model."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cli", action="store_true", help="time `fuseview scan MODEL` beyond the CLI's start-up")
    args = ap.parse_args()
    models = args.models or sorted(SHARED.glob("*.onnx"))
    if args.cli:
        cli(models, args.repeat)
        return
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
