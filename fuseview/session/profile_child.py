"""The profile child process: one run_profile, the whole ProfileRequest on stdin, progress as JSON lines.

A separate process, not a thread: onnxruntime holds Python's GIL while it writes its profiling trace (half a
second on a 48-layer GPT-2), which would freeze the window; and Cancel can stop a process at once.
stdin: {"out": report path, "request": ProfileRequest.to_json()}. stdout: {"stage", "done", "total"} lines,
then {"report": out} or {"error": message}. No Qt here.
"""

from __future__ import annotations

import json
import sys
import time

from fuseview.errors import FuseviewError
from fuseview.reports import ProfileReport
from fuseview.runtime.job import ProfileRequest
from fuseview.targets.local import LocalTarget

MODULE = "fuseview.session.profile_child"


def child_input(request: ProfileRequest, out: str) -> bytes:
    """What the child reads on stdin: the whole request and where to write the report."""
    return json.dumps({"out": out, "request": request.to_json()}).encode()


def _say(**msg: object) -> None:
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def main() -> int:
    """Read the request, profile, write the report to its out path; exit 2 with an error line on bad input."""
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] > 0.05 or done == total:  # a few lines a second are enough for a progress bar
            last[0] = now
            _say(stage=stage, done=done, total=total)

    try:
        spec = json.loads(sys.stdin.read())
        if not isinstance(spec, dict) or not isinstance(spec.get("request"), dict) or "out" not in spec:
            raise FuseviewError("profile child: the input is not {out, request}")
        req = ProfileRequest.from_json(spec["request"])
        # stamped as `fuseview profile` stamps it: this machine's fingerprint, the local target
        ProfileReport.from_json(LocalTarget().profile(req, progress)).save(spec["out"])
    except (FuseviewError, json.JSONDecodeError) as exc:
        _say(error=str(exc))
        return 2
    _say(report=spec["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
