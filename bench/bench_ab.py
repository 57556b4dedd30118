"""A/B verdicts under background load: A/A "no difference", original vs fused "faster", reversed "slower".

Fuses the model with `fuseview fuse` into a temporary folder, copies the original byte for byte, starts a
bounded busy loop in a second process (it stops itself after --load-s seconds at most, and is stopped when
the bench ends), then runs fuseview's profiling job (runtime/job.py: interleaved plain runs, the
comparison.latency verdict) --repeat times for each pair and prints every verdict and interval.
Run from the repo root:
    python bench/bench_ab.py [MODEL] [--runs 150] [--repeat 5] [--threads 1] [--load-s 600]
"""

from __future__ import annotations

import argparse
import multiprocessing
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fuseview.runtime.job import ProfileRequest, run_profile  # noqa: E402
from fuseview.runtime.report import speedup_text  # noqa: E402

DEFAULT = Path(__file__).resolve().parent.parent / "tests" / "data" / "gpt2" / "gpt2_12l_ts17.onnx"


def busy_loop(stop, deadline: float) -> None:
    """Spin on one core until told to stop or the deadline passes (whichever comes first)."""
    x = 0
    while not stop.is_set() and time.monotonic() < deadline:
        for _ in range(100_000):
            x = (x * 31 + 7) % 1_000_003


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(DEFAULT))
    ap.add_argument("--runs", type=int, default=150, help="interleaved plain runs per model")
    ap.add_argument("--profile-runs", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads")
    ap.add_argument("--threshold", type=float, default=0.02)
    ap.add_argument("--load-s", type=float, default=600, help="the busy loop stops itself after this")
    ap.add_argument("--no-load", action="store_true", help="no background busy loop")
    args = ap.parse_args()
    print("command  python " + " ".join(shlex.quote(a) for a in sys.argv))
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as tmp:
        original = Path(args.model)
        copy = Path(tmp) / "copy.onnx"
        fused = Path(tmp) / "fused.onnx"
        shutil.copyfile(original, copy)
        subprocess.run([sys.executable, "-m", "fuseview", "fuse", str(original), "-o", str(fused)],
                       check=True, capture_output=True)
        stop = multiprocessing.Event()
        load = None
        if not args.no_load:
            load = multiprocessing.Process(target=busy_loop, args=(stop, time.monotonic() + args.load_s),
                                           daemon=True)
            load.start()
        print(f"model    {original} (threads {args.threads}, {args.runs} interleaved runs,"
              f" threshold {args.threshold:.0%}, background busy loop: {'off' if load is None else 'on'})")
        pairs = [("A/A (copy)", original, copy, "no difference"),
                 ("original vs fused", original, fused, "faster"),
                 ("fused vs original", fused, original, "slower")]
        ok = 0
        try:
            for name, a, b, want in pairs:
                for rep in range(args.repeat):
                    t0 = time.perf_counter()
                    req = ProfileRequest(model=str(a), against=str(b), provider="cpu", runs=args.runs,
                                         threads=args.threads, threshold=args.threshold,
                                         profile_runs=args.profile_runs, seed=rep)
                    lat = run_profile(req)["comparison"]["latency"]
                    hit = lat["verdict"] == want
                    ok += hit
                    warn = f"  [{lat['noise']['warning']}]" if lat["noise"]["warning"] else ""
                    print(f"{name:<18} #{rep + 1}: {speedup_text(lat)}"
                          f"  -> {'as expected' if hit else 'EXPECTED ' + want}"
                          f"  ({time.perf_counter() - t0:.1f} s){warn}", flush=True)
        finally:
            stop.set()
            if load is not None:
                load.join(timeout=5)
        total = len(pairs) * args.repeat
        print(f"=== {ok}/{total} verdicts as expected")
    return 0 if ok == total else 1


if __name__ == "__main__":
    sys.exit(main())
