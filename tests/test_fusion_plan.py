"""Plans: accept/reject/conflicts/undo, JSON round trip and re-apply by id; apply is pure."""

from __future__ import annotations

import json

import onnx
import pytest

from fuseview.errors import FuseviewError
from fuseview.fusion.apply import apply_candidates, apply_plan, check_fused
from fuseview.fusion.plan import ACCEPT, REJECT, Plan
from fuseview.fusion.scan import load_model, scan_model
from fuseview.provenance import CANDIDATE_KEY, ORIGIN_KEY, RULE_KEY

from .conftest import GPT2_MODELS

GPT2 = GPT2_MODELS / "gpt2_2l_ts17.onnx"


@pytest.fixture(scope="module")
def gpt2():
    if not GPT2.exists():
        pytest.fail(f"{GPT2} is missing")
    model = load_model(GPT2)
    return model, scan_model(model, path=str(GPT2))


def test_candidate_ids_are_stable_across_scans(gpt2):
    model, scan = gpt2
    again = scan_model(load_model(GPT2))
    assert [c.id for c in scan.candidates] == [c.id for c in again.candidates]
    assert len({c.id for c in scan.candidates}) == len(scan.candidates)


def test_accept_rejects_conflicts_and_undo_restores(gpt2):
    _model, scan = gpt2
    c = next(c for c in scan.candidates if c.conflicts)
    plan = Plan(scan.candidates)
    plan.accept(c.id)
    assert plan.state(c.id) == ACCEPT
    assert all(plan.state(o) == REJECT for o in c.conflicts)
    other = c.conflicts[0]
    plan.accept(other)
    assert plan.state(other) == ACCEPT and plan.state(c.id) == REJECT
    assert plan.undo()
    assert plan.state(c.id) == ACCEPT and plan.state(other) == REJECT
    assert plan.undo() and plan.state(c.id) is None and not plan.undo()


def test_redo_replays_undone_steps_and_a_new_step_clears_it(gpt2):
    _model, scan = gpt2
    c = next(c for c in scan.candidates if c.conflicts)
    plan = Plan(scan.candidates)
    plan.accept(c.id)
    after_accept = dict(plan.decisions)
    plan.reject(c.conflicts[0])  # no change: already rejected by the accept, so no step
    assert len(plan.history) == 1
    assert plan.undo() and plan.decisions == {}
    assert plan.redo() and plan.decisions == after_accept
    assert not plan.redo()  # nothing left to redo
    assert plan.undo()
    plan.reject(c.id)  # a new step after an undo drops what could be redone
    assert not plan.redo() and plan.state(c.id) == REJECT


def test_set_many_and_adopt_are_one_step_and_unknown_ids_are_reported(gpt2, tmp_path):
    _model, scan = gpt2
    ids = [c.id for c in scan.candidates[:3]]
    plan = Plan(scan.candidates)
    assert plan.set_many({ids[0]: ACCEPT, ids[1]: REJECT}) and len(plan.history) == 1
    assert not plan.set_many({ids[0]: ACCEPT})
    saved = tmp_path / "plan.json"
    data = plan.to_json()
    data["decisions"].append({"id": "gone-123", "rule": "x", "decision": ACCEPT})
    saved.write_text(__import__("json").dumps(data))
    with pytest.raises(FuseviewError, match="gone-123"):
        Plan.load(saved, scan.candidates)
    loaded = Plan.load(saved, scan.candidates, strict=False)
    assert loaded.unknown_ids == ["gone-123"]
    fresh = Plan(scan.candidates)
    assert fresh.adopt(loaded) and len(fresh.history) == 1
    assert fresh.decisions == {ids[0]: ACCEPT, ids[1]: REJECT}
    assert fresh.undo() and fresh.decisions == {}
    saved.write_text('{"format": "fuseview-plan", "decisions": [42]}')
    with pytest.raises(FuseviewError, match="object"):
        Plan.load(saved, scan.candidates)


def test_accept_and_reject_by_rule(gpt2):
    _model, scan = gpt2
    plan = Plan(scan.candidates)
    plan.reject("skip_layer_norm")
    assert all(plan.state(c.id) == REJECT for c in scan.candidates if c.rule == "skip_layer_norm")
    plan.accept_all()
    assert not any(c.rule == "skip_layer_norm" for c in scan.candidates if c.id in plan.accepted())
    with pytest.raises(FuseviewError):
        plan.accept("no_such_rule")


def test_plan_json_round_trip_reapplies_to_same_model(gpt2, tmp_path):
    model, scan = gpt2
    plan = Plan(scan.candidates, str(GPT2))
    plan.accept_all()
    path = tmp_path / "plan.json"
    plan.save(path)
    data = json.loads(path.read_text())
    assert data["model"] == str(GPT2) and data["fuseview_version"] and data["decisions"]
    fresh = scan_model(load_model(GPT2))
    loaded = Plan.load(path, fresh.candidates)
    assert loaded.accepted() == plan.accepted()
    a = apply_candidates(model, scan, plan.accepted()).model
    b = apply_plan(load_model(GPT2), loaded.accepted()).model
    assert a.SerializeToString() == b.SerializeToString()


def test_plan_load_bad_input(tmp_path, gpt2):
    _model, scan = gpt2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FuseviewError):
        Plan.load(bad, scan.candidates)
    bad.write_text(
        json.dumps({"format": "fuseview-plan", "decisions": [{"id": "x-1", "decision": "accept"}]})
    )
    with pytest.raises(FuseviewError):
        Plan.load(bad, scan.candidates)


def test_apply_is_pure_and_records_provenance(gpt2):
    model, scan = gpt2
    before = model.SerializeToString()
    plan = Plan(scan.candidates)
    plan.accept_all()
    res = apply_candidates(model, scan, plan.accepted())
    assert model.SerializeToString() == before
    check_fused(res.model)
    fused_nodes = [n for n in res.model.graph.node if n.metadata_props]
    assert len(fused_nodes) >= len(res.applied)
    original_names = {n.name for n in model.graph.node}
    for n in fused_nodes:
        meta = {p.key: p.value for p in n.metadata_props}
        assert set(json.loads(meta[ORIGIN_KEY])) <= original_names
        assert meta[RULE_KEY] and meta[CANDIDATE_KEY] in plan.accepted()
    # topological order
    seen = {i.name for i in res.model.graph.input} | {t.name for t in res.model.graph.initializer}
    for n in res.model.graph.node:
        assert all(i in seen for i in n.input if i), n.name
        seen.update(n.output)


def test_apply_refuses_unknown_and_conflicting_ids(gpt2):
    model, scan = gpt2
    with pytest.raises(FuseviewError):
        apply_candidates(model, scan, ["nope-123"])
    c = next(c for c in scan.candidates if c.conflicts)
    with pytest.raises(FuseviewError):
        apply_candidates(model, scan, [c.id, c.conflicts[0]])


def test_apply_nothing_gives_an_equivalent_model(gpt2):
    model, scan = gpt2
    res = apply_candidates(model, scan, [])
    onnx.checker.check_model(res.model)
    assert len(res.model.graph.node) == len(model.graph.node)
