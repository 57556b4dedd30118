"""Time and peak memory of reading a ~100 MB compiled trace plus its provenance log, and the exact join.

The trace is the committed real capture tests/data/traces/provenance/CASE/compiled.json with its steps
repeated (timestamps shifted, every event kept as recorded) until it reaches --mb; the TORCH_TRACE log
is the capture's own, repeated --log-copies times as further compiled frames (so the log is large too);
the eager trace is the capture's. A fresh process reads all three, builds the report with provenance
attribution and prints wall and CPU seconds and its peak RSS. Targets: <= 3 s and <= 400 MB.

    python bench/bench_trace_read.py [--mb 100] [--case gpt2_block] [--log-copies 200]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "tests" / "data" / "traces" / "provenance"
_FRAME = re.compile(r'"frame_id": (\d+)')


def grow_trace(src: Path, out: Path, mb: float) -> tuple[int, int]:
    """Repeat the source trace's steps until out is about mb megabytes; returns (events, steps)."""
    trace = json.loads(src.read_text())
    events = [e for e in trace["traceEvents"] if e.get("ph") in ("X", "s", "f")]
    steps = [e for e in events if e.get("name", "").startswith("ProfilerStep#")]
    t0 = min(float(e["ts"]) for e in steps)
    t1 = max(float(e["ts"]) + float(e["dur"]) for e in steps)
    body = [e for e in events if t0 <= float(e["ts"]) <= t1]
    span = t1 - t0 + 10.0
    target = int(mb * 1e6)
    n = written = rep = 0
    with open(out, "w") as f:
        f.write('{"schemaVersion": 1, "traceEvents": [\n')
        sep = ""
        while written < target:
            chunk = []
            for e in body:
                e2 = dict(e, ts=round(float(e["ts"]) + rep * span, 3))
                if e2.get("name", "").startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{rep * len(steps) + int(e['name'][13:])}"
                chunk.append(json.dumps(e2, separators=(",", ":")))
            text = sep + ",\n".join(chunk)
            sep = ",\n"
            f.write(text)
            written += len(text)
            n += len(chunk)
            rep += 1
        f.write('\n], "traceName": "bench"}\n')
    return n, rep * len(steps)


def grow_log(src_dir: Path, out_dir: Path, copies: int) -> int:
    """The capture's log, then copies-1 more of it as other frames (frame_id shifted); returns bytes."""
    text = "".join(p.read_text() for p in sorted(src_dir.glob("*.log")))
    frames = {int(m) for m in _FRAME.findall(text)}
    step = max(frames, default=0) + 1
    out_dir.mkdir()
    with open(out_dir / "dedicated_log_torch_trace_bench.log", "w") as f:
        for c in range(copies):
            f.write(_FRAME.sub(lambda m, c=c: f'"frame_id": {int(m.group(1)) + c * step}', text))
    return (out_dir / "dedicated_log_torch_trace_bench.log").stat().st_size


_CHILD = """
import resource, sys, time
w0, c0 = time.perf_counter(), time.process_time()
from fuseview.traces.report import build_report
from fuseview.traces.stats import load_trace
from fuseview.traces.torch_log import read_compile_log
w_imp = time.perf_counter() - w0
w0, c0 = time.perf_counter(), time.process_time()
after = load_trace(sys.argv[1])
w1, c1 = time.perf_counter(), time.process_time()
log = read_compile_log(sys.argv[2])
w2, c2 = time.perf_counter(), time.process_time()
rep = build_report(load_trace(sys.argv[3]), after, log)
w3, c3 = time.perf_counter(), time.process_time()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
exact = sum(k["attribution"] == "provenance" for k in rep["diff"]["fused_kernels"])
print(w1 - w0, c1 - c0, w2 - w1, c2 - c1, w3 - w2, c3 - c2, w3 - w0, c3 - c0, rss, len(after.raw),
      after.steps, len(log.graphs), exact, w_imp)
"""


# the floor: the standard library's json.load of the same file, in its own process (its RSS is not ours)
_FLOOR = """
import json, sys, time
c0 = time.process_time()
with open(sys.argv[1], "rb") as f:
    json.load(f)
print(time.process_time() - c0)
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--case", default="gpt2_block")
    ap.add_argument("--log-copies", type=int, default=200)
    args = ap.parse_args(argv)
    src = CAPTURES / args.case
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        trace = Path(tmp) / "compiled.json"
        events, steps = grow_trace(src / "compiled.json", trace, args.mb)
        log_bytes = grow_log(src / "torch_trace", Path(tmp) / "torch_trace", args.log_copies)
        print(f"made {trace.stat().st_size / 1e6:.0f} MB trace ({events} events, {steps} steps) and a"
              f" {log_bytes / 1e6:.1f} MB provenance log in {time.perf_counter() - t0:.1f} s", flush=True)
        out = subprocess.run([sys.executable, "-c", _CHILD, str(trace), str(Path(tmp) / "torch_trace"),
                              str(src / "eager.json")], capture_output=True, text=True, check=True).stdout
        v = [float(x) for x in out.split()]
        print(f"read trace: {v[0]:.2f} s wall, {v[1]:.2f} s CPU ({int(v[9])} timed events, {int(v[10])}"
              " steps)")
        print(f"read provenance log: {v[2]:.2f} s wall, {v[3]:.2f} s CPU ({int(v[11])} compiled graphs)")
        print(f"eager trace + report with exact attribution: {v[4]:.2f} s wall, {v[5]:.2f} s CPU"
              f" ({int(v[12])} kernels by provenance)")
        print(f"total: {v[6]:.2f} s wall, {v[7]:.2f} s CPU (target <= 3 s; imports {v[13]:.2f} s not"
              " counted)")
        print(f"peak RSS of the reading process: {v[8]:.0f} MB (imports included; target <= 400 MB)")
        floor = float(subprocess.run([sys.executable, "-c", _FLOOR, str(trace)], capture_output=True,
                                     text=True, check=True).stdout)
        print(f"for scale: json.load of the trace alone takes {floor:.2f} s CPU (and the whole file in"
              " memory); reading it here costs {:.2f}x that".format(v[1] / floor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
