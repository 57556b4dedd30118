"""The profiling panel's child process: one run_profile, request on stdin, progress as JSON lines on stdout.

A separate process, not a thread: onnxruntime holds Python's GIL while it writes its profiling trace (half a
second on a 48-layer GPT-2), which would freeze the window; and Cancel can stop a process at once.
No Qt here.
"""

from __future__ import annotations

import json
import sys
import time

from fuseview.errors import FuseviewError
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.report import save_report

FIELDS = ("model", "against", "provider", "runs", "warmup", "dims", "ort_opt", "threshold", "profile_runs")


def _say(**msg) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> int:
    """Read {"out": path, model, against, provider, runs, warmup, dims, ort_opt}; write the report to out."""
    spec = json.loads(sys.stdin.read())
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] > 0.05 or done == total:  # a few lines a second are enough for a progress bar
            last[0] = now
            _say(stage=stage, done=done, total=total)

    try:
        req = ProfileRequest(**{k: spec[k] for k in FIELDS if k in spec})
        save_report(run_profile(req, progress), spec["out"])
    except FuseviewError as exc:
        _say(error=str(exc))
        return 2
    _say(report=spec["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
