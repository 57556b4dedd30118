"""Seeded hostile calls of the Python API (fuse, tune, profile, scan, trace), each in a forked child.

The promise of the API: a call returns, or raises FuseviewError with one line; never another exception, a
hang or gigabytes. Each call runs in a fork of a warm interpreter under an address-space limit and a time
limit (bench/fuzz.py --api-mutants, tests/test_hostile_round4.py).
"""

from __future__ import annotations

import os
import pickle
import random
import resource
import signal
import time
from pathlib import Path
from typing import Any

from tests import hostile_cases as hc

# keywords each call takes (CLI spellings and field names), and the quick settings a call starts from
KEYWORDS = {
    "fuse": ["seeds", "seed", "atol", "rtol", "dims", "dim", "inputs", "validate", "no_validate",
             "target_opset", "accept", "reject", "plan"],
    "tune": ["budget", "budget_s", "runs", "sessions", "seeds", "threads", "threshold", "atol", "rtol",
             "provider", "ort_opt", "ort_optimizer", "dims", "dim", "inputs", "warmup", "max_batches",
             "keep_neutral", "progress", "cancel"],
    "profile": ["runs", "warmup", "sessions", "threads", "profile_runs", "threshold", "provider", "ort_opt",
                "attribution_opt", "dims", "inputs", "inputs_npz", "seed", "atol", "rtol", "against"],
    "scan": ["dims"],
    "trace": ["steps", "after"],
}
BASE = {
    "tune": {"budget": 10, "runs": 2, "sessions": 2, "seeds": 1, "ort_optimizer": "off", "threads": 1},
    "profile": {"runs": 2, "warmup": 0, "sessions": 2, "threads": 1},
    "fuse": {"seeds": 1},
}
VALUES: list[Any] = [
    10**6, 10**9, 10**18, 2**64, -1, -(10**9), 0, 1, 2, True, False, 1.5, -0.0, float("inf"), float("-inf"),
    float("nan"), 1e308, "5", "", "x" * 10_000, "\x00", "-", None, [], [1], ["a=b"], {"x": 0}, {"x": 2**40},
    {"": 1}, {1: 1}, b"bytes", object(), Path("/"), Path("/dev/zero"), "m.onnx", "auto", "cuda", "all", "max",
]


def build_calls(seed: int, count: int) -> list[tuple[str, tuple, dict]]:
    """`count` seeded calls: a function, its positional arguments, and keywords with one or two bent."""
    rng = random.Random(seed)
    calls = []
    for _ in range(count):
        fn = rng.choice(sorted(KEYWORDS))
        kwargs = dict(BASE.get(fn, {}))
        for key in rng.sample(KEYWORDS[fn], k=min(2, len(KEYWORDS[fn]))):
            kwargs[key] = rng.choice(VALUES)
        if rng.random() < 0.1:
            kwargs["no_such_option"] = 1
        first: Any = "t.json" if fn == "trace" else "m.onnx"
        if rng.random() < 0.15:
            first = rng.choice(VALUES)
        calls.append((fn, (first,), kwargs))
    return calls


def prepare(folder: Path) -> None:
    """The files the calls name: a small MLP model and a one-event trace."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "m.onnx").write_bytes(hc.mlp().SerializeToString())
    (folder / "t.json").write_text('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm",'
                                   ' "ts": 1, "dur": 2, "pid": 1, "tid": 1}]}')


def describe(call: tuple[str, tuple, dict]) -> str:
    """The call as one short line."""
    fn, args, kwargs = call
    shown = [repr(a)[:40] for a in args] + [f"{k}={repr(v)[:40]}" for k, v in kwargs.items()]
    return f"{fn}({', '.join(shown)})"


def run_call(call: tuple[str, tuple, dict], folder: Path, timeout_s: float, mem_bytes: int) -> dict:
    """Fork, make the call in the child, wait (killing at timeout_s): outcome, exception type, message."""
    read_fd, write_fd = os.pipe()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: no return from here
        os.close(read_fd)
        result: dict = {"outcome": "returned"}
        try:
            resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
            os.chdir(folder)
            import fuseview
            from fuseview.errors import FuseviewError

            fn, args, kwargs = call
            try:
                getattr(fuseview, fn)(*args, **kwargs)
            except FuseviewError as exc:
                result = {"outcome": "refused", "type": type(exc).__name__, "message": str(exc)}
        except BaseException as exc:  # noqa: BLE001 - what the promise forbids, reported to the parent
            result = {"outcome": "other", "type": type(exc).__name__, "message": str(exc)[:300]}
        with os.fdopen(write_fd, "wb") as f:
            f.write(pickle.dumps(result))
        os._exit(0)
    os.close(write_fd)
    deadline = start + timeout_s
    status = None
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = st
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read_fd)
            return {"outcome": "timeout", "seconds": timeout_s}
        else:
            time.sleep(0.02)
    with os.fdopen(read_fd, "rb") as f:
        data = f.read()
    result = pickle.loads(data) if data else {"outcome": "crashed", "status": status}
    result["seconds"] = round(time.monotonic() - start, 2)
    return result


def problems(result: dict) -> list[str]:
    """What broke the API's promise (empty when it held)."""
    if result["outcome"] == "returned":
        return []
    if result["outcome"] != "refused":
        return [f"{result['outcome']}: {result.get('type', '')} {result.get('message', '')}"[:300]]
    message = result["message"]
    if "\n" in message or len(message) > 2000:
        return ["the FuseviewError is not one line"]
    return []
