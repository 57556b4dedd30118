"""The Qt-free session layer: open the demo model, scan, decide, apply, cancel jobs, events — no window."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fuseview.errors import Cancelled, FuseviewError
from fuseview.graph.groups import collapsed_expansion
from fuseview.graph.loader import load_document
from fuseview.runtime.job import ProfileRequest
from fuseview.session import JobService, Progress, Session
from tests.conftest import ROOT

DEMO = ROOT / "fuseview" / "data" / "demo_gpt2_2l.onnx"
WAIT_S = 120


def record(session: Session) -> list[str]:
    """Every session event's type, in order."""
    seen: list[str] = []
    for emitter in session.events:
        emitter.connect(lambda e: seen.append(e.type))
    return seen


def wait_for(job, timeout: float = WAIT_S) -> None:
    assert job is not None and job.wait(timeout), f"{job} did not end"


@pytest.fixture(scope="module")
def demo():
    return load_document(DEMO)


def scanned(demo) -> tuple[Session, list[str]]:
    s = Session()
    seen = record(s)
    s.adopt(demo, s.initial_expansion(demo))
    wait_for(s.start_scan())
    return s, seen


def test_importing_the_session_imports_no_qt():
    code = ("import sys, fuseview.session, fuseview.session.profile_child; "
            "bad = [m for m in sys.modules"
            " if m.split('.')[0] in ('PySide6', 'shiboken6', 'pyqtgraph', 'torch')"
            " or m.startswith(('fuseview.ui', 'fuseview.cli', 'fuseview.commands'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_open_and_scan_the_demo(demo):
    s, seen = scanned(demo)
    assert seen == ["document", "scanned"]
    assert s.root is demo and s.doc is demo and s.on_root and s.nav_stack == []
    assert s.scan is not None and s.scan.candidates
    assert s.decisions is not None
    assert {c.id for c in s.decisions.candidates} == {c.id for c in s.scan.candidates}
    assert s.unsaved() == []  # nothing decided yet


def test_accept_reject_undo_fire_decision_events(demo):
    s, seen = scanned(demo)
    first, second = (c.id for c in s.scan.candidates[:2])
    assert s.accept(first) and s.decisions.status(first) == "accepted"
    assert s.reject(second) and s.decisions.status(second) == "rejected"
    assert s.unsaved() == [f"{len(s.decisions.plan.decisions)} decisions"]  # conflicts were rejected too
    assert s.undo() and s.decisions.status(second) == "pending"
    assert s.redo() and s.decisions.status(second) == "rejected"
    with pytest.raises(FuseviewError, match="neither a candidate"):
        s.accept("no-such-candidate-or-rule")
    assert not s.accept(first)  # already accepted: no change, no event
    assert seen.count("decisions") == 4


def test_plan_round_trip_and_source_refused(demo, tmp_path):
    s, _seen = scanned(demo)
    s.accept_all()
    plan = s.save_plan(tmp_path / "demo.plan.json")
    assert s.unsaved() == []
    with pytest.raises(FuseviewError, match="source model"):
        s.save_plan(DEMO)
    again, _ = scanned(demo)
    assert again.open_plan(plan) == []
    assert again.decisions.accepted() == s.decisions.accepted()


def test_apply_builds_a_validated_fused_model(demo, tmp_path):
    s, seen = scanned(demo)
    assert s.apply() is None  # nothing accepted
    s.accept_all()
    laid = []
    s.events.applied.connect(lambda e: laid.append(e.extra))
    job = s.apply()
    wait_for(job)
    assert laid and laid[0].layout.boxes and laid[0].extras is None  # laid out in the worker, no view hook
    assert s.fused is not None and s.fused.validation is not None and s.fused.validation.ok
    assert s.fused.applied == set(s.decisions.accepted())
    assert all(s.decisions.status(i) == "applied" for i in s.fused.applied)
    assert seen[-1] == "applied" and s.links.to_original
    assert "the fused model" in s.unsaved()
    out = s.save_fused(tmp_path / "demo.fused.onnx")
    assert out.stat().st_size > 0 and s.fused.saved
    assert s.unsaved() == [f"{len(s.decisions.plan.decisions)} decisions"]


def test_opening_another_model_drops_what_was_derived(demo):
    s, seen = scanned(demo)
    s.accept_all()
    s.set_heat({"original": {"x": 1.0}})
    s.adopt(demo)
    assert s.scan is None and s.decisions is None and s.fused is None and s.heat is None
    assert seen[-1] == "document"


def test_inner_graph_navigation(demo):
    s = Session()
    s.adopt(demo)
    went: list = []
    s.events.navigated.connect(lambda e: went.append((e.doc, e.expanded)))
    inner = load_document(DEMO)
    s.enter("function f", inner)
    assert s.doc is inner and not s.on_root and s.path_labels() == ["main", "function f"]
    entry = s.go_up()
    assert entry is not None and s.doc is demo and s.on_root and s.go_up() is None
    assert [d for d, _x in went] == [inner, demo] and went[0][1] == s.initial_expansion(inner)


def test_open_loads_and_lays_out_as_one_job():
    s = Session()
    seen = record(s)
    s.layout_extras = lambda lay: len(lay.boxes)  # what a view adds, computed in the worker
    got: list = []
    s.events.document.connect(lambda e: got.append(e.laid))
    job = s.open(DEMO)
    assert job.kind == "layout" and job.title == "Opening demo_gpt2_2l.onnx"
    wait_for(job)
    assert s.root is not None and s.root.path.name == DEMO.name and seen[-1] == "document"
    assert got[0].extras == len(got[0].layout.boxes) > 0 and got[0].expanded == s.expanded
    failures: list = []
    s.events.open_failed.connect(lambda e: failures.append((e.title, str(e.error))))
    wait_for(s.open(DEMO.parent / "no_such_model.onnx"))
    assert failures and failures[0][0] == "Cannot open the model" and "no_such_model" in failures[0][1]
    assert s.root.path.name == DEMO.name  # what was open stays open


def test_relayout_is_a_layout_job_and_a_newer_request_replaces_the_older(demo):
    s = Session()
    s.adopt(demo, s.initial_expansion(demo))
    relaid: list = []
    s.events.relaid.connect(lambda e: relaid.append((e.doc, e.laid)))
    collapsed = collapsed_expansion(demo.graph)  # every scope closed: a few boxes
    older = s.relayout(None)  # flat: every node
    newer = s.relayout(collapsed)
    assert older.kind == newer.kind == "layout" and older.cancelled  # superseded: its result dropped
    wait_for(older)
    wait_for(newer)
    assert len(relaid) == 1 and relaid[0][0] is demo and relaid[0][1].expanded == collapsed
    assert 0 < len(relaid[0][1].layout.boxes) < len(demo.graph.nodes)


def test_dims_and_status_are_evented_and_feed_the_scan(demo):
    s = Session()
    seen = record(s)
    s.adopt(demo)
    lines: list = []
    s.events.status.connect(lambda e: lines.append((e.text, e.timeout_ms)))
    s.set_status("hello", 500)
    assert lines == [("hello", 500)] and s.status == "hello"
    s.set_dims({"seq": 16})
    s.set_dims({"seq": 16})  # unchanged: no second event
    assert seen.count("dims") == 1
    wait_for(s.start_scan())
    assert s.scan_dims == {"seq": 16}
    s.adopt(demo)  # another model: its own dims
    assert s.dims == {} and seen.count("dims") == 2


def test_job_cancel_stops_at_next_progress():
    jobs = JobService()
    started, steps, outcome = threading.Event(), [], []

    def work(progress):
        started.set()
        for i in range(1000):
            progress("step", i / 1000)
            steps.append(i)
            time.sleep(0.005)
        return "finished"

    job = jobs.submit(work, "layout", on_done=outcome.append,
                      on_cancelled=lambda: outcome.append("cancelled"))
    assert started.wait(5)
    job.cancel()
    wait_for(job, 10)
    assert outcome == ["cancelled"] and len(steps) < 1000 and job.outcome == "cancelled"
    with pytest.raises(Cancelled):  # the progress callable of a cancelled job raises the one Cancelled
        Progress(job)("after", 1.0)


def test_newer_job_of_a_kind_supersedes_the_older():
    jobs = JobService()
    gate = threading.Event()
    results: list[str] = []

    def slow(progress):
        gate.wait(10)
        progress("done waiting", 1.0)
        return "old"

    old = jobs.submit(slow, "layout", on_done=results.append,
                      on_cancelled=lambda: results.append("old dropped"))
    other = jobs.submit(lambda p: "apply", "apply", on_done=results.append)
    new = jobs.submit(lambda p: "new", "layout", on_done=results.append)
    gate.set()
    for j in (old, other, new):
        wait_for(j, 10)
    assert old.cancelled and not other.cancelled and not new.cancelled
    assert sorted(results) == ["apply", "new", "old dropped"]


def test_job_failure_and_cancel_hooks():
    jobs = JobService()
    errors: list[BaseException] = []
    wait_for(jobs.submit(lambda p: 1 / 0, on_failed=errors.append), 10)
    assert isinstance(errors[0], ZeroDivisionError)
    killed = threading.Event()

    def waits(progress):
        progress.on_cancel(killed.set)  # a job that waits on a child process kills it here
        killed.wait(10)
        progress("after", 1.0)

    job = jobs.submit(waits)
    job.cancel()
    wait_for(job, 10)
    assert killed.is_set() and job.outcome == "cancelled" and jobs.running() == []


def test_profile_request_travels_whole(tmp_path):
    req = ProfileRequest(model=str(DEMO), against=str(DEMO), runs=3, warmup=1, dims={"batch": 1}, seed=7,
                         atol=1e-3, rtol=1e-2, threads=1, sessions=2, inputs_npz=None)
    assert ProfileRequest.from_json(req.to_json()) == req
    with pytest.raises(FuseviewError, match="unknown fields"):
        ProfileRequest.from_json({**req.to_json(), "colour": "red"})


def test_profile_child_takes_the_whole_request(tmp_path):
    from fuseview.runtime.report import load_report
    from fuseview.session.profile_child import MODULE, child_input

    req = ProfileRequest(model=str(DEMO), runs=2, warmup=0, seed=3, threads=1, profile_runs=1)
    out = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", MODULE], input=child_input(req, str(out)),
                          capture_output=True, cwd=ROOT, timeout=WAIT_S)
    assert proc.returncode == 0, proc.stdout.decode()[-500:]
    report = load_report(out)
    assert report["inputs"]["seed"] == 3 and report["models"][0]["runs"] == 2
    bad = subprocess.run([sys.executable, "-m", MODULE], input=b"[]", capture_output=True, cwd=ROOT)
    assert bad.returncode == 2 and b"error" in bad.stdout


