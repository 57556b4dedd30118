"""The one A/B runner under load: an A/A, a real speed-up and its reverse decided right beside two busy
loops, every measurement bounded by its budget (`tune --runs 100000 --budget 5` ends near 5 s)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from fuseview.cli import main
from fuseview.runtime.ab import measure_until_decided

from .conftest import ASSET_MODELS
from .load_helpers import busy_loops, matmul_chain


@pytest.fixture(scope="module")
def chains(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("chains")
    light = matmul_chain(d / "light.onnx", 2)
    copy = d / "copy.onnx"
    copy.write_bytes(light.read_bytes())
    return {"light": light, "copy": copy, "heavy": matmul_chain(d / "heavy.onnx", 6)}


@pytest.mark.slow
def test_a_a_speed_up_and_reverse_come_out_right_beside_two_busy_loops(chains):
    feeds = {"x": np.random.default_rng(1).standard_normal((64, 192)).astype(np.float32)}
    sources = [str(chains["light"]), str(chains["copy"]), str(chains["heavy"])]
    with busy_loops(2):
        t0 = time.monotonic()
        seq = measure_until_decided(sources, feeds, [(0, 1), (2, 0), (0, 2)], budget_s=8, provider="cpu",
                                    opt_level="all", threads=1, sessions=3, runs=20, warmup=2)
        took = time.monotonic() - t0
    a_a, speed_up, reverse = seq.estimates[(0, 1)], seq.estimates[(2, 0)], seq.estimates[(0, 2)]
    assert a_a.verdict in ("no difference", "cannot tell"), a_a.summary()  # never faster or slower
    assert speed_up.verdict == "faster" and speed_up.ci[0] > 1, speed_up.summary()
    assert reverse.verdict == "slower" and reverse.ci[1] < 1, reverse.summary()
    assert took < 8 + 6  # the budget, and one batch's sessions being made
    if a_a.verdict == "cannot tell":  # only when the budget ran out, saying how much more would decide
        assert seq.budget_spent and a_a.budget_spent
    assert seq.runs == a_a.runs and seq.batches >= 1


def test_a_decided_pair_stops_after_its_first_batch(chains):
    feeds = {"x": np.random.default_rng(1).standard_normal((64, 192)).astype(np.float32)}
    seq = measure_until_decided([str(chains["heavy"]), str(chains["light"])], feeds, [(0, 1)], budget_s=30,
                                provider="cpu", opt_level="all", threads=1, sessions=2, runs=10, warmup=1)
    est = seq.estimates[(0, 1)]
    assert est.verdict == "faster" and not seq.budget_spent and not est.budget_spent
    assert seq.seconds < 30 and est.to_json()["width"] == pytest.approx(est.ci[1] / est.ci[0])


@pytest.mark.slow
def test_tune_runs_100000_budget_5_ends_near_5_seconds(tmp_path, capsys):
    out, report = tmp_path / "t.onnx", tmp_path / "t.json"
    t0 = time.monotonic()
    rc = main(["tune", str(ASSET_MODELS / "mlp_gelu_erf_ts17.onnx"), "-o", str(out), "--runs", "100000",
               "--budget", "5", "--threads", "1", "--json", str(report), "--quiet", "--ort-optimizer", "off"])
    took = time.monotonic() - t0
    assert rc == 0, capsys.readouterr().err
    assert took < 5 + 10, took  # validations and the final build come on top of the timing budget
    from fuseview.reports.tune import TuneReport

    rep = TuneReport.load(report)
    assert rep.to_json()["final"]["verdict"] in ("faster", "slower", "no difference", "cannot tell")
