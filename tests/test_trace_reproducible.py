"""Every number shown is reproducible: a trace report does not depend on Python's hash seed (set order
once changed the order of tied events and the last digit of summed times)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

TRACES = ROOT / "tests" / "data" / "traces"


@pytest.mark.parametrize("case", ["provenance/op_attention", "provenance/gpt2_block", "provenance_cuda"])
def test_a_trace_report_is_the_same_under_any_hash_seed(case: str) -> None:
    outputs = []
    for seed in ("1", "7"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run([sys.executable, "-m", "fuseview", "trace", str(TRACES / case), "--json", "-"],
                             capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout)
    assert outputs[0] == outputs[1]