def test_demo_model_exists():
    assert Path(DEMO).is_file()


def test_pane_overlays_are_session_data_with_events(demo):
    s = Session()
    s.adopt(demo)
    parts: list[tuple[str, str]] = []
    s.events.pane.connect(lambda e: parts.append((e.role, e.part)))
    state = s.panes["original"]
    s.set_focus("original", ["n:1", "n:2"])
    s.set_highlight("fused", {"n:3"})
    s.set_pane_heat("original", {"n:1": 0.5})
    assert parts == [("original", "focus"), ("fused", "highlight"), ("original", "heat")]
    assert state.focus == ["n:1", "n:2"] and state.heat == {"n:1": 0.5}
    assert s.panes["fused"].highlight == {"n:3"}
    s.adopt(demo)  # a new model: the same pane objects (the scenes stay bound to them), emptied
    assert s.panes["original"] is state and state.focus == [] and state.heat is None


def test_reports_round_trip_and_refuse_strangers(demo, tmp_path):
    from fuseview.fusion.scan import scan_model
    from fuseview.session.reports import InfoReport, ProfileReport, ScanReport, TraceReport
    from fuseview.traces.report import build_report
    from fuseview.traces.stats import load_trace

    info = InfoReport.of(demo)
    assert InfoReport.from_json(info.to_json()) == info and info.nodes == len(demo.graph.nodes)
    assert info.lines()[0] == f"model      {demo.path}"
    with pytest.raises(FuseviewError, match="unknown fields"):
        InfoReport.from_json({**info.to_json(), "colour": 1})
    with pytest.raises(FuseviewError, match="missing"):
        InfoReport.from_json({"model": "x"})
    scan = ScanReport.of(scan_model(demo.model))
    assert ScanReport.from_json(scan.to_json()) == scan and "ort_check" not in scan.to_json()
    trace = ROOT / "tests" / "data" / "traces" / "attention_eager.json"
    rep = TraceReport.from_json(build_report(load_trace(trace)))
    assert TraceReport.load(rep.save(tmp_path / "t.json")) == rep and len(rep.traces) == 1
    with pytest.raises(FuseviewError):
        ProfileReport.from_json({"kind": "fuseview.trace_compare"})


