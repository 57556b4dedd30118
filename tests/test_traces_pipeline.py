"""One traces pipeline (fuseview.workflows.traces): the CLI, the API and the session read a capture folder
the same way and give the same report."""

from __future__ import annotations

import json
import re

import pytest

import fuseview
from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.session import Session
from fuseview.traces.report import report_text
from fuseview.workflows.traces import open_traces, resolve_traces
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
    typed = fuseview.trace(CAPTURE)  # a folder: resolved as `fuseview trace FOLDER` resolves it
    api = typed.to_json()
    assert api == cli and typed.diff is not None and typed.exact_kernels
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
                          provenance=CAPTURE / "torch_trace").to_json() == whole


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
    assert shown is not None and [t.source for t in shown.report.traces] == ["onnxruntime"]
    third = s.open_traces(pair)
    third.cancel()
    assert third.wait(WAIT_S)
    assert seen == ["traces_opened", "traces_cancelled"] and s.traces is shown


CAPTURES = sorted(p for p in (TRACES / "provenance").iterdir() if (p / "eager.json").is_file())
PAIRS = [[TRACES / f"{name}_eager.json", TRACES / f"{name}_compiled.json"]
         for name in ("cos_relu", "attention", "encoder_fastpath")]


@pytest.mark.parametrize("paths", [[c] for c in CAPTURES] + PAIRS + [[TRACES / "ort_mlp.json"]],
                         ids=lambda p: "+".join(x.name for x in p))
def test_the_typed_report_writes_the_text_of_the_raw_report(paths):
    """Typed records over the checked dict: read and written again, the same bytes (`--json` unchanged)."""
    import copy

    from fuseview.reports import TraceReport
    from fuseview.traces.report import build_report
    from fuseview.traces.stats import load_trace
    from fuseview.traces.torch_log import read_compile_log

    inputs = resolve_traces(paths)
    loaded = [load_trace(p) for p in inputs.files]
    after = loaded[1] if len(loaded) == 2 else None
    log = read_compile_log(inputs.provenance, after) if inputs.provenance and after else None
    raw = build_report(loaded[0], after, log)
    typed = TraceReport.from_json(copy.deepcopy(raw))
    assert typed.text() == report_text(raw)
    assert TraceReport.from_json(typed.to_json()) == typed
    if typed.diff is not None:  # typed access: what the CLI and the window read
        assert typed.diff.step_speedup.summary == raw["diff"]["step_speedup"]["summary"]
        assert [k.name for k in typed.diff.fused_kernels] == [k["name"] for k in raw["diff"]["fused_kernels"]]
        assert (len(typed.exact_kernels) > 0) == (log is not None and bool(typed.diff.fused_kernels))


def test_a_version_1_report_reads_and_writes_as_version_2(tmp_path):
    from fuseview.reports import TraceReport
    from fuseview.traces.report import upgrade

    rep = open_traces(PAIRS[0]).report.to_json()
    old = json.loads(json.dumps(rep))
    old["schema_version"] = 1
    del old["provenance_log"], old["diff"]["unclaimed_pre_grad"]
    for t in old["traces"]:
        del t["excluded_steps"]
    for k in old["diff"]["fused_kernels"]:
        del k["attribution"], k["kind"], k["provenance"]
    path = tmp_path / "v1.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    typed = TraceReport.load(path)
    assert typed.schema_version == 2 and all(k.attribution == "name" for k in typed.diff.fused_kernels)
    up = upgrade(json.loads(json.dumps(old)))  # its keys in the order the file writer puts them
    top = ("schema_version", "kind", "traces", "provenance_log", "provenance_choice", "diff")
    assert typed.text() == report_text({k: up[k] for k in top})
