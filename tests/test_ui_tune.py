"""Fusion → Tune… in the real window (offscreen): a background tune with a real onnxruntime measurement sets
the decisions and fills the candidates dock's measured-effect column; Stop keeps the best set so far."""

from __future__ import annotations

import pytest

from fuseview.tuning.settings import TuneSettings
from fuseview.ui.candidates_panel import COLUMNS, EFFECT_COLUMN
from fuseview.ui.main_window import MainWindow
from fuseview.ui.tune_dialog import TuneDialog

from .conftest import ASSET_MODELS
from .test_ui_workbench import open_scanned, win  # noqa: F401 - the window fixture

MLP = ASSET_MODELS / "mlp_gelu_erf_ts17.onnx"
MS = 120_000
# the final check measures until it decides or the budget ends: 20 s leaves the search its steps and keeps
# the whole tune well inside the tests' 60 s waits
FAST = dict(runs=15, sessions=3, max_batches=1, warmup=2, seeds=1, ort_optimizer="off", budget_s=20)


@pytest.fixture
def tuned_win(win, qtbot) -> MainWindow:  # noqa: F811 - the imported fixture
    open_scanned(qtbot, win, MLP)
    return win


def test_the_fusion_menu_has_tune_and_its_dialog_gives_deployment_settings(tuned_win, qtbot):
    texts = [a.text() for a in tuned_win.workbench.fusion_menu.actions()]
    assert "&Tune…" in texts
    dialog = TuneDialog(tuned_win, TuneSettings())
    qtbot.addWidget(dialog)
    dialog.threads.setValue(1)
    dialog.budget.setValue(30)
    s = dialog.settings({"seq": 16})
    assert (s.ort_opt, s.threads, s.budget_s, s.dims) == ("all", 1, 30.0, {"seq": 16})
    assert COLUMNS[EFFECT_COLUMN] == "Measured effect"


@pytest.mark.slow
def test_a_background_tune_sets_decisions_and_measured_effects(tuned_win, qtbot):
    wb = tuned_win.workbench
    with qtbot.waitSignal(wb.tuner.finished, timeout=MS) as sig:
        assert wb.tuner.start(TuneSettings(threads=1, **FAST)) is not None
    rep = sig.args[0].report
    d = wb.session.decisions
    assert sorted(d.accepted()) == sorted(rep.accepted())
    for x in rep.decisions:
        assert d.plan.state(x.candidate) == x.decision
    table = wb.panel.table
    shown = {}
    for row in range(table.rowCount()):
        cid = table.item(row, 0).data(256)
        shown[cid] = (table.item(row, EFFECT_COLUMN).text(), table.item(row, EFFECT_COLUMN).toolTip())
    measured = [x for x in rep.decisions if x.effect is not None]
    assert measured
    for x in measured:
        text, tip = shown[x.candidate]
        alone = f"{x.effect.speedup_p50:.2f}x {x.effect.verdict}"
        assert text == (alone if x.stage != "final" else "not measured alone") and x.reason in tip
    # the user overrides a decision: one undoable step on top of the tune's
    some = rep.decisions[0].candidate
    wb.panel.select_id(some)
    (wb.panel.reject_current if d.plan.state(some) == "accept" else wb.panel.accept_current)()
    assert d.plan.state(some) != rep.decisions[0].decision
    wb.panel.undo()
    assert d.plan.state(some) == rep.decisions[0].decision


@pytest.mark.slow
def test_stop_keeps_the_best_so_far(tuned_win, qtbot):
    wb = tuned_win.workbench
    with qtbot.waitSignal(wb.tuner.finished, timeout=MS) as sig:
        wb.tuner.start(TuneSettings(threads=1, **FAST))
        wb.tuner.cancel()
    rep = sig.args[0].report
    assert rep.stopped == "cancelled"
    assert sorted(wb.session.decisions.accepted()) == sorted(rep.accepted())
    assert "stopped: cancelled" in tuned_win.statusBar().currentMessage()


