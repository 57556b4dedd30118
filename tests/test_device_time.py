"""Device time per node: a real torch.profiler trace (CPU activities) taken around real onnxruntime runs.

No GPU here: a thread adds torch tensors while onnxruntime runs, and its `aten::add` ops stand in for CUDA
kernels (launch = start). The clocks of the two profilers are aligned by the run markers only, and the
same answer must come back when one clock is shifted on purpose.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from pathlib import Path

import pytest

from fuseview.errors import FuseviewError
from fuseview.runtime import device_time as dt
from fuseview.runtime import samples, trace
from fuseview.runtime.inputs import make_feeds
from fuseview.runtime.placement import attribute_kernels
from fuseview.runtime.sessions import create_session

pytestmark = pytest.mark.torch
if os.environ.get("FUSEVIEW_REQUIRE_TORCH") == "1":
    import torch  # CI installs the extra: a missing torch must fail there, not skip
else:
    torch = pytest.importorskip("torch")
RUNS = 4


def _adds(e: dict) -> bool:
    return e.get("cat") == "cpu_op" and e.get("name") == "aten::add"


@contextlib.contextmanager
def _adding():
    """Meanwhile a worker thread runs aten::add ops: the stand-ins for kernels, launched while nodes run."""
    stop = threading.Event()

    def adder() -> None:
        a = torch.ones(16)
        while not stop.is_set():
            torch.add(a, a)
            time.sleep(0.0002)

    worker = threading.Thread(target=adder)
    worker.start()
    try:
        yield
    finally:
        stop.set()
        worker.join()


@pytest.fixture(scope="module")
def traced():
    model = samples.slow_node_model(n=320)
    feeds = make_feeds(model)

    with tempfile.TemporaryDirectory() as tmp:
        sess, _ = create_session(model, "cpu", "disabled", str(Path(tmp) / "ort"), threads=1)
        sess.run(None, feeds)  # a warm-up run: in onnxruntime's trace, outside every marker

        def run() -> None:
            sess.run(None, feeds)
            time.sleep(0.004)  # inside the marker, outside every node: what is launched here is unattributed

        with _adding():
            events = dt.traced_runs(run, RUNS, cuda=False, all_threads=True)
        ort_events = trace.read_trace(sess.end_profiling())
    return events, ort_events


def _shifted(events: list[dict], by: float) -> list[dict]:
    return [{**e, "ts": float(e["ts"]) + by} for e in events]


def test_markers_align_each_run_inside_its_marker(traced):
    events, ort_events = traced
    marks = dt.markers(events)
    runs, nodes = dt.ort_spans(ort_events)
    assert len(marks) == RUNS and len(runs) == RUNS + 1  # the warm-up run is not marked
    offset, unc = dt.align(marks, runs)
    assert 0 <= unc < min(m1 - m0 for m0, m1 in marks)
    for (m0, m1), (r0, r1) in zip(marks, runs[1:], strict=True):
        assert m0 - 1 <= r0 + offset and r1 + offset <= m1 + 1
    assert {n[3] for n in nodes} == {"CPUExecutionProvider"}


def test_attribution_by_launch_time(traced):
    events, ort_events = traced
    runs, nodes = dt.ort_spans(ort_events)
    records = dt.device_records(events, _adds)
    got = dt.attribute(dt.markers(events), runs, nodes, records)
    # the same answer by a plain scan: which mapped node span of a marked run holds each launch inside a
    # marker (the latest started where whole-µs spans overlap). The warm-up run's nodes are not candidates:
    # they carry the same names, and the clock offset is known only within the markers' slack, so a launch
    # made in a marker before its run began can map onto the warm-up's last nodes (it is unattributed)
    offset = got["clock_offset_us"]
    marks = dt.markers(events)
    marked = runs[-len(marks):]
    spans = [(nm, s, e) for nm, s, e, _ in nodes if any(r0 <= s <= r1 for r0, r1 in marked)]
    inside = [r for r in records if any(m0 <= r.launch <= m1 for m0, m1 in marks)]
    want: dict[str, float] = {}
    loose = 0.0
    for r in inside:
        owner = sorted(((s, nm) for nm, s, e in spans if s + offset <= r.launch < e + offset),
                       key=lambda t: t[0])
        if owner:
            name = owner[-1][1]
            want[name] = want.get(name, 0.0) + r.dur / RUNS
        else:
            loose += r.dur / RUNS
    assert got["node_device_us"] == pytest.approx(want)
    assert got["unattributed_us"] == pytest.approx(loose)
    assert got["records_per_run"] == pytest.approx(len(inside) / RUNS)
    assert 0 < got["unattributed_share"] < 1  # the sleep after each run launches unattributed adds
    matmuls = sum(v for k, v in got["node_device_us"].items() if k.startswith("big_matmul"))
    assert matmuls > 0.5 * got["node_sum_us"]  # the big MatMuls hold most of each run's node time
    assert 0 < got["busy_us"]["min"] <= got["busy_us"]["max"]


def test_a_shifted_clock_gives_the_same_attribution(traced):
    events, ort_events = traced
    runs, nodes = dt.ort_spans(ort_events)
    base = dt.attribute(dt.markers(events), runs, nodes, dt.device_records(events, _adds))
    shift = 3_600_000_000.5  # an hour and half a microsecond: the offset is derived, never assumed
    moved = _shifted(events, shift)
    again = dt.attribute(dt.markers(moved), runs, nodes, dt.device_records(moved, _adds))
    assert again["clock_offset_us"] == pytest.approx(base["clock_offset_us"] + shift, abs=1e-3)
    assert again["node_device_us"] == pytest.approx(base["node_device_us"])
    assert again["unattributed_us"] == pytest.approx(base["unattributed_us"])
    # without the alignment the two clocks do not meet: nothing would be attributed
    raw = attribute_kernels([(n, s, e) for n, s, e, _ in nodes],
                            [(r.launch, r.start, r.dur) for r in dt.device_records(moved, _adds)])
    assert raw["node_device_us"] == {}


def test_the_markers_projection_on_the_gpu_timeline_is_not_a_marker(traced):
    events, _ = traced
    host = dt.markers(events)
    gpu = [{**e, "cat": "gpu_user_annotation", "ts": float(e["ts"]) + 50.0, "dur": 1.0}
           for e in events if str(e.get("name", "")).startswith(dt.MARKER)]
    assert dt.markers(events + gpu) == host


def test_markers_that_cannot_hold_their_runs_are_refused(traced):
    events, ort_events = traced
    runs, _ = dt.ort_spans(ort_events)
    marks = dt.markers(events)
    squeezed = [marks[0], (marks[1][0] + 5e5, marks[1][1] + 5e5)] + marks[2:]  # one marker 0.5 s late
    with pytest.raises(FuseviewError, match="cannot align"):
        dt.align(squeezed, runs)
    with pytest.raises(FuseviewError, match="cannot align"):
        dt.align(marks, runs[:2])


def test_cuda_kernels_take_their_launch_from_the_correlated_api_call():
    events = [  # as kineto writes a CUDA trace: the launch on the host, the kernel on the device
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 100.0, "dur": 3.0,
         "args": {"correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 150.0, "dur": 20.0, "args": {"correlation": 7}},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 90.0, "dur": 5.0,
         "args": {"correlation": 9}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 99.0, "dur": 10.0},
    ]
    recs = dt.device_records(events)
    assert recs == [dt.Record(100.0, 150.0, 20.0), dt.Record(90.0, 90.0, 5.0)]


def test_a_profiling_session_measured_end_to_end_through_the_bound_path():
    model = samples.slow_node_model(n=320)
    feeds = make_feeds(model)
    with tempfile.TemporaryDirectory() as tmp:
        sess, _ = create_session(model, "cpu", "disabled", str(Path(tmp) / "ort"), threads=1)
        with _adding():
            got = dt.session_device_time(sess, feeds, 3, cuda=False, select=_adds, all_threads=True)
    assert got["available"] is True and got["runs"] == 3 and got["records_per_run"] > 0
    assert set(got["node_device_us"]) <= {n.name for n in model.graph.node}
    assert got["node_sum_us"] == pytest.approx(sum(got["node_device_us"].values()))
    assert any(k.startswith("big_matmul") for k in got["node_device_us"])  # launched while the MatMuls ran
    assert got["busy_us"]["max"] > 0
    with tempfile.TemporaryDirectory() as tmp:  # nothing recorded: one line, not a zero busy time
        sess, _ = create_session(model, "cpu", "disabled", str(Path(tmp) / "ort"), threads=1)
        none = dt.session_device_time(sess, feeds, 2, cuda=False)
    assert none == {"available": False, "reason": "no device time: torch.profiler recorded no CUDA kernels"
                    " (CUPTI gave no activity records)"}


def test_without_a_cuda_source_one_line_says_why():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    model = samples.slow_node_model(n=16)
    got = dt.measure_device_time(model, make_feeds(model), "cpu")
    assert got["available"] is False
    assert got["reason"].startswith("no device time:") and "\n" not in got["reason"]


@pytest.fixture(scope="module")
def report_with_device(traced):
    """A real CPU profile report given the device section the traced runs yield, as a CUDA run writes it."""
    from fuseview.runtime.job import ProfileRequest, run_profile

    events, ort_events = traced
    runs, nodes = dt.ort_spans(ort_events)
    device = {"available": True, "source": "torch.profiler (CPU activities: test)",
              **dt.attribute(dt.markers(events), runs, nodes, dt.device_records(events, _adds))}
    rep = run_profile(ProfileRequest(samples.slow_node_model(n=320), provider="cpu", runs=2, warmup=1,
                                     threads=1, profile_runs=1))
    model = rep["models"][0]
    model["device_time"] = device
    dt.node_device_times(model["nodes"], device)
    assert {n["device_mean_us"] for n in model["nodes"]} == {None}  # CPU EP nodes have no device time
    for n in model["nodes"]:  # as on the CUDA EP: the node times are host-side, the device times apart
        n["device_mean_us"] = device["node_device_us"].get(n["name"], 0.0)
    return rep


def test_device_time_is_labelled_in_json_cli_and_dock(report_with_device):
    import io

    from fuseview.commands.profile import print_report
    from fuseview.reports import ProfileReport

    rep = ProfileReport.from_json(report_with_device)
    model = rep.models[0]
    assert model.device_time is not None and model.device_time["available"]
    assert "device" in model.device_time["what"] and "host span" in model.device_time["what"]
    devs = {n.name: n.device_mean_us for n in model.nodes}
    assert devs["big_matmul_1"] == pytest.approx(model.device_time["node_device_us"].get("big_matmul_1", 0.0))
    out = io.StringIO()
    print_report(rep, out)
    text = out.getvalue()
    assert "device time (GPU kernels" in text and "host-side node sum" in text
    assert "top nodes by device time" in text and " device " in text and " host-side " in text
    from fuseview.ui.profile_panel import summary_text

    assert "device time (GPU kernels" in summary_text(rep.to_json())


def test_a_missing_device_source_is_one_line_and_a_bad_share_is_refused(report_with_device):
    import copy
    import io

    from fuseview.commands.profile import print_report
    from fuseview.reports import ProfileReport

    rep = copy.deepcopy(report_with_device)
    rep["models"][0]["device_time"] = {"available": False, "reason": "no device time: no torch here"}
    out = io.StringIO()
    print_report(ProfileReport.from_json(rep), out)
    assert out.getvalue().count("no device time") == 1
    bad = copy.deepcopy(report_with_device)
    bad["models"][0]["device_time"]["unattributed_share"] = 1.5
    with pytest.raises(FuseviewError, match="unattributed_share"):
        ProfileReport.from_json(bad)


def test_the_roofline_takes_device_times_where_nodes_have_them():
    nodes = [{"name": "a", "p50_us": 40.0, "device_mean_us": 7.0, "time_source": "host-side"},
             {"name": "b", "p50_us": 3.0, "device_mean_us": None, "time_source": "cpu"}]
    got = dt.roofline_times(nodes)
    assert got[0]["p50_us"] == 7.0 and got[0]["time_source"] == "device"
    assert got[1] is nodes[1] and nodes[0]["p50_us"] == 40.0  # the report's own nodes are left alone


def test_the_profile_dock_labels_host_side_and_device_times(qtbot, report_with_device, tmp_path):
    import copy
    import json

    from fuseview.ui.profile_panel import ProfilePanel

    rep = copy.deepcopy(report_with_device)
    for n in rep["models"][0]["nodes"]:
        n["time_source"] = "host-side"  # as the CUDA EP's node events are
    path = tmp_path / "cuda_like.json"
    path.write_text(json.dumps(rep))
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    panel.open_report(path)
    titles = [p.title for p in panel.node_plots.values()]
    assert any("(host-side times)" in t for t in titles), titles
    assert "device time (GPU kernels" in panel.env.text() and "host-side node sum" in panel.env.text()
