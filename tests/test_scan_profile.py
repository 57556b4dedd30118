"""`fuseview scan MODEL --profile REPORT.json`: each candidate's measured cost, joined by node names."""

from __future__ import annotations

import json

import pytest

from fuseview.cli import main
from fuseview.runtime.report import load_report
from tests.conftest import ASSET_MODELS, GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"


@pytest.fixture(scope="module")
def report_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("scanprof") / "gpt2.json"
    assert main(["profile", str(GPT2), "--runs", "3", "--warmup", "1", "--dim", "seq=32", "--threads", "1",
                 "--quiet", "--json", str(out)]) == 0
    return out


def test_scan_json_has_measured_us_and_share(report_path, capsys):
    capsys.readouterr()
    assert main(["scan", str(GPT2), "--dim", "seq=32", "--json", "--profile", str(report_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    nodes = {n["name"]: n for n in load_report(report_path)["models"][0]["nodes"]}
    assert out["profile"]["report"] == str(report_path)
    cands = out["candidates"]
    assert cands
    for c in cands:
        want = sum(nodes[n]["p50_us"] for n in c["nodes"] if n in nodes)
        assert c["measured_us"] == pytest.approx(want) and c["measured_us"] > 0
        assert 0 < c["share"] < 1
        assert c["share"] == pytest.approx(sum(nodes[n]["share"] for n in c["nodes"] if n in nodes))
    by_rule = {}
    for c in cands:
        by_rule.setdefault(c["rule"], []).append(c["share"])
    # 38 attention nodes cost more of the run than the few nodes of a bias Add + tanh-GELU
    assert min(by_rule["attention_mha"]) > max(by_rule["bias_fast_gelu"])


def test_scan_text_shows_the_measured_column(report_path, capsys):
    capsys.readouterr()
    assert main(["scan", str(GPT2), "--dim", "seq=32", "--profile", str(report_path)]) == 0
    out = capsys.readouterr().out
    assert "measured   time of the nodes" in out and " us " in out and "%" in out


def test_scan_without_profile_has_no_measured_fields(capsys):
    assert main(["scan", str(GPT2), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "profile" not in out and all("measured_us" not in c for c in out["candidates"])


def test_report_of_another_model_is_a_one_line_error(report_path, capsys):
    other = ASSET_MODELS / "bert_2l_ts17.onnx"
    rc = main(["scan", str(other), "--profile", str(report_path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "none of this model's candidate nodes" in err[0]


def test_missing_report_is_a_one_line_error(tmp_path, capsys):
    rc = main(["scan", str(GPT2), "--profile", str(tmp_path / "none.json")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "report not found" in err[0]
