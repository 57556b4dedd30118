"""profile at a KV-cache decoder's decode step (the one rule tune and sweeps use), and `profile --against
--budget S`: interleaved batches until the one verdict rule decides or the budget ends (CLI, API, window)."""

from __future__ import annotations

import json

import pytest

from fuseview.cli import main
from fuseview.errors import FuseviewError
from fuseview.runtime.ab import look_level
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.report import cannot_tell_text, verdict_line
from fuseview.stats import CANNOT_TELL, interval_text, level_text
from tests.conftest import ASSET_MODELS
from tests.load_helpers import matmul_chain

GPT2_PAST = ASSET_MODELS / "current" / "gpt2_2l_sdpa_past_ts17.onnx"  # wpe: 256 positions
LLAMA_PAST = ASSET_MODELS / "current" / "llama_2l_sdpa_past_ts17.onnx"  # rotary computed: no table
FAST = dict(provider="cpu", runs=4, warmup=1, threads=1, profile_runs=1)


@pytest.fixture(scope="module")
def chains(tmp_path_factory):
    d = tmp_path_factory.mktemp("chains")
    return matmul_chain(d / "light.onnx", 2), matmul_chain(d / "heavy.onnx", 8)


def test_profile_measures_a_kv_cache_decoder_at_its_decode_step_and_says_so():
    import fuseview

    rep = fuseview.profile(LLAMA_PAST, **FAST).to_json()
    assert rep["inputs"]["dims"] == {"sequence": 1, "total_sequence": 257, "past_sequence": 256}
    assert rep["inputs"]["note"].startswith("a KV-cache decoder: measured at its decode step, sequence=1")
    feeds = {f["name"]: f["shape"] for f in rep["inputs"]["feeds"]}
    assert feeds["input_ids"] == [1, 1] and feeds["past_key_values.0.key"][2] == 256
    rep = run_profile(ProfileRequest(str(GPT2_PAST), **FAST))  # capped by the position table (256)
    assert rep["inputs"]["dims"]["past_sequence"] == 255 and "position table of 256" in rep["inputs"]["note"]
    rep = fuseview.profile(LLAMA_PAST, dim=["past_sequence=64"], **FAST).to_json()  # --dim: the cache
    assert rep["inputs"]["dims"]["past_sequence"] == 64 and "set by --dim" in rep["inputs"]["note"]
    rep = fuseview.profile(LLAMA_PAST, dims={"sequence": 8}, **FAST).to_json()  # a prompt, as asked: no note
    assert rep["inputs"]["dims"]["sequence"] == 8 and "note" not in rep["inputs"]


def test_the_profile_cli_states_the_decode_step(capsys):
    assert main(["profile", str(GPT2_PAST), "--runs", "3", "--warmup", "1", "--threads", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "dims sequence=1, total_sequence=256, past_sequence=255" in out
    assert "  note: a KV-cache decoder: measured at its decode step" in out


def test_a_budget_measures_until_the_verdict_decides(chains):
    light, heavy = chains
    rep = run_profile(ProfileRequest(str(heavy), str(light), budget_s=60, sessions=2, **FAST))
    lat = rep["comparison"]["latency"]
    # a 4x lighter model is told apart long before the budget: batches stop at the first decided look
    assert lat["verdict"] == "faster" and lat["ci"][0] > 1 and not lat["budget_spent"]
    assert lat["budget_s"] == 60 and lat["batches"] >= 1 and lat["seconds"] < 60
    # the error is spent over the looks: stopping at the first decided one stays honest
    assert lat["level"] == look_level(0.95, lat["batches"]) and lat["level"] > 0.96
    assert lat["runs"] >= 4
    line = verdict_line(rep)
    assert line and "within a budget of 60 s" in line and f"{level_text(lat['level'])} CI" in line


def test_a_budget_that_ends_undecided_says_cannot_tell_with_the_runs_it_would_need(chains):
    light, _heavy = chains
    rep = run_profile(ProfileRequest(str(light), str(light), budget_s=0.5, sessions=1, **FAST))
    lat = rep["comparison"]["latency"]
    assert lat["budget_s"] == 0.5 and lat["batches"] >= 1 and lat["seconds"] < 5  # stops at the budget
    assert lat["budget_spent"] == (lat["verdict"] == CANNOT_TELL)
    # as such a run ends on a busy machine: undecided, the interval's own estimate of the runs it needs
    lat.update(ci=[0.9, 1.2], speedup_p50=1.04, verdict=CANNOT_TELL, budget_spent=True, runs=40,
               more_runs=120)
    text = cannot_tell_text(rep)
    assert "the budget of 0.5 s ended after 40 runs per model" in text
    assert "try --budget 2 (about 160 runs per model)" in text  # 0.5 s x 160 / 40 runs


def test_budget_is_checked_as_the_cli_checks_it(chains, capsys, tmp_path):
    light, heavy = chains
    with pytest.raises(FuseviewError, match="--budget bounds an A/B: give --against"):
        run_profile(ProfileRequest(str(light), budget_s=5))
    with pytest.raises(FuseviewError, match="--budget"):
        import fuseview

        fuseview.profile(light, against=heavy, budget=-1)
    assert main(["profile", str(light), "--against", str(heavy), "--budget", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fuseview: error: --budget"), err


def test_the_cli_budget_decides_and_writes_it_in_the_report(chains, capsys, tmp_path):
    light, heavy = chains
    out = tmp_path / "r.json"
    rc = main(["profile", str(heavy), "--against", str(light), "--budget", "60", "--runs", "4", "--threads",
               "1", "--profile-runs", "1", "--sessions", "2", "--json", str(out), "--quiet"])
    text = capsys.readouterr().out
    lat = json.loads(out.read_text())["comparison"]["latency"]
    # exit 3: the two chains' outputs differ (the verdict never changes the exit code)
    assert rc == 3 and lat["verdict"] == "faster" and lat["budget_s"] == 60
    ratio = interval_text(lat["speedup_p50"], *lat["ci"], lat["threshold"])
    assert (f"verdict: against is faster than model: model/against p50 {ratio} faster"
            f" ({level_text(lat['level'])} CI") in text


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_the_profile_dock_runs_the_budget_through_the_session(qtbot, chains):
    from fuseview.ui.profile_panel import ProfilePanel

    light, heavy = chains
    panel = ProfilePanel()
    qtbot.addWidget(panel)
    try:
        panel.set_models(str(heavy), None)
        panel.budget.setValue(30)
        assert panel.request().budget_s is None  # one model: nothing to decide
        panel.set_models(str(heavy), str(light))
        panel.runs.setValue(4)
        panel.threads.setValue(1)
        assert panel.request().budget_s == 30.0
        with qtbot.waitSignal(panel.profileFinished, timeout=120_000) as got:
            panel.start_profile()
        lat = got.args[0]["comparison"]["latency"]
        assert lat["budget_s"] == 30 and lat["verdict"] == "faster"
        assert "within a budget of 30 s" in panel.env.text() + panel.status.text()
        panel.set_models(str(LLAMA_PAST), None)  # a decoder: the dock says which decode step it measured
        panel.budget.setValue(0)
        panel.runs.setValue(2)
        with qtbot.waitSignal(panel.profileFinished, timeout=120_000):
            panel.start_profile()
        shown = panel.env.text() + panel.status.text()
        assert "decode step, sequence=1 new token over a cache of 256" in shown
    finally:
        panel.cancel()
        panel.shutdown()
