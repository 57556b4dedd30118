"""--budget bounds tune's search validations too: an onnxruntime run past the deadline is terminated
(RunOptions.terminate), and a tune whose budget ends before accept-all is validated keeps the original
at once instead of validating (and then timing) past its budget."""

from __future__ import annotations

import time

import onnx
import pytest

from fuseview.fusion.validate import OriginalFails, ValidationOverBudget, validate
from fuseview.runtime import samples
from fuseview.tuning.settings import TuneSettings
from fuseview.workflows.tune import tune

# one onnxruntime run of this model takes about half a second on a 16-core machine (2 s on 2 loaded cores);
# a validation runs it six times (3 input sets, two models), so a deadline of one run's time cannot be met
# on any machine; the deadlines are in runs of it, so a bigger model would only make the test slower
DIMS = {"batch": 1, "seq": 4096}


@pytest.fixture(scope="module")
def slow_model() -> onnx.ModelProto:
    return samples.gelu_original(hidden=1024, inner=4096)


@pytest.fixture(scope="module")
def one_run_s(slow_model) -> float:
    """Seconds one run of the slow model takes here (the fastest of two, after a warm-up)."""
    from fuseview.fusion.validate import model_runner
    from fuseview.runtime.inputs import make_feeds

    run, feeds = model_runner(slow_model, False), make_feeds(slow_model, DIMS, seed=0)
    run(feeds)
    times = []
    for _ in range(2):
        t = time.monotonic()
        run(feeds)
        times.append(time.monotonic() - t)
    return min(times)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_validation_past_its_deadline_stops_and_blames_the_budget(slow_model, one_run_s):
    with pytest.raises(ValidationOverBudget, match="budget is spent") as info:
        validate(slow_model, slow_model, False, DIMS, deadline=time.monotonic() + one_run_s)
    assert not isinstance(info.value, OriginalFails)  # neither model is blamed
    with pytest.raises(ValidationOverBudget):  # a deadline already past: nothing starts
        validate(slow_model, slow_model, False, DIMS, deadline=time.monotonic() - 1)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_tune_whose_budget_ends_before_accept_all_is_validated_keeps_the_original(slow_model, one_run_s,
                                                                                   tmp_path):
    path = tmp_path / "slow.onnx"
    onnx.save(slow_model, path)
    budget = 2 * one_run_s  # the original's check run and part of the first validation
    rep = tune(path, TuneSettings(budget_s=budget, dims=DIMS, ort_optimizer="off")).report
    assert rep.stopped == "budget" and rep.accepted() == [] and rep.final.chosen == "original"
    assert any("before accept-all was validated" in n for n in rep.notes)
    assert all(d.reason == "not measured: budget spent" for d in rep.decisions)
    # the search stopped at the budget, not after a whole validation (six runs) and the final check
    assert rep.config["seconds"] < budget + 3 * one_run_s, (rep.config["seconds"], one_run_s)
