"""The JSON report: schema_version 3 (1 and 2 still read), written atomically, bad files refused."""

from __future__ import annotations

import json

import pytest

from fuseview.errors import FuseviewError
from fuseview.runtime import samples
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.report import (
    SCHEMA_VERSION,
    cannot_tell,
    fused_pane_title,
    latency_verdict,
    load_report,
    save_report,
    verdict_line,
)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    import onnx

    d = tmp_path_factory.mktemp("rep")
    onnx.save(samples.gelu_original(), d / "orig.onnx")
    onnx.save(samples.gelu_fused(), d / "fused.onnx")
    req = ProfileRequest(model=str(d / "orig.onnx"), against=str(d / "fused.onnx"), provider="cpu", runs=3,
                         warmup=1, dims={"seq": 16}, seed=5, ort_fusions=True)
    return run_profile(req)


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_report_contents(report):
    assert report["schema_version"] == SCHEMA_VERSION == 3
    env = report["environment"]
    assert env["onnxruntime"] and "CPUExecutionProvider" in env["providers"] and env["cpu"]
    assert env["gpu"] is None  # CUDA not used
    assert report["inputs"]["seed"] == 5 and report["inputs"]["dims"] == {"batch": 1, "seq": 16}
    assert report["inputs"]["feeds"][0]["shape"] == [1, 16, 64]
    roles = [m["role"] for m in report["models"]]
    assert roles == ["model", "against"]
    for m in report["models"]:
        assert m["provider"]["provider"] == "CPUExecutionProvider" and m["ort_opt_level"] == "disabled"
        assert m["nodes"] and m["op_types"] and m["latency_ms"]["p50"] > 0
    (f,) = report["comparison"]["fusions"]
    assert f["time"]["original_nodes"] == 8 and f["passed"]
    assert [x["role"] for x in report["ort_fusions"]] == ["model", "against"]
    lat = report["comparison"]["latency"]
    assert lat["method"] == "interleaved" and lat["runs"] == 3 and lat["level"] == 0.95
    assert lat["sessions"] == 3  # one round of 3 sessions a model
    assert lat["ci"][0] <= lat["speedup_p50"] <= lat["ci"][1]
    assert lat["verdict"] in ("faster", "slower", "no difference", "cannot tell") and lat["threshold"] == 0.02
    assert set(lat["noise"]) >= {"cv_model", "cv_against", "warning"}
    assert "wider than the 2% threshold" in lat["noise"]["warning"]  # 3 runs: no verdict to be trusted
    # the plain runs are the interleaved ones: each model's latency list is the one the verdict used
    assert [len(m["latency_ms"]["runs"]) for m in report["models"]] == [3, 3]
    ovh = report["profiler_overhead"]
    assert ovh["node_floor_us"] >= 0 and ovh["per_event_us"] >= 0
    assert all(o["overhead_us"] == o["nodes"] * ovh["node_floor_us"] for o in report["models"][0]["op_types"])


@pytest.mark.slow  # over ~2 s on a quiet 2-core machine: the fast suite stays under 3 min
def test_round_trip(report, tmp_path):
    path = save_report(report, tmp_path / "r.json")
    assert load_report(path) == json.loads(json.dumps(report))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # no temp file left


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda r: r.update(schema_version=4), "schema_version 4"),
        (lambda r: r["models"][0]["roofline"]["nodes"][0].update(bound="fast"), "bound must be"),
        (lambda r: r["models"][0]["roofline"]["machine"].pop("peak_gbps"), "machine has no 'peak_gbps'"),
        (lambda r: r["comparison"].pop("latency"), "comparison has no 'latency'"),
        (lambda r: r["comparison"]["latency"].update(verdict="maybe"), "verdict 'maybe'"),
        (lambda r: r["comparison"]["latency"].update(ci=[1.0]), "ci must be two numbers"),
        (lambda r: r["comparison"]["latency"]["noise"].pop("cv_model"), "noise has no 'cv_model'"),
        (lambda r: r.update(kind="other"), "not a fuseview profile report"),
        (lambda r: r["environment"].pop("onnxruntime"), "environment has no 'onnxruntime'"),
        (lambda r: r["models"][0].update(nodes="x"), "models\\[0\\].nodes has the wrong type"),
        (lambda r: r["models"][1]["latency_ms"].pop("p90"), "latency_ms.p90"),
        (lambda r: r["models"][0]["nodes"][0].pop("provider"), "nodes\\[0\\] has no 'provider'"),
        (lambda r: r.update(models=[]), "no models"),
    ],
)
def test_invalid_reports_are_refused(report, tmp_path, edit, needle):
    bad = json.loads(json.dumps(report))
    edit(bad)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(FuseviewError, match=needle):
        load_report(p)


