"""fuseview.traces on real torch.profiler and onnxruntime traces: reading, steps, statistics, attribution."""

from __future__ import annotations

import json

import pytest

from fuseview.errors import FuseviewError
from fuseview.traces import reader
from fuseview.traces.categories import COMPILED, KERNEL, MEMORY, OP, OVERHEAD, category
from fuseview.traces.kernels import attribute, fused_part, segment
from fuseview.traces.reader import read_trace
from fuseview.traces.report import build_report, load_report, save_report, validate_report
from fuseview.traces.stats import MODEL_RUNS, PROFILER_STEPS, WHOLE, load_trace
from tests.conftest import ROOT

TRACES = ROOT / "tests" / "data" / "traces"
CASES = ("cos_relu", "linear_add", "mlp_layernorm", "attention")


def pair(case: str):
    return load_trace(TRACES / f"{case}_eager.json"), load_trace(TRACES / f"{case}_compiled.json")


def plain_events(path):
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


@pytest.mark.parametrize("case", CASES)
def test_totals_match_a_plain_json_read(case):
    for path in (TRACES / f"{case}_eager.json", TRACES / f"{case}_compiled.json"):
        stats = load_trace(path)
        events = plain_events(path)
        steps = [e for e in events if e["name"].startswith("ProfilerStep#")]
        assert stats.step_kind == PROFILER_STEPS and stats.steps == len(steps) == 12
        assert sorted(stats.step_us) == sorted(e["dur"] for e in steps)
        first = min(e["ts"] for e in steps)
        for ev in stats.events:
            mine = [e["dur"] for e in events if e["name"] == ev.name and e["ts"] >= first]
            assert ev.count == len(mine)
            assert ev.total_us == pytest.approx(sum(mine))
            assert 0 <= ev.self_us <= ev.total_us + 1e-6


def test_self_time_subtracts_children():
    before = load_trace(TRACES / "cos_relu_eager.json").by_name()
    # aten::relu calls aten::clamp_min: relu's self time is what is left of it
    relu, clamp = before["aten::relu"], before["aten::clamp_min"]
    assert relu.self_us == pytest.approx(relu.total_us - clamp.total_us)
    assert relu.self_us < 0.5 * relu.total_us


def test_last_steps_only():
    full = load_trace(TRACES / "cos_relu_eager.json")
    last = load_trace(TRACES / "cos_relu_eager.json", last_steps=4)
    assert last.steps == 4 and last.step_us == full.step_us[-4:]
    assert last.by_name()["aten::cos"].count == 4


def test_inductor_names_are_segmented_by_known_op_names():
    known = frozenset({"_softmax", "div", "masked_fill", "masked_fill_", "view", "native_layer_norm",
                       "layer_norm", "cos", "relu"})
    assert fused_part("graph_3_cpp_fused__softmax_div_masked_fill_view_1") == "_softmax_div_masked_fill_view"
    assert segment("_softmax_div_masked_fill_view", known) == ["_softmax", "div", "masked_fill", "view"]
    assert segment("native_layer_norm", known) == ["native_layer_norm"]
    assert fused_part("triton_red_fused_native_layer_norm_7") == "native_layer_norm"
    assert fused_part("triton_per_fused_cos_relu") == "cos_relu"
    assert fused_part("aten::cos") is None
    # a piece the before trace does not have stays, marked by not being matched
    assert segment("cos_mystery_op_relu", frozenset({"cos", "relu"})) == ["cos", "mystery", "op", "relu"]


@pytest.mark.parametrize("case", CASES)
def test_every_compiled_kernel_is_attributed_to_before_ops(case):
    before, after = pair(case)
    kernels = attribute(before, after)
    compiled = [e for e in after.events if e.category == COMPILED]
    assert compiled and len(kernels) == len(compiled)
    names = set(before.by_name())
    for k in kernels:
        assert k.matched_before and set(k.matched_before) <= names
        assert k.time_us > 0 and k.replaced_us > 0