def test_report_kinds_are_the_file_schemas_and_the_session_loads_no_onnxruntime():
    from fuseview.runtime import report as profile_schema
    from fuseview.session import reports
    from fuseview.traces import report as trace_schema

    assert reports.PROFILE_KIND == profile_schema.KIND and reports.TRACE_KIND == trace_schema.KIND
    code = "import sys, fuseview.session, fuseview.session.reports; print('onnxruntime' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"  # it loads when a scan, Apply or profile runs


def test_a_big_models_fused_variant_keeps_the_weights_on_disk_and_saves_them_whole(tmp_path, monkeypatch):
    # the window applies as `fuse` does: the source's big weights stay in its file (the fused proto
    # points at them, their folder recorded), and Save streams them into a self-contained file
    import numpy as np
    import onnx

    from fuseview.graph import loader
    from fuseview.graph.lazy_weights import has_disk_weights
    from fuseview.session.profile_run import model_files

    from .test_tune import _big_gelu_model

    path, w = _big_gelu_model(tmp_path)
    monkeypatch.setattr(loader, "LAZY_FILE_BYTES", 0)
    s = Session()
    doc = load_document(path)
    s.adopt(doc, s.initial_expansion(doc))
    wait_for(s.start_scan())
    s.accept_all()
    wait_for(s.apply(dims={"batch": 1, "sequence": 4}))
    assert s.fused is not None and s.fused.validation is not None and s.fused.validation.ok
    assert has_disk_weights(s.fused.model)
    out = s.save_fused(tmp_path / "saved.onnx")
    saved = onnx.load(str(out))
    assert all(t.data_location == onnx.TensorProto.DEFAULT for t in saved.graph.initializer)
    got = next(t for t in saved.graph.initializer if t.name == "w")
    assert np.array_equal(onnx.numpy_helper.to_array(got), w)
    # the profile child gets a file it can open on its own, in its own folder
    (tmp_path / "child").mkdir()
    child = model_files({"model": s.fused.model}, str(tmp_path / "child"))["model"]
    assert onnx.load(child) == saved


