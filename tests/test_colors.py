"""Issue 30: rule colours chosen as a set, CIEDE2000 >= 20 apart and from the op-family, mark and group
colours; a collapsed group of several rules drawn neutral with the rules' swatches."""

from __future__ import annotations

import itertools

import pytest

from fuseview.colors import (
    MIN_DISTANCE,
    MIXED_RULES,
    PALETTE,
    RESERVED,
    RULE_PALETTE,
    SELECTION,
    assign_rule_colors,
    ciede2000,
    color_distance,
    rule_color,
)
from fuseview.fusion.rules import catalogue
from fuseview.session.panes import candidate_marks

# Sharma, Wu and Dalal (2005), "The CIEDE2000 color-difference formula": test data pairs 1, 7, 14, 17, 25, 34
SHARMA = [
    ((50.0, 2.6772, -79.7751), (50.0, 0.0, -82.7485), 2.0425),
    ((50.0, 0.0, 0.0), (50.0, -1.0, 2.0), 2.3669),
    ((50.0, 2.5, 0.0), (58.0, 24.0, 15.0), 19.4535),
    ((50.0, 2.5, 0.0), (73.0, 25.0, -18.0), 27.1492),
    ((60.2574, -34.0099, 36.2677), (60.4626, -34.1751, 39.4387), 1.2644),
    ((90.8027, -2.0831, 1.441), (91.1528, -1.6435, 0.0447), 1.4441),
]


@pytest.mark.parametrize(("lab1", "lab2", "expected"), SHARMA)
def test_ciede2000_matches_the_published_test_data(lab1, lab2, expected):
    assert ciede2000(lab1, lab2) == pytest.approx(expected, abs=1e-4)
    assert ciede2000(lab2, lab1) == pytest.approx(expected, abs=1e-4)  # symmetric


def test_rule_colours_are_pairwise_at_least_20_apart():
    for a, b in itertools.combinations(RULE_PALETTE, 2):
        assert color_distance(a, b) >= MIN_DISTANCE == 20, (a, b, color_distance(a, b))


def test_rule_colours_keep_20_from_op_family_selection_and_group_colours():
    must_differ = {strong for strong, _pale in PALETTE.values()} | {SELECTION, MIXED_RULES, *PALETTE["group"]}
    assert must_differ <= set(RESERVED)
    for rule_c in RULE_PALETTE:
        for other in must_differ:
            assert color_distance(rule_c, other) >= 20, (rule_c, other, color_distance(rule_c, other))


def test_the_set_given_to_a_models_rules_keeps_its_distances():
    names = [r.name for r in catalogue()]
    # every window of the catalogue as long as the palette: no two rules of such a model look alike
    for start in range(len(names)):
        rules = [names[(start + i) % len(names)] for i in range(len(RULE_PALETTE))]
        colours = assign_rule_colors(rules)
        assert sorted(colours) == sorted(rules)
        for a, b in itertools.combinations(colours.values(), 2):
            assert color_distance(a, b) >= 20
    # a rule alone, or with rules that do not take its slot, wears its own colour
    assert assign_rule_colors([names[0]]) == {names[0]: rule_color(names[0])}
    assert assign_rule_colors(["plugin_rule"])["plugin_rule"] == rule_color("plugin_rule")


def test_demo_rules_get_distinct_colours_far_apart():
    from fuseview import DEMO_MODEL
    from fuseview.fusion.scan import scan_file

    rules = {c.rule for c in scan_file(DEMO_MODEL).candidates}
    colours = assign_rule_colors(rules)
    assert len(rules) >= 5
    assert min(color_distance(a, b) for a, b in itertools.combinations(colours.values(), 2)) >= 20
    # the two that used to look alike (the same green)
    assert color_distance(colours["attention_packed"], colours["shape_chain"]) >= 20


def test_a_group_of_several_rules_is_neutral_and_carries_each_rules_swatch():
    marks = candidate_marks(
        [
            ("r1", "#ff0044", "pending", ["g:layer", "n:1"]),
            ("r2", "#00dd00", "pending", ["g:layer"]),
            ("r1", "#ff0044", "pending", ["g:one_rule"]),
        ]
    )
    assert marks.colors["g:layer"] == MIXED_RULES and marks.swatches["g:layer"] == ["#ff0044", "#00dd00"]
    assert marks.colors["g:one_rule"] == "#ff0044" and "g:one_rule" not in marks.swatches
    assert marks.badges["g:layer"] == 2 and "n:1" not in marks.swatches