@pytest.mark.slow
def test_when_tune_ends_a_summary_bar_shows_the_verdict_and_applies_or_saves_it(tuned_win, qtbot, tmp_path):
    from fuseview.reports.tune import TuneReport

    wb = tuned_win.workbench
    tuned_win.resize(1400, 900)
    bar = wb.tuner.summary
    assert not bar.isVisible()  # nothing to say before a tune
    with qtbot.waitSignal(wb.tuner.finished, timeout=MS) as sig:
        wb.tuner.start(TuneSettings(threads=1, **FAST))
    rep = sig.args[0].report
    f = rep.final
    assert bar.isVisible()
    text = bar.plain_text()
    # the report's own figures: chosen model, x original and x accept-all with intervals, counts, verdict
    assert f.summary() in text and f"verdict {f.verdict}" in text
    assert "×original" in text
    # issue 37.4: the chosen model is not compared with itself ("×accept-all: it is accept-all")
    assert ("×accept-all" in text) == (f.chosen != "accept_all") and "it is accept-all" not in text
    kept = len(rep.accepted())
    assert f"{kept} kept, {len(rep.decisions) - kept} rejected of {len(rep.decisions)}" in text
    assert "the model as opened, outputs at atol 0.0001, rtol 0.001" in text  # its precision's tolerances
    for e in (f.against_original, f.against_accept_all):
        if e is not None:
            assert e.text() in text
    # the measured effect is among the first columns a 1400 x 900 window shows, without scrolling
    table = wb.panel.table
    header = table.horizontalHeader()
    qtbot.waitUntil(lambda: table.viewport().width() > 0)
    assert header.visualIndex(EFFECT_COLUMN) <= 2
    assert 0 <= header.sectionViewportPosition(EFFECT_COLUMN) < table.viewport().width()
    saved = bar.save_to(tmp_path / "tune.json")
    assert TuneReport.load(saved).final.summary() == f.summary()
    assert bar.apply_button.text() == "Apply chosen set" and bar.save_button.text().startswith("Save report")
    if rep.accepted():  # Apply chosen set builds the tune's set, whatever the user changed since
        wb.panel.select_id(rep.accepted()[0])
        wb.panel.reject_current()
        with qtbot.waitSignal(wb.applied, timeout=MS):
            bar.apply_button.click()
        assert sorted(wb.session.decisions.accepted()) == sorted(rep.accepted())


def test_the_profile_dock_has_threads_and_sessions_and_its_advice_names_them(tuned_win):
    from fuseview.ui.profile_texts import headline_text

    panel = tuned_win.workbench.profile_panel
    panel.threads.setValue(1)
    panel.sessions.setValue(5)
    req = panel.request()
    assert (req.threads, req.sessions) == (1, 5)
    lat = {"method": "interleaved", "runs": 12, "level": 0.95, "speedup_p50": 1.1, "ci": [0.7, 1.6],
           "threshold": 0.02, "verdict": "cannot tell", "sessions": 3,
           "noise": {"cv_model": 0.3, "cv_against": 0.3, "warning": "sessions of one model differ",
                     "cv_paired": 0.3}}
    models = [{"role": r, "latency_ms": {"p50": 1.0}, "profile_session": {"threads": 0}}
              for r in ("model", "against")]
    head = headline_text({"models": models, "comparison": {"latency": lat}})
    assert "cannot tell on this machine now" in head
    assert "Threads 1" in head and "more Sessions" in head and "--" not in head  # the dock's own controls


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_the_window_tunes_a_kv_cache_decoder_at_its_decode_step(win, qtbot):  # noqa: F811 - the fixture
    open_scanned(qtbot, win, ASSET_MODELS / "current" / "gpt2_2l_sdpa_past_ts17.onnx")
    wb = win.workbench
    # the dims and the note are the point, not the verdict: a short budget
    with qtbot.waitSignal(wb.tuner.finished, timeout=MS) as sig:
        assert wb.tuner.start(TuneSettings(threads=1, **{**FAST, "budget_s": 5})) is not None
    result = sig.args[0]
    assert result.original is win.session.root.model  # the model the session holds: not read again
    assert result.report.config["dims"] == {"sequence": 1, "total_sequence": 256, "past_sequence": 255}
    assert "decode step" in result.report.notes[0]
