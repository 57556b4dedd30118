"""Profiling real onnxruntime sessions: node times add up, a slow node dominates, runs, cancel, traces."""

from __future__ import annotations

import json
import threading

import numpy as np
import onnx
import pytest

from fuseview.errors import Cancelled, FuseviewError
from fuseview.runtime import samples, trace
from fuseview.runtime.inputs import make_feeds
from fuseview.runtime.profiling import profile_model, profile_trace, runnable, summarize
from fuseview.runtime.sessions import create_session, ort_fusions
from tests.conftest import GPT2_MODELS


@pytest.fixture(scope="module")
def slow_profile():
    model = samples.slow_node_model(n=384)
    feeds = make_feeds(model)
    return profile_model(model, feeds, "cpu", runs=5, warmup=2, threads=1)


def test_node_times_add_up_to_each_run(slow_profile):
    runs = slow_profile["runs_detail"]
    assert slow_profile["profiled_runs"] == len(runs) == 5
    for run in runs:
        # every node of the run is in the per-node sum: it is the run's duration minus executor overhead
        assert run["node_sum_us"] <= run["model_run_us"] * 1.01
    # On a machine shared with other jobs one run can be preempted between two nodes; most may not.
    within = [abs(r["node_sum_us"] - r["model_run_us"]) <= 0.2 * r["model_run_us"] for r in runs]
    assert sum(within) >= 4, runs


def test_slow_node_dominates(slow_profile):
    nodes = slow_profile["nodes"]
    assert {n["name"] for n in nodes} == {"tiny_relu", "tiny_neg", "tiny_abs", "big_matmul_1", "big_matmul_2",
                                          "big_matmul_3"}
    assert nodes[0]["op_type"] == "MatMul" and nodes[0]["name"].startswith("big_matmul")
    ops = {o["op_type"]: o for o in slow_profile["op_types"]}
    assert ops["MatMul"]["share"] > 0.9 and ops["MatMul"]["nodes"] == 3
    assert abs(sum(o["share"] for o in ops.values()) - 1.0) < 1e-9
    for n in nodes:
        assert n["provider"] == "CPUExecutionProvider" and n["time_source"] == "cpu"
        assert n["p50_us"] <= n["p90_us"] + 1e-9
    lat = slow_profile["latency_ms"]
    assert len(lat["runs"]) == 5 and lat["p50"] <= lat["p90"] and lat["mean"] > 0


def test_profile_session_records_its_setup_and_cost(slow_profile):
    sess = slow_profile["profile_session"]
    assert sess["cpu_mem_arena"] is True and sess["threads"] == 1
    cost = sess["cost_s"]
    # the plain runs are the sum of the latency runs; every stage of the profiling pass was timed
    assert abs(cost["latency_runs"] * 1e3 - sum(slow_profile["latency_ms"]["runs"])) < 1e-6
    for key in ("profiled_runs", "trace_write", "trace_read", "statistics"):
        assert cost[key] > 0, key
    assert cost["trace_bytes"] > 1000


def test_arena_off_is_an_opt_in_for_the_profiled_session_only():
    model = samples.slow_node_model(n=64)
    prof = profile_model(model, make_feeds(model), "cpu", runs=2, warmup=1, cpu_mem_arena=False)
    assert prof["profile_session"]["cpu_mem_arena"] is False and len(prof["nodes"]) == 6


def test_warmup_runs_are_dropped_from_the_trace():
    model = samples.slow_node_model(n=64)
    feeds = make_feeds(model)
    runs, kernels, prov = profile_trace(model, feeds, "cpu", runs=4, warmup=3)
    assert len(runs) == 4 and not kernels and prov["provider"] == "CPUExecutionProvider"
    assert all(len(r.nodes) == 6 for r in runs)


def test_cancel_and_progress():
    model = samples.slow_node_model(n=64)
    feeds = make_feeds(model)
    seen = []
    profile_model(model, feeds, "cpu", runs=3, warmup=1, progress=lambda s, d, t: seen.append((s, d, t)))
    assert ("latency", 3, 3) in seen and ("profile", 4, 4) in seen
    ev = threading.Event()
    calls = []

    def progress(stage, done, total):
        calls.append(stage)
        if done == 2:
            ev.set()

    with pytest.raises(Cancelled):
        profile_model(model, feeds, "cpu", runs=50, warmup=0, progress=progress, cancel=ev)
    assert len(calls) == 2
    with pytest.raises(Cancelled):
        profile_model(model, feeds, "cpu", runs=50, warmup=0, cancel=lambda: True)


