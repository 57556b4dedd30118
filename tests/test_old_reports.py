"""Reports written by an older fuseview still load: a tune report of schema 1 (its environment under config),
saved by fuseview at 537e301^ (`fuseview tune assets/models/mlp_gelu_erf_ts17.onnx --budget 6 --runs 4
--sessions 2 --threads 1 --seeds 1`), is read with its environment at the top and written back as schema 2."""

from __future__ import annotations

import json

from fuseview.reports.tune import SCHEMA_VERSION, TuneReport
from fuseview.workflows.sweep import SweepItem, _row

from .conftest import ROOT

OLD_TUNE = ROOT / "tests" / "data" / "reports" / "tune_schema1_mlp.json"


def test_a_saved_schema_1_tune_report_loads_with_its_environment_at_the_top(tmp_path):
    raw = json.loads(OLD_TUNE.read_text())
    assert raw["schema_version"] == 1 and "environment" not in raw and "environment" in raw["config"]
    report = TuneReport.load(OLD_TUNE)
    assert report.environment == raw["config"]["environment"]
    assert report.environment["target"] == {"kind": "local"} and report.final.chosen == raw["final"]["chosen"]
    assert "environment" not in report.config
    report.save(tmp_path / "again.tune.json")
    again = json.loads((tmp_path / "again.tune.json").read_text())
    assert again["schema_version"] == SCHEMA_VERSION == 2
    assert again["environment"] == raw["config"]["environment"]
    assert TuneReport.load(tmp_path / "again.tune.json").to_json() == report.to_json()
    # a sweep's summary reads where an old report's tune ran, as it reads a new one's
    row = _row(SweepItem("mlp", str(OLD_TUNE), {}), raw, "done before")
    assert row.node == "local" and row.chosen == raw["final"]["chosen"]
