"""How often `fuseview profile A --against B --budget S` decides right with busy cores beside it: an A/A
(a byte-identical copy: "no difference"), the original against its fused model ("faster") and the
reverse ("slower"), each `--repeats` times, interleaved per repetition; prints the rate of right
verdicts, the wrong ones (a decided verdict that is false: the issue's target is none), the runs and
interval widths, and the load before and after.

    python bench/bench_profile_budget.py [MODEL] [--fused F] [--repeats 7] [--budget 60] [--busy 1]
                                         [--ort-opt disabled] [--threads 1] [--work DIR]

MODEL defaults to tests/data/gpt2/gpt2_12l_ts17.onnx (the narrow GPT-2, 12 layers); without --fused it
is fused first with `fuseview fuse` into --work. Every profile is the CLI in a child process (the
`--json` report read back), so what is counted is what a user gets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WANT = {"A/A": "no difference", "fused vs original": "faster", "reversed": "slower"}


def _profile(a: Path, b: Path, args: argparse.Namespace, out: Path) -> dict:
    """One `fuseview profile a --against b --budget S` in a child process; its comparison.latency."""
    cmd = [sys.executable, "-m", "fuseview", "profile", str(a), "--against", str(b), "--budget",
           f"{args.budget:g}", "--threads", str(args.threads), "--ort-opt", args.ort_opt, "--runs",
           str(args.runs), "--profile-runs", "1", "--json", str(out), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode not in (0, 3) or not out.is_file():
        raise SystemExit(f"profile failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    lat = json.loads(out.read_text())["comparison"]["latency"]
    lat["wall_s"] = time.monotonic() - t0
    out.unlink()
    return lat


def main() -> int:
    """Run the repetitions and print the rates."""
    from tests.load_helpers import busy_loops

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(ROOT / "tests/data/gpt2/gpt2_12l_ts17.onnx"))
    ap.add_argument("--fused", help="the fused model (default: `fuseview fuse MODEL` into --work)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--budget", type=float, default=60.0, help="seconds of each profile's A/B (60)")
    ap.add_argument("--busy", type=int, default=1, help="CPU-bound processes started beside it (1)")
    ap.add_argument("--ort-opt", default="disabled", help="onnxruntime level of the A/B (disabled)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=20, help="runs per model in each batch (20)")
    ap.add_argument("--work", help="folder for the fused model and the copy (default: a temp folder)")
    args = ap.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="bench-budget-"))
    work.mkdir(parents=True, exist_ok=True)
    original = Path(args.model)
    copy = work / f"copy_{original.name}"
    shutil.copyfile(original, copy)
    fused = Path(args.fused) if args.fused else work / f"fused_{original.name}"
    if not fused.is_file():
        subprocess.run([sys.executable, "-m", "fuseview", "fuse", str(original), "-o", str(fused)],
                       check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    pairs = {"A/A": (original, copy), "fused vs original": (original, fused), "reversed": (fused, original)}
    seen: dict[str, Counter] = {k: Counter() for k in WANT}
    widths: dict[str, list[float]] = {k: [] for k in WANT}
    runs: dict[str, list[int]] = {k: [] for k in WANT}
    walls: list[float] = []
    print(f"model {original} vs {fused}; budget {args.budget:g} s, {args.busy} busy loop(s), threads"
          f" {args.threads}, ort-opt {args.ort_opt}, {args.repeats} repeats; load before"
          f" {os.getloadavg()[0]:.1f}", flush=True)
    t0 = time.monotonic()
    with busy_loops(args.busy):
        for i in range(args.repeats):
            for name, (a, b) in pairs.items():
                lat = _profile(a, b, args, work / "r.json")
                seen[name][lat["verdict"]] += 1
                widths[name].append(lat["ci"][1] / lat["ci"][0])
                runs[name].append(lat["runs"])
                walls.append(lat["wall_s"])
                print(f"  {i + 1}/{args.repeats} {name:<17} {lat['verdict']:<13} {lat['speedup_p50']:.3f}"
                      f" [{lat['ci'][0]:.3f}, {lat['ci'][1]:.3f}] {lat['runs']} runs,"
                      f" {lat.get('batches')} batches, {lat['wall_s']:.0f} s", flush=True)
        load = os.getloadavg()[0]
    print(f"load at the end (1-min average): {load:.1f}; {time.monotonic() - t0:.0f} s in all, a profile"
          f" {np.median(walls):.0f} s (median, with its per-node profiles)")
    for name, want in WANT.items():
        right = seen[name][want]
        wrong = sum(n for v, n in seen[name].items() if v not in (want, "cannot tell"))
        print(f"{name:<17} right {right}/{args.repeats}  wrong {wrong}  verdicts {dict(seen[name])}  width"
              f" median {np.median(widths[name]):.3f}  runs median {int(np.median(runs[name]))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