def test_profile_runs_through_the_session_and_arrives_as_an_event():
    s = Session()
    seen = record(s)
    req = ProfileRequest(model=str(DEMO), runs=2, warmup=0, dims={"batch": 1, "seq": 8}, threads=1,
                         profile_runs=1)
    job = s.profile(req)
    assert job.kind == "profile"
    wait_for(job)
    assert seen[-1] == "profiled" and s.profile_report is not None
    assert s.profile_report["models"][0]["runs"] == 2
    failed = s.profile(ProfileRequest(model=str(DEMO.parent / "no_such.onnx")))
    wait_for(failed)
    assert seen[-1] == "profile_failed"


def test_the_session_owns_the_profile_settings_the_dock_edits(qtbot):
    from fuseview.ui.profile_panel import ProfilePanel

    session = Session()
    panel = ProfilePanel(session=session)
    qtbot.addWidget(panel)
    panel.runs.setValue(7)  # the dock writes the session
    panel.ort_opt.setCurrentText("disabled")
    assert (session.profile_settings.runs, session.profile_settings.ort_opt) == (7, "disabled")
    seen = []
    session.events.profile_settings.connect(lambda e: seen.append(e.settings))
    session.set_profile_settings(threads=1, budget_s=30.0)  # another view writes it: the dock shows it
    assert panel.threads.value() == 1 and panel.budget.value() == 30 and seen[-1].threads == 1
    panel.set_models(DEMO, DEMO)
    req = panel.request()  # the request is made of the session's settings
    assert (req.runs, req.threads, req.ort_opt, req.budget_s) == (7, 1, "disabled", 30.0)
    other = ProfilePanel(session=session)  # a second view of the session opens on its settings
    qtbot.addWidget(other)
    assert other.runs.value() == 7 and other.budget.value() == 30
