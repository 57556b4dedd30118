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

    # A small launcher sets the limit, forks and execs fuseview in the fork. Linux carries the peak RSS
    # across exec and, for a vfork'd child (subprocess's way), that peak is this test process's own: a
    # suite that had grown to 1.2 GB read 1.2 GB for every child. The launcher's fork starts from the
    # launcher's few MB, and the launcher reports that grandchild's peak (wait4) through a pipe.
    launcher = (
        "import os, resource, signal, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (int(sys.argv[1]),) * 2)\n"
        "fd = int(sys.argv[2])\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.close(fd)\n"
        "    os.execv(sys.executable, [sys.executable, '-m', 'fuseview', *sys.argv[3:]])\n"
        "for s in (signal.SIGTERM, signal.SIGINT):\n"
        "    signal.signal(s, lambda n, _f: os.kill(pid, n))\n"
        "_, status, usage = os.wait4(pid, 0)\n"
        "os.write(fd, str(usage.ru_maxrss).encode())\n"
        "code = os.waitstatus_to_exitcode(status)\n"
        "if code < 0:\n"
        "    signal.signal(-code, signal.SIG_DFL)\n"
        "    os.kill(os.getpid(), -code)\n"
        "os._exit(code)\n"
    )
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as out_f, tempfile.TemporaryFile() as err_f:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-c", launcher, str(mem_bytes), str(write_fd), *argv], cwd=cwd,
                env=env(**(extra_env or {})), stdin=subprocess.DEVNULL,
                stdout=out_f if stdout is None else stdout, stderr=err_f, pass_fds=(write_fd,),
                start_new_session=True,  # a timeout kills the launcher and fuseview together
            )
        finally:
            os.close(write_fd)
        timed_out = False
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            timed_out = True
        with os.fdopen(read_fd, "rb") as f:
            peak = f.read(64)
        wall = time.monotonic() - start
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(1 << 20), err_f.read(1 << 20)
    peak_kib = int(peak) if peak.isdigit() else 0
    return Run(proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
               round(wall, 2), round(peak_kib / 1024, 1), timed_out)


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
