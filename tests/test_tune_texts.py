"""Issue 37.4: tune's texts read once and follow the verdict rule.

tests/data/tune/gpt2_2l_budget15.json is a real report: `fuseview tune fuseview/data/demo_gpt2_2l.onnx
-o OUT --budget 15 --threads 1 --json REPORT` on a shared 2-core machine (load ~14): its budget ran out,
so most figures are "cannot tell" and 12 accepted candidates share the final check's reason."""

from __future__ import annotations

import copy
import io

from fuseview.commands.tune import decision_groups, group_rows, print_summary
from fuseview.reports.tune import TuneReport
from fuseview.tuning.run import subset_change
from tests.conftest import ROOT
from tests.verdict_words import assert_words_follow_intervals

REPORT = ROOT / "tests" / "data" / "tune" / "gpt2_2l_budget15.json"


def summary_text(rep: TuneReport) -> str:
    out = io.StringIO()
    print_summary(rep, out)
    return out.getvalue()


def assert_tune_text_reads_once(rep: TuneReport) -> None:
    """Every line follows its intervals; every reason is printed once; no self-comparison; plurals."""
    text = summary_text(rep)
    assert_words_follow_intervals(text.splitlines(), rep.config["threshold"])
    assert_words_follow_intervals([rep.final.summary()], rep.config["threshold"])
    for d in rep.decisions:
        assert text.count(d.reason) <= 1, d.reason
    assert "it is accept-all" not in text and "×accept-all: it is" not in rep.final.summary()
    assert " 1 validations" not in text and " 1 measurements" not in text
    group_lines = text.split("groups ", 1)[1].split("decisions ", 1)[0].splitlines()[1:] if rep.groups else []
    assert len(group_lines) == len({g.rule for g in rep.groups})  # one row per rule


def test_the_committed_report_reads_once():
    rep = TuneReport.load(REPORT)
    assert len(rep.decisions) == 28 and rep.config["validations"] == 1
    assert_tune_text_reads_once(rep)
    text = summary_text(rep)
    assert "tune took" in text and " 1 validation " in text
    assert "accept 12: by the final check (below)" in text
    assert text.count(rep.final.reason) == 1


def test_a_rule_tested_twice_is_one_row():
    """prune_groups (accept-all's members) and run_groups (those it left out) each add a group."""
    rep = TuneReport.load(REPORT)
    first = next(g for g in rep.groups if g.rule == "skip_layer_norm")
    again = copy.deepcopy(first)
    again.tested, again.outcome = ["skip_layer_norm-1d75a0a8"], "reject"
    rep.groups.append(again)
    rows = [r for r in group_rows(rep.groups) if r[0] == "skip_layer_norm"]
    assert len(rows) == 1 and rows[0][1] == "2 of 5" and rows[0][2] == "mixed"
    assert rows[0][3].count("cannot tell") == 2  # both measurements, each with what it was against
    assert_tune_text_reads_once(rep)


def test_each_reason_once_with_all_its_candidates():
    rep = TuneReport.load(REPORT)
    groups = decision_groups(rep.decisions)
    assert sum(len(ids) for _d, _r, ids in groups) == len(rep.decisions)
    assert len({(d, r) for d, r, _ids in groups}) == len(groups) == 2


def test_a_subset_names_what_it_dropped_and_added():
    assert subset_change(["a", "c", "x"], ["a", "b", "c", "d"]) == ", without b, d; with x"
    assert subset_change(["a"], ["a"]) == ""
    many = subset_change([], [f"c{i}" for i in range(9)], most=6)
    assert many == ", without c0, c1, c2, c3, c4, c5 and 3 more"


def test_the_measured_effect_cell_never_repeats_the_whole_model_figure(qapp):
    from fuseview.ui.tune_dialog import effect_cell

    rep = TuneReport.load(REPORT)
    final = [d for d in rep.decisions if d.stage == "final" and d.effect is not None]
    assert len(final) == 12
    for d in final:
        text, tip = effect_cell(d)
        assert text == "not measured alone" and "whole chosen model" in tip
