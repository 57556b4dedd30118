"""Issue 28.1: TORCH_TRACE folders as torch writes them (several logs); the log picked by process and clock.

The folders are real (scripts/make_traces.py --only two_runs one_process): `two_runs` is one TORCH_TRACE
folder set in the environment of two processes that each captured the same MLP block; `one_process` holds
two captures made one after the other in one process (the same pid: only the clocks tell them apart).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.traces.categories import COMPILED
from fuseview.traces.log_choice import clock_seconds
from fuseview.traces.report import build_report
from fuseview.traces.stats import load_trace
from fuseview.traces.torch_log import read_compile_log, read_log_file

PROV = Path(__file__).parent / "data" / "traces" / "provenance"
CASES = [(folder, run) for folder in ("two_runs", "one_process") for run in ("first", "second")]


def _load(folder: str, run: str):
    d = PROV / folder / run
    return load_trace(d / "eager.json"), load_trace(d / "compiled.json")


@pytest.mark.parametrize(("folder", "run"), CASES, ids=[f"{f}-{r}" for f, r in CASES])
def test_each_run_reads_its_own_log_and_attributes_every_kernel(folder, run):
    before, after = _load(folder, run)
    logs = sorted((PROV / folder / "torch_trace").glob("*.log"))
    assert len(logs) == 2
    log = read_compile_log(PROV / folder / "torch_trace", after)
    assert [f for f, _why in log.ignored] == [str(p) for p in logs if str(p) != log.path]
    # the log used is the one written by the trace's process, whose compile ran before the trace
    used = read_log_file(log.path)
    start, end = after.raw.wall_span()
    assert used.pids & after.raw.pids()
    assert clock_seconds(used.first, end) <= start
    other = next(read_log_file(p) for p in logs if str(p) != log.path)
    assert other.pids != used.pids or clock_seconds(other.first, end) > end \
        or clock_seconds(other.last, end) < clock_seconds(used.first, end)
    rep = build_report(before, after, log)
    inductor = {e.name for e in after.events if e.category == COMPILED and "cpp_fused" in e.name}
    exact = {k["name"] for k in rep["diff"]["fused_kernels"] if k["attribution"] == "provenance"}
    assert inductor and inductor <= exact
    assert rep["provenance_choice"]["used"] == log.path


def test_the_two_runs_of_a_folder_use_different_logs():
    for folder in ("two_runs", "one_process"):
        used = {read_compile_log(PROV / folder / "torch_trace", _load(folder, r)[1]).path
                for r in ("first", "second")}
        assert len(used) == 2


def test_cli_names_the_log_used_and_the_one_ignored(capsys):
    d = PROV / "one_process"
    assert main(["trace", str(d / "second" / "eager.json"), str(d / "second" / "compiled.json"),
                 "--provenance", str(d / "torch_trace")]) == 0
    out = capsys.readouterr().out
    assert "provenance: read " in out and "ignored dedicated_log_torch_trace_" in out
    assert "an earlier run" in out
    assert "compiled kernels by Inductor's provenance" in out


def test_no_clock_and_one_pid_is_refused_naming_both_logs(tmp_path, capsys):
    d = PROV / "one_process"
    trace = json.loads((d / "first" / "compiled.json").read_text())
    del trace["baseTimeNanoseconds"]
    (tmp_path / "c.json").write_text(json.dumps(trace))
    rc = main(["trace", str(d / "first" / "eager.json"), str(tmp_path / "c.json"), "--provenance",
               str(d / "torch_trace")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1
    assert "2 TORCH_TRACE logs fit" in err[0] and "no baseTimeNanoseconds" in err[0]
    for log in (d / "torch_trace").glob("*.log"):
        assert log.name in err[0]


def test_no_log_fits_is_refused_with_each_reason(tmp_path):
    # traces of the two_runs folder's first run against the logs of a later capture (another process)
    after = _load("two_runs", "first")[1]
    with pytest.raises(FuseviewError, match="no TORCH_TRACE log fits the compiled trace") as exc:
        read_compile_log(PROV / "one_process" / "torch_trace", after)
    assert str(exc.value).count("a later run") == 2


def test_a_log_with_no_graph_is_ignored_and_one_log_file_is_read_as_given(tmp_path):
    folder = tmp_path / "torch_trace"
    shutil.copytree(PROV / "mlp_block" / "torch_trace", folder)
    # a log holding records but no compiled graph, as a compile worker's or an uncompiled process's
    real = next((PROV / "two_runs" / "torch_trace").glob("*.log")).read_bytes()  # starts with a timing event
    first_record = real.split(b"\nV", 1)[0] + b"\n"
    (folder / "dedicated_log_torch_trace_worker.log").write_bytes(first_record)
    after = load_trace(PROV / "mlp_block" / "compiled.json")
    log = read_compile_log(folder, after)
    assert Path(log.path).name != "dedicated_log_torch_trace_worker.log"
    assert [(Path(f).name, "no compiled graph" in why) for f, why in log.ignored] == [
        ("dedicated_log_torch_trace_worker.log", True)]
    one = read_compile_log(PROV / "one_process" / "torch_trace" / Path(read_compile_log(
        PROV / "one_process" / "torch_trace", _load("one_process", "first")[1]).path).name)
    assert one.ignored == [] and one.graphs
