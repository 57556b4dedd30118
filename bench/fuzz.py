"""Hostile-input fuzzing over many seeds: every command, each case in its own limited process.

    python bench/fuzz.py --seeds 0-9 --mutants 20 --trace-mutants 20 [--workers 2] [--timeout 120]
                         [--mem-gib 4] [--no-window] [--no-models] [--no-traces] [--api-mutants 30]

Each seed builds the hand-made cases (tests/hostile_cases.py) plus `--mutants` seeded byte-level mutants
of a small MLP model, and the hand-made hostile traces (tests/hostile_trace_cases.py) plus
`--trace-mutants` seeded mutants of a real torch.profiler trace (each read alone and compared with the
eager trace) and as many of a real TORCH_TRACE provenance log (bytes mutated, then half of them with
their payload md5s made right again, read with `--provenance`), and `--api-mutants` seeded hostile calls
of the Python API (tests/hostile_api_cases.py), runs them, and prints the cases, failures, the longest run,
the most CPU time and the peak RSS. Exit 1 when any case broke the promise (wrong exit code, not one line,
a file written or changed, a hang, over its memory or CPU bound).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests import hostile_api_cases as hac  # noqa: E402
from tests import hostile_cases as hc  # noqa: E402
from tests import hostile_trace_cases as htc  # noqa: E402


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def _api_calls(seed: int, args: argparse.Namespace) -> tuple[int, int]:
    """Run the seed's hostile API calls; (calls, broken), each broken one printed."""
    if not args.api_mutants:
        return 0, 0
    broken, slowest = 0, 0.0
    with tempfile.TemporaryDirectory(prefix="fuseview-fuzz-api-") as tmp:
        hac.prepare(Path(tmp))
        calls = hac.build_calls(seed, args.api_mutants)
        outcomes: dict[str, int] = {}
        for call in calls:
            res = hac.run_call(call, Path(tmp), args.timeout, int(args.mem_gib * (1 << 30)))
            outcomes[res["outcome"]] = outcomes.get(res["outcome"], 0) + 1
            slowest = max(slowest, res.get("seconds", 0.0))
            problems = hac.problems(res)
            if problems:
                broken += 1
                print(f"BROKEN seed {seed} api {hac.describe(call)}: {'; '.join(problems)}")
    print(f"seed {seed}: api calls {len(calls)} {outcomes}, longest {slowest} s", flush=True)
    return len(calls), broken


def main() -> int:
    """Run the seeds and print the figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0-4", help="seeds, e.g. 0-9 or 1,5,7 (default 0-4)")
    ap.add_argument("--mutants", type=int, default=20, help="byte-level mutants per seed (default 20)")
    ap.add_argument("--workers", type=int, default=2, help="runner processes (default 2)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per case (default 120)")
    ap.add_argument("--mem-gib", type=float, default=4, help="address-space limit per case (default 4)")
    ap.add_argument("--no-window", action="store_true", help="skip the open --screenshot cases")
    ap.add_argument("--trace-mutants", type=int, default=20, help="trace mutants per seed (default 20)")
    ap.add_argument("--no-models", action="store_true", help="skip the model cases")
    ap.add_argument("--no-traces", action="store_true", help="skip the trace cases")
    ap.add_argument("--api-mutants", type=int, default=30,
                    help="seeded hostile Python API calls per seed, each in a forked child (default 30)")
    args = ap.parse_args()
    total, broken, slowest, biggest, busiest = 0, 0, None, None, None
    t0 = time.monotonic()
    for seed in _seeds(args.seeds):
        with tempfile.TemporaryDirectory(prefix="fuseview-fuzz-") as tmp:
            # the hand-made cases are the same for every seed: run them once
            first = seed == _seeds(args.seeds)[0]
            cases = []
            if not args.no_models:
                cases = hc.build_cases(Path(tmp) / "models", seed=seed, mutant_count=args.mutants,
                                       window=not args.no_window)
                if not first:
                    cases = [c for c in cases if c.name.startswith(("mutant_", "proto_"))]
            if not args.no_traces:
                cases += htc.build_cases(Path(tmp) / "traces", seed=seed, mutant_count=args.trace_mutants,
                                         hand_made=first, fresh=False)
            results = hc.run_cases(cases, workers=args.workers, timeout_s=args.timeout,
                                   mem_bytes=int(args.mem_gib * (1 << 30)), scratch=Path(tmp))
            for case, res in zip(cases, results, strict=True):
                total += 1
                problems = hc.check(case, res) + htc.strict_problems(case, res)
                if problems:
                    broken += 1
                    print(f"BROKEN seed {seed} {case.name}: {'; '.join(problems)} | {res['stderr'][:200]!r}")
                if slowest is None or res["seconds"] > slowest["seconds"]:
                    slowest = res
                if biggest is None or res["peak_rss_mib"] > biggest["peak_rss_mib"]:
                    biggest = res
                if busiest is None or res["cpu_s"] > busiest["cpu_s"]:
                    busiest = res
        api_total, api_broken = _api_calls(seed, args)
        total, broken = total + api_total, broken + api_broken
        print(f"seed {seed}: {len(cases) + api_total} cases, {broken} broken so far", flush=True)
    print(f"cases {total}  broken {broken}  wall {time.monotonic() - t0:.1f} s")
    if slowest and biggest and busiest:
        print(f"longest  {slowest['seconds']} s  ({slowest['name']})")
        print(f"most CPU {busiest['cpu_s']} s  ({busiest['name']})")
        print(f"peak RSS {biggest['peak_rss_mib']} MiB  ({biggest['name']})")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
