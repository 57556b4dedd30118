"""How often the one A/B runner's verdicts come out right under added load: an A/A (never faster or
slower), a real speed-up (faster) and its reverse (slower), N repetitions, each with a fixed budget.

    python bench/bench_verdict.py [--repeats 30] [--busy 2] [--budget 6] [--products 2 6]

Starts `--busy` CPU-bound processes beside it (killed at the end) and prints the rate per pair, the
verdicts seen, the runs and interval widths, and the load (os.getloadavg) before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    """Run the repetitions and print the rates."""
    from fuseview.runtime.ab import measure_until_decided
    from tests.load_helpers import busy_loops, matmul_chain

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--busy", type=int, default=2, help="CPU-bound processes started beside it (2)")
    ap.add_argument("--budget", type=float, default=6.0, help="seconds per repetition (6)")
    ap.add_argument("--products", type=int, nargs=2, default=(2, 6), metavar=("LIGHT", "HEAVY"),
                    help="matrix products in the light and the heavy model (2 6)")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    want = {"A/A": ("no difference", "cannot tell"), "speed-up": ("faster",), "reverse": ("slower",)}
    seen: dict[str, Counter] = {k: Counter() for k in want}
    widths: dict[str, list[float]] = {k: [] for k in want}
    runs: list[int] = []
    feeds = {"x": np.random.default_rng(1).standard_normal((64, 192)).astype(np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        light = matmul_chain(Path(tmp) / "light.onnx", args.products[0])
        copy = Path(tmp) / "copy.onnx"
        copy.write_bytes(light.read_bytes())
        heavy = matmul_chain(Path(tmp) / "heavy.onnx", args.products[1])
        print(f"load before: {os.getloadavg()[0]:.1f}; {args.busy} busy loops beside; budget"
              f" {args.budget:g} s a repetition; models: {args.products[0]} vs {args.products[1]} matrix"
              " products (64x192)")
        t0 = time.monotonic()
        with busy_loops(args.busy):
            for i in range(args.repeats):
                models = [str(light), str(copy), str(heavy)]
                seq = measure_until_decided(models, feeds, [(0, 1), (2, 0), (0, 2)], budget_s=args.budget,
                                            provider="cpu", opt_level="all", threads=args.threads,
                                            sessions=3, runs=20, warmup=2, seed=i)
                for name, pair in (("A/A", (0, 1)), ("speed-up", (2, 0)), ("reverse", (0, 2))):
                    est = seq.estimates[pair]
                    seen[name][est.verdict] += 1
                    widths[name].append(est.width)
                runs.append(seq.runs)
            load = os.getloadavg()[0]
    took = time.monotonic() - t0
    print(f"load during (1-min average at the end): {load:.1f}; {took:.0f} s in all")
    for name, ok in want.items():
        right = sum(n for v, n in seen[name].items() if v in ok)
        print(f"{name:<9} right {right}/{args.repeats}  verdicts {dict(seen[name])}"
              f"  interval width (hi/lo) median {np.median(widths[name]):.3f}")
    print(f"runs per model: median {int(np.median(runs))}, min {min(runs)}, max {max(runs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
