"""Tune through the Session (no Qt): one job of kind 'tune' on the job service; stop() keeps the best set so
far and sets it as the decisions, cancel() drops it, and a tune needs a scanned model from a file."""

from __future__ import annotations

import threading

import pytest

from fuseview.graph.loader import load_document
from fuseview.session import JobService, Session
from fuseview.tuning.settings import TuneSettings

from .conftest import ASSET_MODELS
from .test_session import record, wait_for

MLP = ASSET_MODELS / "mlp_gelu_erf_ts17.onnx"
FAST = dict(threads=1, runs=15, sessions=3, max_batches=1, warmup=2, seeds=1, ort_optimizer="off",
            budget_s=60)


def test_a_job_asked_to_stop_delivers_what_it_has():
    jobs = JobService()
    started, outcome = threading.Event(), []

    def work(progress):
        best = 0
        for i in range(1000):
            if progress.stopped:
                return best
            progress("step", i / 1000)
            best = i
            started.set()
            threading.Event().wait(0.005)
        return best

    job = jobs.submit(work, "tune", on_done=outcome.append, on_cancelled=lambda: outcome.append("cancelled"))
    assert started.wait(5)
    job.stop()
    wait_for(job, 10)
    assert job.outcome == "done" and job.stop_requested and not job.cancelled
    assert len(outcome) == 1 and isinstance(outcome[0], int) and 0 <= outcome[0] < 999


def scanned_mlp() -> tuple[Session, list[str]]:
    s = Session()
    seen = record(s)
    doc = load_document(MLP)
    s.adopt(doc, s.initial_expansion(doc))
    wait_for(s.start_scan())
    return s, seen


def test_a_tune_needs_a_scanned_model():
    s = Session()
    assert s.tune(TuneSettings(**FAST)) is None
    s.adopt(load_document(MLP))
    assert s.tune(TuneSettings(**FAST)) is None  # not scanned yet: nothing to decide


@pytest.mark.slow
def test_stopped_tune_sets_the_best_set_so_far_as_the_decisions():
    s, seen = scanned_mlp()
    tuned = []
    s.events.tuned.connect(lambda e: tuned.append(e.result))
    job = s.tune(TuneSettings(**FAST))
    assert job is not None and job.kind == "tune" and s.jobs.active("tune") == [job]
    job.stop()
    wait_for(job)
    assert job.outcome == "done" and len(tuned) == 1 and s.tune_result is tuned[0]
    rep = tuned[0].report
    assert rep.stopped == "cancelled"  # the search ended early; what it had is the result
    assert sorted(s.decisions.accepted()) == sorted(rep.accepted())
    assert seen[-2:] == ["decisions", "tuned"] or (not rep.decisions and seen[-1] == "tuned")
    assert rep.environment["target"]["kind"] == "local"


@pytest.mark.slow
def test_opening_another_model_cancels_the_tune_and_drops_its_result():
    s, seen = scanned_mlp()
    job = s.tune(TuneSettings(**FAST))
    s.adopt(load_document(MLP))  # its result belongs to the model being replaced
    wait_for(job)
    assert job.outcome == "cancelled" and "tune_cancelled" in seen and "tuned" not in seen
    assert s.tune_result is None and s.decisions is None  # nothing of the tune reached the new model


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_the_session_tunes_the_model_and_scan_it_holds(monkeypatch):
    """No second read of the file; the scan is reused at its own dims, and a KV-cache decoder is scanned
    again at its decode step (the one rule of fuseview.dims), not at the dims the window scanned it with."""
    import fuseview.fusion.pipeline as pipeline

    scans, reads = [], []
    real_scan, real_load = pipeline.scan_for_fusion, pipeline.load_for_fusion
    monkeypatch.setattr(pipeline, "scan_for_fusion", lambda *a, **k: scans.append(a[1]) or real_scan(*a, **k))
    monkeypatch.setattr(pipeline, "load_for_fusion", lambda *a, **k: reads.append(a) or real_load(*a, **k))
    for path, rescans in ((MLP, 0), (ASSET_MODELS / "current" / "gpt2_2l_sdpa_past_ts17.onnx", 1)):
        s = Session()
        doc = load_document(path)
        s.adopt(doc, s.initial_expansion(doc))
        wait_for(s.start_scan())
        tuned = []
        s.events.tuned.connect(lambda e, tuned=tuned: tuned.append(e.result))
        scans.clear()
        wait_for(s.tune(TuneSettings(**{**FAST, "budget_s": 3, "runs": 8})))  # reads, not verdict
        assert len(tuned) == 1 and tuned[0].original is doc.model and reads == []
        assert len(scans) == rescans
        if rescans:
            assert scans[0] == tuned[0].report.config["dims"] and scans[0]["past_sequence"] == 255