def test_unreadable_report(tmp_path):
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(FuseviewError, match="not a readable JSON"):
        load_report(tmp_path / "x.json")
    with pytest.raises(FuseviewError, match="not found"):
        load_report(tmp_path / "missing.json")


def test_version_1_report_still_loads(report, tmp_path):
    # a version 1 report: no interleaved latency, no profiler overhead (what fuseview wrote before)
    old = json.loads(json.dumps(report))
    old["schema_version"] = 1
    del old["comparison"]["latency"], old["profiler_overhead"]
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(old))
    loaded = load_report(p)
    assert loaded["schema_version"] == 1 and latency_verdict(loaded) is None
    assert "profile again" in fused_pane_title(loaded)
    assert verdict_line(loaded) is None


def test_verdict_texts_state_interval_and_verdict(report):
    lat = report["comparison"]["latency"]
    line = verdict_line(report, "original", "fused")
    said = "cannot tell on this machine now" if cannot_tell(lat) else lat["verdict"]
    assert line.startswith("verdict: ") and said in line and f"{lat['ci'][0]:.2f}" in line
    title = fused_pane_title(report, "Fused — 9 nodes")
    assert title.startswith("Fused — 9 nodes · latency ") and "95% CI" in title and said in title
    assert fused_pane_title(report, title) == title  # a second profile replaces the latency part


def test_verdict_line_cannot_tell_when_the_interval_is_too_wide(report):
    wide = json.loads(json.dumps(report))
    wide["comparison"]["latency"].update(speedup_p50=3.62, ci=[0.08, 167.59], verdict="no difference")
    line = verdict_line(wide)
    assert line.startswith("verdict: cannot tell on this machine now") and "3.62" not in line
    assert "3.62" not in fused_pane_title(wide, "Fused") and "cannot tell" in fused_pane_title(wide, "Fused")


def test_typed_profile_report_writes_the_text_of_the_raw_report(report, tmp_path):
    """fuseview.reports.ProfileReport over a real profile: typed fields, and the same bytes written back."""
    from fuseview.reports import ProfileReport
    from fuseview.runtime.report import json_safe, report_text

    raw = json_safe(json.loads(json.dumps(report)))
    typed = ProfileReport.from_json(json.loads(json.dumps(raw)))
    assert typed.text() == report_text(in_writer_order(raw))
    assert ProfileReport.load(typed.save(tmp_path / "p.json")) == typed
    original = typed.models[0]
    assert original.role == raw["models"][0]["role"] and original.runs == 3
    assert [n.name for n in original.nodes] == [n["name"] for n in raw["models"][0]["nodes"]]
    assert original.latency_ms.p50 == raw["models"][0]["latency_ms"]["p50"]
    assert typed.environment.gpu is None and typed.inputs.seed == 5
    lat = typed.comparison.latency
    assert lat is not None and lat.verdict == raw["comparison"]["latency"]["verdict"]
    assert typed.comparison.verdict == lat.verdict
    # a version 1 report (no latency) reads and writes as it was
    old = json.loads(json.dumps(raw))
    old["schema_version"] = 1
    del old["comparison"]["latency"], old["profiler_overhead"]
    v1 = ProfileReport.from_json(json.loads(json.dumps(old)))
    assert v1.comparison.latency is None and v1.comparison.verdict is None
    assert v1.text() == report_text(in_writer_order(old))


def in_writer_order(rep: dict) -> dict:
    """rep with its keys where ProfileReport writes them: the top-level fields, then the others; in the
    comparison its other keys first, then passed, outputs, fusions, latency (every nested object as read)."""
    top = ("schema_version", "kind", "created", "environment", "inputs", "models", "comparison")
    cmp = rep["comparison"]
    last = ("passed", "outputs", "fusions", "latency")
    ordered_cmp = {k: v for k, v in cmp.items() if k not in last} | {k: cmp[k] for k in last if k in cmp}
    rest = {k: v for k, v in rep.items() if k not in top}
    return {k: rep[k] for k in top} | {"comparison": ordered_cmp} | rest
