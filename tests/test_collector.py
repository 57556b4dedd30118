"""fuseview.collector: the cyclic garbage collector is held off inside, and left as it was after."""

from __future__ import annotations

import gc
import threading
from pathlib import Path

import pytest

from fuseview import collector

DEMO = Path(__file__).resolve().parent.parent / "fuseview" / "data" / "demo_gpt2_2l.onnx"


@pytest.fixture(autouse=True)
def _collector_on():
    gc.enable()
    yield
    gc.enable()


def test_nested_holders_resume_once_at_the_outermost():
    with collector.paused():
        assert not gc.isenabled()
        with collector.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner holder leaving does not resume it
    assert gc.isenabled()


def test_a_collector_switched_off_stays_off():
    gc.disable()
    with collector.paused():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_resumes_after_an_error():
    with pytest.raises(ValueError), collector.paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_overlapping_threads_resume_when_the_last_leaves():
    inside, release = threading.Event(), threading.Event()

    def hold() -> None:
        with collector.paused():
            inside.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert inside.wait(10)
    with collector.paused():
        pass
    assert not gc.isenabled()  # the other thread still holds it
    release.set()
    t.join(10)
    assert gc.isenabled()


def test_a_scan_and_the_scan_command_leave_the_collector_on(capsys):
    from fuseview.cli import main
    from fuseview.fusion.scan import scan_file

    assert scan_file(DEMO).candidates
    assert gc.isenabled()
    assert main(["scan", str(DEMO)]) == 0
    assert "candidates" in capsys.readouterr().out
    assert gc.isenabled()


_THREADS_AFTER = """
import os, sys
from fuseview.cli import main
code = main([sys.argv[1], sys.argv[2]])
import numpy  # imported by the command already
print(os.environ.get("OPENBLAS_NUM_THREADS"), len(os.listdir("/proc/self/task")), code)
"""


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("command", ["scan", "info"])
def test_scan_and_info_start_no_blas_threads_unless_the_user_asks(command, tmp_path):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    env["PYTHONPATH"] = str(root)
    script = tmp_path / "child.py"
    script.write_text(_THREADS_AFTER)

    def run(extra: dict[str, str]) -> list[str]:
        out = subprocess.run([sys.executable, str(script), command, str(DEMO)], env=env | extra,
                             capture_output=True, text=True, timeout=120, check=True).stdout
        return out.strip().splitlines()[-1].split()

    assert run({}) == ["1", "1", "0"]  # one thread: the interpreter's own
    setting, threads, code = run({"OPENBLAS_NUM_THREADS": "2"})
    assert (setting, code) == ("2", "0") and int(threads) == 2  # the user's count is kept: numpy's pool