def test_unnamed_nodes_get_the_loaders_names():
    model = samples.slow_node_model(n=32)
    for n in model.graph.node:
        n.name = ""
    before = model.SerializeToString()
    named = runnable(model)
    assert model.SerializeToString() == before  # the source model is left alone
    assert [n.name for n in named.graph.node] == [f"{n.op_type}_{i}" for i, n in enumerate(model.graph.node)]
    prof = profile_model(model, make_feeds(model), "cpu", runs=2, warmup=1)
    assert {n["name"] for n in prof["nodes"]} == {n.name for n in named.graph.node}


def test_gpt2_profile_covers_every_executed_node():
    path = GPT2_MODELS / "gpt2_2l_ts17.onnx"
    model = onnx.load(str(path), load_external_data=False)
    prof = profile_model(path, make_feeds(model, {"seq": 32}), "cpu", runs=2, warmup=1, threads=1)
    executed = {n.name for n in model.graph.node if n.op_type != "Constant"}
    assert {n["name"] for n in prof["nodes"]} == executed
    assert prof["op_types"][0]["mean_us"] >= prof["op_types"][-1]["mean_us"]


def test_summary_matches_a_plain_per_node_count():
    """The vectorised statistics against a direct computation on a hand-made trace (a node runs twice)."""
    cpu = "CPUExecutionProvider"
    runs = [trace.TraceRun(0, 100, [trace.NodeTime("a", "Relu", cpu, h) for h in (10.0, 5.0)]
                           + [trace.NodeTime("b", "Add", cpu, 1.0)])
            for _ in range(2)]
    runs.append(trace.TraceRun(200, 100, [trace.NodeTime("a", "Relu", cpu, 30.0),
                                          trace.NodeTime("c", "Add", cpu, 3.0)]))
    s = summarize(runs, False)
    nodes = {n["name"]: n for n in s["nodes"]}
    # ranked by the median per run: c ran in one run of three (p50 0), b in two (p50 1)
    assert [n["name"] for n in s["nodes"]] == ["a", "b", "c"]
    assert nodes["a"]["mean_us"] == 20 and nodes["a"]["p50_us"] == 15 and nodes["a"]["p90_us"] == 27
    assert nodes["b"]["mean_us"] == 2 / 3 and nodes["c"]["mean_us"] == 1
    ops = {o["op_type"]: o for o in s["op_types"]}
    assert ops["Add"]["nodes"] == 2 and ops["Add"]["mean_us"] == (1 + 1 + 3) / 3
    assert [r["node_sum_us"] for r in s["runs_detail"]] == [16, 16, 33]
    assert s["node_sum_us"]["max"] == 33 and abs(sum(n["share"] for n in s["nodes"]) - 1) < 1e-12


def test_kernel_events_are_attributed_to_the_node_they_follow(tmp_path):
    """A real CPU trace with CUDA-style Kernel events added after one node, as CUDA-profiling builds write."""
    model = samples.slow_node_model(n=32)
    sess, _ = create_session(model, "cpu", profile_prefix=str(tmp_path / "p"))
    feeds = make_feeds(model)
    for _ in range(2):
        sess.run(None, feeds)
    events = trace.read_trace(sess.end_profiling())
    out = []
    for e in events:
        if e.get("cat") == "Node" and e["name"] == "big_matmul_2_kernel_time":
            e = json.loads(json.dumps(e))
            e["args"]["provider"] = "CUDAExecutionProvider"
            out += [e, {"cat": "Kernel", "name": "gemm_a", "ts": e["ts"], "dur": 7, "args": {}},
                    {"cat": "Kernel", "name": "gemm_b", "ts": e["ts"], "dur": 5, "args": {}}]
        else:
            out.append(e)
    runs = trace.split_runs(out)
    assert trace.has_kernel_events(out) and len(runs) == 2
    s = summarize(runs, True)
    mm2 = next(n for n in s["nodes"] if n["name"] == "big_matmul_2")
    assert mm2["mean_us"] == 12 and mm2["time_source"] == "device" and mm2["kernels"] == 2
    host = summarize(runs, False)
    mm2h = next(n for n in host["nodes"] if n["name"] == "big_matmul_2")
    assert mm2h["time_source"] == "host-side" and mm2h["mean_us"] == mm2h["host_mean_us"]