def test_cos_relu_kernel_replaces_cos_and_relu():
    before, after = pair("cos_relu")
    (k,) = attribute(before, after)
    assert k.fused_ops == ["cos", "relu"] and k.matched_before == ["aten::cos", "aten::relu"]
    assert k.replaced_from == "host"
    b = before.by_name()
    # relu encloses clamp_min, which is not counted twice
    expected = (b["aten::cos"].total_us + b["aten::relu"].total_us) / before.steps
    assert k.replaced_us == pytest.approx(expected)


def test_attention_softmax_kernel_matches_underscored_names():
    before, after = pair("attention")
    k = next(k for k in attribute(before, after) if "_softmax" in k.name)
    assert "aten::_softmax" in k.matched_before and "aten::masked_fill" in k.matched_before
    assert "aten::masked_fill_" not in k.matched_before


def test_fast_path_module_says_compile_fused_nothing():
    before, after = pair("encoder_fastpath")
    rep = build_report(before, after)
    assert rep["diff"]["fused_kernels"] == []
    assert rep["diff"]["note"].startswith("compile fused nothing")


def test_report_round_trip_and_validation(tmp_path):
    before, after = pair("mlp_layernorm")
    rep = build_report(before, after)
    out = save_report(rep, tmp_path / "r.json")
    back = load_report(out)
    assert back["kind"] == "fuseview.trace_compare" and back["schema_version"] == 2
    assert [t["role"] for t in back["traces"]] == ["before", "after"]
    sp = back["diff"]["step_speedup"]
    b50, a50 = (t["step_us"]["p50"] for t in back["traces"])
    assert sp["speedup_p50"] == pytest.approx(b50 / a50) and sp["paired"] is False
    assert set(back["diff"]["removed"]) >= {"aten::gelu", "aten::native_layer_norm"}
    assert any(n.startswith("graph_") for n in back["diff"]["added"])
    broken = json.loads(out.read_text())
    broken["traces"][0]["events"][0]["category"] = "whatever"
    with pytest.raises(FuseviewError, match="category"):
        validate_report(broken)
    broken = json.loads(out.read_text())
    del broken["diff"]["fused_kernels"]
    with pytest.raises(FuseviewError, match="fused_kernels"):
        validate_report(broken)
    with pytest.raises(FuseviewError, match="kind"):
        validate_report({**rep, "kind": "fuseview.profile"})


def test_single_trace_report_has_no_diff(tmp_path):
    rep = build_report(load_trace(TRACES / "linear_add_eager.json"))
    assert rep["diff"] is None and len(rep["traces"]) == 1
    assert load_report(save_report(rep, tmp_path / "one.json"))["traces"][0]["steps"] == 12


def test_onnxruntime_trace_steps_are_model_runs():
    stats = load_trace(TRACES / "ort_mlp.json")
    # six runs, the first treated as warm-up: left out and said
    assert stats.source == "onnxruntime" and stats.step_kind == MODEL_RUNS and stats.steps == 5
    assert stats.excluded == ["model_run 1: the session's first model_run (warm-up)"]
    names = stats.by_name()
    assert "/norm/LayerNormalization" in names and names["/norm/LayerNormalization"].count == 5
    assert all(e.category == OP for e in stats.events)
    with open(TRACES / "ort_mlp.json") as f:
        runs = sorted((float(e["ts"]), float(e["dur"])) for e in json.load(f) if e.get("name") == "model_run")
    assert stats.step_us == [d for _, d in runs[1:]]


