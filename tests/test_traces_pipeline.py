"""One traces pipeline (fuseview.session.traces): the CLI, the API and the session read a capture folder
the same way and give the same report."""

from __future__ import annotations

import json
import re

import pytest

import fuseview
from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.session import Session
from fuseview.session.traces import open_traces, resolve_traces
from fuseview.traces.report import report_text
from tests.conftest import ROOT

TRACES = ROOT / "tests" / "data" / "traces"
CAPTURE = TRACES / "provenance" / "mlp_block_onnx"  # eager.json, compiled.json, torch_trace/, model.onnx
WAIT_S = 60


def test_cli_api_and_session_give_the_same_report_on_a_capture_folder(tmp_path, capsys):
    out = tmp_path / "cli.json"
    assert main(["trace", str(CAPTURE), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "compiled kernels by Inductor's provenance" in printed
    assert "torch.compile beside fuseview" in printed
    cli = json.loads(out.read_text(encoding="utf-8"))
    api = fuseview.trace(CAPTURE)  # a folder: resolved as `fuseview trace FOLDER` resolves it
    assert api == cli
    assert api["provenance_log"] and api["diff"]["fused_kernels"]
    assert all(k["attribution"] == "provenance" for k in api["diff"]["fused_kernels"])
    assert main(["trace", str(CAPTURE), "--json", "-"]) == 0
    assert capsys.readouterr().out == report_text(api)  # `--json -`: the same report, byte for byte

    s = Session()
    seen: list[str] = []
    s.events.traces_opened.connect(lambda e: seen.append(e.type))
    job = s.open_traces([CAPTURE])
    assert job.kind == "traces" and job.wait(WAIT_S)
    assert seen == ["traces_opened"] and s.traces is not None
    assert s.traces.report.to_json() == api
    # what the workspace draws beside the report: the median steps, the post-grad graphs, the ONNX join
    assert [t.role for t in s.traces.timelines] == ["before", "after"]
    assert s.traces.graph_codes and s.traces.join


def test_the_pieces_of_a_capture_folder_give_the_report_of_the_folder():
    whole = open_traces([CAPTURE]).report.to_json()
    parts = open_traces([CAPTURE / "eager.json", CAPTURE / "compiled.json"],
                        provenance=CAPTURE / "torch_trace").report.to_json()
    assert parts == whole
    assert fuseview.trace(CAPTURE / "eager.json", CAPTURE / "compiled.json",
                          provenance=CAPTURE / "torch_trace") == whole


@pytest.mark.parametrize("paths, steps, provenance, message", [
    ([], None, None, "choose one or two traces, not 0"),
    ([CAPTURE / "eager.json"], None, CAPTURE / "torch_trace", "needs the compiled (AFTER) trace"),
    ([CAPTURE / "eager.json"], 0, None, "--steps 0: must be at least 1"),
    ([CAPTURE, CAPTURE / "compiled.json"], None, None, "a capture folder stands for both traces"),
    ([TRACES], None, None, "a folder, but not a capture"),
])
def test_bad_inputs_are_refused_before_reading(paths, steps, provenance, message):
    with pytest.raises(FuseviewError, match=re.escape(message)):
        resolve_traces(paths, steps, provenance)


def test_session_reports_a_failed_read_and_keeps_the_traces_on_show(tmp_path):
    s = Session()
    assert s.open_traces([TRACES / "cos_relu_eager.json"]).wait(WAIT_S)
    shown = s.traces
    assert shown is not None and shown.report.diff is None  # one trace: a summary
    bad = tmp_path / "cut.json"
    bad.write_bytes((TRACES / "cos_relu_eager.json").read_bytes()[:3000])
    errors: list[str] = []
    s.events.traces_failed.connect(lambda e: errors.append(str(e.error)))
    assert s.open_traces([bad]).wait(WAIT_S)
    assert len(errors) == 1 and str(bad) in errors[0] and s.traces is shown


def test_a_cancelled_read_says_so_and_a_superseded_one_does_not():
    s = Session()
    seen: list[str] = []
    for emitter in (s.events.traces_opened, s.events.traces_failed, s.events.traces_cancelled):
        emitter.connect(lambda e: seen.append(e.type))
    pair = [TRACES / "attention_eager.json", TRACES / "attention_compiled.json"]
    first = s.open_traces(pair)
    second = s.open_traces([TRACES / "ort_mlp.json"])
    assert first.cancelled and first.wait(WAIT_S) and second.wait(WAIT_S)
    assert seen == ["traces_opened"] and first.outcome == "cancelled"
    shown = s.traces
    assert shown is not None and [t["source"] for t in shown.report.traces] == ["onnxruntime"]
    third = s.open_traces(pair)
    third.cancel()
    assert third.wait(WAIT_S)
    assert seen == ["traces_opened", "traces_cancelled"] and s.traces is shown