def test_cuda_on_a_cpu_build_is_a_clear_error():
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this machine has the CUDA build")
    with pytest.raises(FuseviewError, match="pip install onnxruntime-gpu"):
        create_session(samples.slow_node_model(n=8), "cuda")
    _, choice = create_session(samples.slow_node_model(n=8), "auto")
    assert choice.provider == "CPUExecutionProvider" and "no CUDAExecutionProvider" in choice.reason


def test_ort_fusions_reports_what_onnxruntime_fuses():
    path = GPT2_MODELS / "gpt2_2l_ts17.onnx"
    res = ort_fusions(path, "cpu", "extended")
    # GPT-2's tanh GELU becomes FastGelu at the extended level on CPU; its Tanh nodes disappear.
    assert res["added"].get("com.microsoft.FastGelu", 0) >= 2
    assert res["removed"].get("Tanh", 0) >= 2
    assert res["nodes_after"] < res["nodes_before"]
    basic = ort_fusions(path, "cpu", "basic")
    assert "com.microsoft.FastGelu" not in basic["added"]
    with pytest.raises(FuseviewError):
        ort_fusions(path, "cpu", "bogus")
    assert np.isfinite(res["nodes_after"])


def test_fast_trace_reader_matches_json(tmp_path):
    path = GPT2_MODELS / "gpt2_2l_ts17.onnx"
    sess, _ = create_session(str(path), "cpu", profile_prefix=str(tmp_path / "p"))
    feeds = make_feeds(onnx.load(str(path), load_external_data=False), {"seq": 8})
    for _ in range(2):
        sess.run(None, feeds)
    f = sess.end_profiling()
    fast, slow = trace.read_trace(f), trace.read_trace(f, fast=False)
    assert len(fast) == len(slow)
    runs = trace.split_runs(fast)
    assert runs == trace.split_runs(slow) and len(runs) == 2 and len(runs[0].nodes) > 100
    assert trace.read_runs(f) == (runs, False)
    # the same events in another JSON layout (not one event per line) are read by the JSON path
    other = tmp_path / "indented.json"
    other.write_text(json.dumps({"traceEvents": slow}, indent=1))
    assert trace.read_runs(other) == (runs, False)
    # a line the fast reader does not know sends the whole file to the JSON path, never skips an event
    lines = open(f, encoding="utf-8").read().split("\n")
    odd_event = {"name": "odd", "cat": "Node", "ts": 1, "dur": 2, "ph": "X", "args": {}}
    lines.insert(3, json.dumps(odd_event) + ",")
    odd = tmp_path / "odd.json"
    odd.write_text("\n".join(lines))
    assert len(trace.read_trace(odd)) == len(slow) + 1
    assert summarize(trace.read_runs(odd)[0], False) == summarize(runs, False)
    (tmp_path / "bad.json").write_text("[\n{oops\n")
    with pytest.raises(FuseviewError, match="not a readable onnxruntime profile"):
        trace.read_trace(tmp_path / "bad.json")


def test_one_stalled_run_does_not_make_a_hotspot():
    """A 5 µs node stalled once for 6 ms (issue 19) ranks and shares by its median, not its mean."""
    cpu = "CPUExecutionProvider"
    stalls = [5.0, 5.0, 6424.0, 5.0, 6.0]
    runs = [trace.TraceRun(i * 100, 100, [trace.NodeTime("reshape", "Reshape", cpu, stalls[i]),
                                          trace.NodeTime("matmul", "MatMul", cpu, 100.0 + i)])
            for i in range(5)]
    s = summarize(runs, False)
    assert [n["name"] for n in s["nodes"]] == ["matmul", "reshape"]
    nodes = {n["name"]: n for n in s["nodes"]}
    assert nodes["reshape"]["mean_us"] > nodes["matmul"]["mean_us"]  # the mean would have called it
    assert nodes["reshape"]["share"] == pytest.approx(5 / 107)
    assert sum(n["share"] for n in s["nodes"]) == pytest.approx(1.0)
    assert [o["op_type"] for o in s["op_types"]] == ["MatMul", "Reshape"]