def test_hand_written_cuda_trace_categories_and_flows():
    # hand-written (no GPU here): kernels, launches, memcpy and ac2g flow events as Kineto writes them
    before = load_trace(TRACES / "cuda_handwritten_eager.json")
    after = load_trace(TRACES / "cuda_handwritten_compiled.json")
    cats = {e.name: e.category for e in before.events + after.events}
    assert cats["cudaLaunchKernel"] == OVERHEAD and cats["triton_poi_fused_cos_relu_0"] == COMPILED
    assert cats["Memcpy DtoH (Device -> Pinned)"] == MEMORY
    assert any(c == KERNEL for c in cats.values())
    assert before.flows == 16 and after.flows == 8
    # the GPU-side copies of ProfilerStep#N are steps too, not events
    assert before.steps == 4 and not any(e.name.startswith("ProfilerStep") for e in before.events)
    (k,) = attribute(before, after)
    assert k.matched_before == ["aten::cos", "aten::relu"]
    # a GPU kernel is set against the GPU kernels cos and relu launched (found by correlation id), not
    # against their host-side time (which includes the launch)
    b = before.by_name()
    launched = [e for e in b.values() if e.category == KERNEL]
    assert k.replaced_from == "device"
    assert k.replaced_us == pytest.approx(sum(e.per_step_us for e in launched))
    assert k.replaced_us < (b["aten::cos"].per_step_us + b["aten::relu"].per_step_us)


def test_categories():
    assert category("TorchDynamo Cache Lookup", "cpu_op") == OVERHEAD
    assert category("Torch-Compiled Region: 0/0", "cpu_op") == OVERHEAD
    assert category("AOTDispatcher Runtime Wrapper Prologue", "cpu_op") == OVERHEAD
    assert category("graph_0_cpp_fused_cos_relu_0", "cpu_op") == COMPILED
    assert category("aten::native_layer_norm", "cpu_op") == OP


def test_whole_trace_is_one_step_without_markers(tmp_path):
    p = tmp_path / "plain.json"
    p.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10, "dur": 5},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": 2}]}))
    stats = load_trace(p)
    assert stats.step_kind == WHOLE and stats.step_us == [12.0]


def test_events_split_across_read_chunks(monkeypatch):
    monkeypatch.setattr(reader, "CHUNK", 97)  # every event crosses a chunk boundary somewhere
    small = read_trace(TRACES / "attention_eager.json")
    monkeypatch.undo()
    whole = read_trace(TRACES / "attention_eager.json")
    assert len(small) == len(whole) == len(plain_events(TRACES / "attention_eager.json"))
    assert list(small.dur) == list(whole.dur)


@pytest.mark.parametrize("content, why", [
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}', "truncated"),
    ('{"schemaVersion": 1}', "no traceEvents"),
    ("not json at all", "not JSON"),
    ('{"traceEvents": []}', "no timed events"),
    ('{"traceEvents": [1, 2]}', "not an object"),
    ('{"traceEvents": [{"ph": "X", "name": "a", "ts": "soon"}]}', "numeric"),
])
def test_bad_traces_are_one_line_errors(tmp_path, content, why):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(FuseviewError, match=why):
        read_trace(p)


def test_truncated_real_trace(tmp_path):
    data = (TRACES / "attention_eager.json").read_bytes()
    p = tmp_path / "cut.json"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(FuseviewError, match="truncated"):
        read_trace(p)


def test_windows_cut_inside_args_fall_back_to_one_event(tmp_path, monkeypatch):
    # "}, {" inside an event's args looks like an event boundary: a cut there must not lose or corrupt events
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 1, "ts": i * 10.0,
               "dur": 5.0 + i % 3, "args": {"inputs": [{"shape": [i, 2]}, {"shape": [3]}]}}
              for i in range(3000)]
    p = tmp_path / "nested.json"
    p.write_text(json.dumps({"traceEvents": events, "traceName": "x"}))
    monkeypatch.setattr(reader, "CHUNK", 70_001)
    raw = read_trace(p)
    assert len(raw) == len(events)
    assert list(raw.ts) == [e["ts"] for e in events] and list(raw.dur) == [e["dur"] for e in events]
    assert [raw.names[i] for i in raw.name_id] == [e["name"] for e in events]
