"""Parse time and peak memory of `fuseview trace` on a synthetic ~100 MB torch.profiler trace.

Writes a Kineto-style trace (ProfilerStep annotations, nested aten ops with args, compiled kernels, flow
events) into a temp folder, then reads and summarises it in a fresh process and prints wall time and
peak RSS. Targets: <= 5 s and <= 1 GB for 100 MB.

    python bench/bench_trace.py [--mb 100] [--compare]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OPS = ["aten::linear", "aten::addmm", "aten::native_layer_norm", "aten::_softmax", "aten::masked_fill",
       "aten::view", "aten::transpose", "aten::gelu", "aten::add", "aten::copy_"]


def synthesise(path: Path, mb: float, compiled: bool = False, seed: int = 0) -> int:
    """Write a trace of about `mb` megabytes; returns the number of events."""
    rng = random.Random(seed)
    target = int(mb * 1e6)
    n = 0
    t = 1_000_000.0
    step = 0
    with open(path, "w") as f:
        f.write('{"schemaVersion": 1, "deviceProperties": [], "traceEvents": [\n')
        written = 0
        sep = ""
        while written < target:
            step += 1
            rows = []
            start = t
            for _ in range(200):
                name = rng.choice(OPS)
                if compiled and rng.random() < 0.5:
                    fused = rng.choice(["add_gelu", "_softmax_masked_fill"])
                    name = f"graph_0_cpp_fused_{fused}_{rng.randrange(9)}"
                dur = rng.uniform(2, 40)
                rows.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 7, "tid": 7, "ts": round(t, 3),
                             "dur": round(dur, 3), "args": {"External id": n, "Sequence number": n,
                                                            "Fwd thread id": 0, "Record function id": 0}})
                rows.append({"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 7, "tid": 7,
                             "ts": round(t + 0.5, 3), "dur": round(dur / 4, 3),
                             "args": {"External id": n + 1}})
                rows.append({"ph": "s", "id": n, "pid": 7, "tid": 7, "ts": round(t, 3), "cat": "ac2g",
                             "name": "ac2g"})
                t += dur + 1
                n += 3
            rows.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 7,
                         "tid": 7, "ts": round(start - 0.1, 3), "dur": round(t - start + 0.2, 3)})
            n += 1
            text = sep + ",\n".join(json.dumps(r) for r in rows)
            sep = ",\n"
            f.write(text)
            written += len(text)
            t += 10
        f.write('\n], "traceName": "synthetic"}\n')
    return n


_CHILD = """
import resource, sys, time
from fuseview.traces.report import build_report
from fuseview.traces.stats import load_trace
w0, c0 = time.perf_counter(), time.process_time()
b = load_trace(sys.argv[1])
w1, c1 = time.perf_counter(), time.process_time()
a = load_trace(sys.argv[2]) if len(sys.argv) > 2 else None
rep = build_report(b, a)
w2 = time.perf_counter()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{w1 - w0:.2f} {c1 - c0:.2f} {w2 - w0:.2f} {rss:.0f} {len(b.raw)} {b.steps}")
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--compare", action="store_true", help="also a second trace and the full comparison")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before.json"
        t0 = time.perf_counter()
        n = synthesise(before, args.mb)
        files = [str(before)]
        if args.compare:
            after = Path(tmp) / "after.json"
            synthesise(after, args.mb, compiled=True, seed=1)
            files.append(str(after))
        print(f"synthesised {before.stat().st_size / 1e6:.0f} MB, {n} events"
              f" ({time.perf_counter() - t0:.1f} s)", flush=True)
        out = subprocess.run([sys.executable, "-c", _CHILD, *files], capture_output=True, text=True,
                             check=True).stdout.split()
        read_s, cpu_s, total_s, rss, events, steps = out
        print(f"read + summarise one trace: {read_s} s wall, {cpu_s} s CPU ({events} timed events,"
              f" {steps} steps; imports not counted)")
        if args.compare:
            print(f"both traces + comparison report: {total_s} s")
        print(f"peak RSS of the reading process: {rss} MB (imports included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
