"""Interleaved A/B verdicts with real onnxruntime sessions: A/A never faster or slower, padded slower."""

from __future__ import annotations

import onnx
import pytest

from fuseview.cli import main
from fuseview.runtime import samples
from fuseview.runtime.job import ProfileRequest, default_profile_runs, run_profile
from fuseview.runtime.report import load_report
from fuseview.stats import compare_timings


def with_noop_chain(model: onnx.ModelProto, n: int) -> onnx.ModelProto:
    """The model with n Identity nodes before its first output: same result, n more node dispatches."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    out = m.graph.output[0].name
    for node in m.graph.node:
        node.output[:] = [f"{out}__pad0" if o == out else o for o in node.output]
    for i in range(n):
        dst = out if i == n - 1 else f"{out}__pad{i + 1}"
        m.graph.node.append(onnx.helper.make_node("Identity", [f"{out}__pad{i}"], [dst], name=f"pad{i}"))
    return m


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("ab")
    base = samples.gelu_original(hidden=16, inner=32)
    paths = {"a": d / "a.onnx", "copy": d / "copy.onnx", "slow": d / "slow.onnx"}
    onnx.save(base, paths["a"])
    paths["copy"].write_bytes(paths["a"].read_bytes())
    onnx.save(with_noop_chain(base, 400), paths["slow"])
    return paths


def test_padded_model_has_the_same_outputs(files):
    slow = onnx.load(str(files["slow"]))
    onnx.checker.check_model(slow)
    assert [o.name for o in slow.graph.output] == [o.name for o in onnx.load(str(files["a"])).graph.output]
    assert sum(n.op_type == "Identity" for n in slow.graph.node) == 400


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_a_shows_no_difference(files):
    def a_a() -> dict:
        return run_profile(ProfileRequest(str(files["a"]), str(files["copy"]), provider="cpu", runs=60,
                                          threads=1, threshold=0.05, profile_runs=2, dims={"seq": 8}))

    rep = a_a()
    if rep["comparison"]["latency"]["verdict"] not in ("no difference", "cannot tell"):
        # a 95 % interval misses by chance 1 time in 20 (more as the suite's first test, caches cold):
        # one more comparison; two misses in a row (1 in 400) fail
        rep = a_a()
    lat = rep["comparison"]["latency"]
    assert lat["method"] == "interleaved" and lat["verdict"] in ("no difference", "cannot tell"), lat
    a, b = (m["latency_ms"]["runs"] for m in rep["models"])
    # at 99.9 % the interval of two byte-identical models must hold 1 (at 95 % it misses 1 time in 20)
    wide = compare_timings(a, b, paired=True, level=0.999)
    assert wide.ci[0] <= 1 <= wide.ci[1]


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_a_model_with_an_extra_no_op_chain_is_slower(files):
    rep = run_profile(ProfileRequest(str(files["a"]), str(files["slow"]), provider="cpu", runs=60, threads=1,
                                     profile_runs=2, dims={"seq": 8}))
    lat = rep["comparison"]["latency"]
    assert lat["verdict"] == "slower" and lat["ci"][1] < 1, lat
    assert rep["comparison"]["passed"]  # Identity changes nothing in the outputs
    # reversed, the padded model is the model and the original the faster one
    rev = run_profile(ProfileRequest(str(files["slow"]), str(files["a"]), provider="cpu", runs=60, threads=1,
                                     profile_runs=2, dims={"seq": 8}))
    assert rev["comparison"]["latency"]["verdict"] == "faster" and rev["comparison"]["latency"]["ci"][0] > 1


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_cli_prints_one_verdict_line_and_writes_v2(files, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["profile", str(files["a"]), "--against", str(files["slow"]), "--runs", "40", "--threads", "1",
               "--profile-runs", "3", "--dim", "seq=8", "--json", str(out), "--quiet", "--threshold", "0.05",
               "--ort-opt", "disabled"])  # at "all" onnxruntime removes the Identity chain
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lines = [ln for ln in cap.out.splitlines() if ln.startswith("verdict: ")]
    assert len(lines) == 1 and "slower" in lines[0] and "95% CI" in lines[0] and "threshold 5%" in lines[0]
    rep = load_report(out)
    assert rep["schema_version"] == 3 and rep["comparison"]["latency"]["threshold"] == 0.05
    assert [m["profiled_runs"] for m in rep["models"]] == [3, 3]
    assert [m["runs"] for m in rep["models"]] == [42, 42]  # 14 rounds of 3 sessions a model
    assert "profiler overhead:" in cap.out


@pytest.mark.parametrize("args, needle", [
    (["--threshold", "1.5"], "--threshold"),
    (["--profile-runs", "0"], "--profile-runs"),
])
def test_bad_threshold_and_profile_runs_are_one_line_errors(files, capsys, args, needle):
    rc = main(["profile", str(files["a"]), "--against", str(files["copy"]), "--runs", "2", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("fuseview: error: ") and needle in err[0]


def test_default_profile_runs_keep_profiling_a_fraction_of_the_runs():
    assert default_profile_runs(3) == 3
    assert default_profile_runs(20) == 5
    assert default_profile_runs(50) == 5
    assert default_profile_runs(500) == 50


def test_fusion_difference_below_floor_or_spread_is_not_measurable():
    import numpy as np

    from fuseview.runtime.job import add_fusion_spreads

    groups = [{"key": "big", "origin": ["a1", "a2", "a3"], "nodes": ["f1"]},
              {"key": "tiny", "origin": ["t1", "t2"], "nodes": ["g1"]},
              {"key": "noisy", "origin": ["n1"], "nodes": ["h1"]}]
    runs_a = {"a1": np.full(6, 100.0), "a2": np.full(6, 50.0), "a3": np.full(6, 50.0),
              "t1": np.full(6, 3.0), "t2": np.full(6, 3.0), "n1": np.array([10.0, 90, 10, 90, 10, 90])}
    runs_b = {"f1": np.full(6, 60.0), "g1": np.full(6, 5.0), "h1": np.array([40.0, 60, 40, 60, 40, 60])}
    times = [{"key": g["key"]} for g in groups]
    add_fusion_spreads(times, {"node_runs_us": runs_a}, {"node_runs_us": runs_b}, groups,
                       {"node_floor_us": 2.0, "per_event_us": 5.0})
    big, tiny, noisy = times
    assert big["measurable"] and big["original_spread_us"] == [200.0, 200.0]
    assert not tiny["measurable"]  # 6 us vs 5 us: within 3 nodes' profiler floor
    assert not noisy["measurable"]  # medians differ by 0, runs scatter widely


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_cli_line_json_and_api_carry_the_one_verdict(files, tmp_path, capsys):
    from fuseview import api
    from fuseview.stats import verdict

    out = tmp_path / "few.json"
    # 4 runs a model: an interval too wide for a verdict here; whatever it is, every front says the same
    rc = main(["profile", str(files["a"]), "--against", str(files["copy"]), "--runs", "4", "--threads", "1",
               "--profile-runs", "2", "--dim", "seq=8", "--json", str(out), "--quiet"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    lat = load_report(out)["comparison"]["latency"]
    assert lat["verdict"] == verdict(*lat["ci"], lat["threshold"])
    line = next(ln for ln in cap.out.splitlines() if ln.startswith("verdict: "))
    if lat["verdict"] == "cannot tell":
        assert line.startswith("verdict: cannot tell on this machine now")
    else:
        assert lat["verdict"] in line and "cannot tell" not in line
    rep = api.profile(str(files["a"]), against=str(files["copy"]), runs=4, threads=1, profile_runs=2,
                      dims={"seq": 8})
    api_lat = rep.to_json()["comparison"]["latency"]
    assert rep.comparison is not None and rep.comparison.verdict == api_lat["verdict"]  # typed, the same
    assert api_lat["verdict"] == verdict(*api_lat["ci"], api_lat["threshold"])


def test_the_looks_of_a_sequential_ab_spend_five_percent_in_all():
    from fuseview.runtime.ab import look_level

    levels = [look_level(0.95, k) for k in range(1, 100_001)]
    assert levels == sorted(levels) and 0.969 < levels[0] < 0.970
    assert sum(1 - x for x in levels) < 0.05  # however many looks a budget allows
