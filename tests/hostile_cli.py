"""Run the real `python -m fuseview` in a fresh process under time and memory limits, and check the promise.

The promise of a refused input: exit code 2, exactly one stderr line starting `fuseview: error:`, no
traceback, nothing written, no input changed and no link replaced (the folder's snapshot is the same).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.hostile_cases import ROOT, snapshot

GiB = 1 << 30


@dataclass
class Run:
    """What one command line did: exit code, output, wall time and peak RSS of its process."""

    code: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mib: float
    timed_out: bool


def env(**extra: str) -> dict[str, str]:
    """The environment of a run: this tree on the path, offscreen Qt, one thread, no debug tracebacks."""
    e = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "OMP_NUM_THREADS": "1"}
    e.pop("FUSEVIEW_DEBUG", None)
    e.update(extra)
    return e


def run_cli(
    argv: list[str],
    cwd: Path,
    timeout_s: float = 60,
    mem_bytes: int = 3 * GiB,
    extra_env: dict[str, str] | None = None,
    stdout=None,
) -> Run:
    """`python -m fuseview ARGV` in cwd, killed at timeout_s, its address space limited to mem_bytes.

    stdout: a file object to give the process as its stdout (default: captured).
    """

    # a small interpreter sets the limit and execs fuseview: no preexec_fn, so the child is spawned without
    # a copy of this (large) test process, whose RSS would otherwise count in the child's peak
    launcher = ("import os, resource, sys; resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]),) * 2);"
                " os.execv(sys.executable, [sys.executable, '-m', 'fuseview', *sys.argv[2:]])")
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-c", launcher, str(mem_bytes), *argv], cwd=cwd, env=env(**(extra_env or {})),
            stdin=subprocess.DEVNULL, stdout=out_f if stdout is None else stdout, stderr=err_f,
        )
        timed_out = False
        while True:  # wait4, not wait: the peak RSS of this process alone
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout_s:
                proc.send_signal(signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                timed_out = True
                break
            time.sleep(0.02)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(1 << 20), err_f.read(1 << 20)
    return Run(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
               round(wall, 2), round(usage.ru_maxrss / 1024, 1), timed_out)


def refusal_problems(run: Run, before: dict, folder: Path, timeout_s: float | None = None) -> list[str]:
    """What broke the promise of a refusal (empty when it held)."""
    problems = []
    if run.timed_out:
        problems.append(f"timed out after {run.seconds} s")
    if run.code != 2:
        problems.append(f"exit {run.code}, not 2")
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    if len(lines) != 1 or not lines[0].startswith("fuseview: error: "):
        problems.append(f"not one error line: {lines[:3]!r}")
    if "Traceback" in run.stderr or "internal error" in run.stderr:
        problems.append("traceback or internal error")
    if any(len(ln) > 600 for ln in lines):
        problems.append("error line longer than 600 characters")
    after = snapshot(folder)
    if after != before:
        changed = sorted(k for k in set(after) | set(before) if after.get(k) != before.get(k))
        problems.append(f"files written or changed: {changed}")
    return problems


def refuse(argv: list[str], folder: Path, *, match: str | None = None, timeout_s: float = 60,
           mem_bytes: int = 3 * GiB, extra_env: dict[str, str] | None = None) -> Run:
    """Run argv in folder and assert the promise of a refusal (and that the line contains match)."""
    before = snapshot(folder)
    run = run_cli(argv, folder, timeout_s, mem_bytes, extra_env)
    problems = refusal_problems(run, before, folder)
    if match is not None and match not in run.stderr:
        problems.append(f"{match!r} not in the error line")
    assert not problems, f"{argv}: {'; '.join(problems)} | stderr {run.stderr[:400]!r}"
    return run
