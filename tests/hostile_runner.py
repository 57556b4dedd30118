"""Run fuseview command lines as separate processes under a time and memory limit, measuring each.

`python -m tests.hostile_runner < cases.json > results.json`: imports fuseview once, then forks one child
per case (a real process: its own exit code, stderr, address-space limit and peak RSS), so hundreds of
cases cost far less than as many fresh interpreters. Cases marked "exec" (the Qt window) exec a fresh
`python -m fuseview` in the child instead of forking a warm interpreter.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

GiB = 1 << 30
ROOT = Path(__file__).resolve().parent.parent


def _child(case: dict, err_path: str, mem_bytes: int) -> None:
    out_path = err_path + ".out"
    try:
        resource.setrlimit(resource.RLIMIT_AS, (mem_bytes, mem_bytes))
        os.chdir(case["cwd"])
        err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, 1)
        os.dup2(err, 2)
        if case.get("exec"):
            os.execv(sys.executable, [sys.executable, "-m", "fuseview", *case["argv"]])
        from fuseview.cli import main

        code = main(case["argv"])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    except SystemExit as exc:  # argparse
        sys.stderr.flush()
        os._exit(exc.code if isinstance(exc.code, int) else 2)
    except BaseException:  # noqa: BLE001 - the harness itself failed: make it visible
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(99)


def run_case(case: dict, timeout_s: float, mem_bytes: int, err_path: str) -> dict:
    """Fork, run one command line, wait (killing at timeout_s); exit code, stderr, seconds, peak RSS."""
    sys.stdout.flush()
    sys.stderr.flush()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(case, err_path, mem_bytes)
    timed_out = False
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() - start > timeout_s:
            os.kill(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            timed_out = True
            break
        time.sleep(0.01)
    wall = time.monotonic() - start
    code = os.waitstatus_to_exitcode(status)
    with open(err_path, encoding="utf-8", errors="replace") as f:
        stderr = f.read(1 << 20)
    with open(err_path + ".out", encoding="utf-8", errors="replace") as f:
        stdout = f.read(1 << 20)
    return {
        "name": case["name"],
        "code": code,
        "stderr": stderr,
        "stdout": stdout,
        "seconds": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),  # unlike wall time, not inflated by load
        "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
        "timed_out": timed_out,
    }


def run_all(cases: list[dict], timeout_s: float, mem_bytes: int, scratch: str) -> list[dict]:
    """run_case for each case, in order."""
    err_path = os.path.join(scratch, f".stderr-{os.getpid()}")
    return [run_case(c, timeout_s, mem_bytes, err_path) for c in cases]


def run_cases(
    cases: list,
    workers: int = 2,
    timeout_s: float = 60,
    mem_bytes: int = 4 * GiB,
    scratch: Path | None = None,
) -> list[dict]:
    """Run the cases in `workers` runner processes (tests/hostile_runner.py); results in case order."""
    import concurrent.futures

    scratch = scratch or cases[0].cwd.parent
    # the window cases are slow (a fresh interpreter and Qt): spread them evenly
    order = sorted(range(len(cases)), key=lambda i: (not cases[i].exec, i))
    batches = [order[k::workers] for k in range(workers)]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop("FUSEVIEW_DEBUG", None)

    def one(batch: list[int]) -> list[dict]:
        spec = {
            "cases": [cases[i].spec() for i in batch],
            "timeout_s": timeout_s,
            "mem_bytes": mem_bytes,
            "scratch": str(scratch),
        }
        proc = subprocess.run(
            [sys.executable, "-m", "tests.hostile_runner"],
            input=json.dumps(spec),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"runner failed: {proc.stderr[-2000:]}")
        return json.loads(proc.stdout)

    results: list[dict | None] = [None] * len(cases)
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        for batch, got in zip(batches, pool.map(one, batches), strict=True):
            for i, r in zip(batch, got, strict=True):
                results[i] = r
    return results  # type: ignore[return-value]


def cleanup(root: Path) -> None:
    """Remove a case tree (FIFOs and sparse files included)."""
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    """Cases (JSON list) on stdin, results (JSON list) on stdout."""
    spec = json.load(sys.stdin)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import fuseview.cli  # noqa: F401 - warm the imports the children share
    import fuseview.commands.fuse  # noqa: F401
    import fuseview.commands.profile  # noqa: F401

    results = run_all(spec["cases"], spec["timeout_s"], int(spec["mem_bytes"]), spec["scratch"])
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
