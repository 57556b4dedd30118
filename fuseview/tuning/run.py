"""One tune of a scanned model to a TuneResult: the search (tuning.search), the guarantee check, the final
build (fuseview.workflows.tune is the recipe around it: the target, the model, its dims, the scan)."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import onnx

from fuseview.dims import RunDims
from fuseview.errors import FuseviewError
from fuseview.fusion.pipeline import (
    FuseOptions,
    FuseOutcome,
    build_fused,
    with_weights,
)
from fuseview.fusion.plan import ACCEPT, REJECT, Plan
from fuseview.fusion.scan import ScanResult
from fuseview.graph.lazy_weights import has_disk_weights, read_lazily, weight_bytes
from fuseview.graph.save import save_model_atomic
from fuseview.reports.tune import Effect, FinalCheck, TuneReport
from fuseview.runtime.ab import TimeModels
from fuseview.runtime.profiling import Cancel, Cancelled
from fuseview.runtime.sessions import release_freed_memory
from fuseview.stats import CANNOT_TELL, FASTER, NO_DIFFERENCE, SLOWER
from fuseview.tuning.search import FINAL_LABEL, BudgetSpent, Progress, Search
from fuseview.tuning.settings import TuneSettings

_RIVAL_FILE_LIMIT = 1_800_000_000  # protobuf writes one file up to 2 GiB


@dataclass
class TuneResult:
    """What a tune chose: the report, the plan (every candidate decided), the models and the final build."""

    report: TuneReport
    plan: Plan
    original: onnx.ModelProto
    outcome: FuseOutcome | None  # the fused build of the accepted set; None when nothing is accepted
    base_dir: str | os.PathLike | None = None  # where the weights left on disk are (streamed when saved)

    @property
    def unchanged(self) -> bool:
        """True when no fusion is kept (the model to write is the original)."""
        return self.outcome is None

    @property
    def model(self) -> onnx.ModelProto:
        """The chosen model: the fused build, or the original when nothing helped."""
        return self.outcome.model if self.outcome is not None else self.original

    def save_model(self, path: str | os.PathLike) -> Path:
        """Write the chosen model atomically (weights left on disk streamed from the source)."""
        return save_model_atomic(self.model, path, self.base_dir)


def _feeds(model: onnx.ModelProto, s: TuneSettings, dims: RunDims | dict[str, int]) -> dict:
    from fuseview.runtime.inputs import load_feeds, make_feeds

    return load_feeds(s.inputs, model, validating=True) if s.inputs else make_feeds(model, dims, s.seed)


def _rival(search: Search, model: onnx.ModelProto, s: TuneSettings, folder: str
           ) -> tuple[onnx.ModelProto | None, str]:
    """onnxruntime.transformers.optimizer's model where it supports the type, else None and why; a big
    model's rival waits in `folder` with its weights left on disk, as the model's own do."""
    from fuseview.runtime.compare import check_same_signature
    from fuseview.tuning.ort_optimizer import guess_model_type, ort_optimized

    if s.ort_optimizer == "off":
        return None, "not asked (--ort-optimizer off)"
    kind = guess_model_type(model) if s.ort_optimizer == "auto" else s.ort_optimizer
    if kind is None:
        return None, "onnxruntime's transformers optimizer has no model type for this model (bert, gpt2)"
    if search.elapsed() > 0.8 * s.budget_s:  # a rival, not the guarantee: it gives way to the budget
        return None, f"not compared: the budget was spent (model type {kind}; --budget more to include it)"
    search.say(f"onnxruntime's optimizer ({kind})")
    try:
        loaded = with_weights(model, search.base_dir)  # it reads weights itself
        rival = ort_optimized(loaded, kind, owned=loaded is not model)
        del loaded
        check_same_signature(model, rival)
    except FuseviewError as exc:
        return None, str(exc)
    if has_disk_weights(model) and rival.ByteSize() < _RIVAL_FILE_LIMIT:
        # each timing session would otherwise get the whole model serialized from memory
        path = os.path.join(folder, "ort_optimized.onnx")
        onnx.save(rival, path)
        rival = read_lazily(path) or rival
        release_freed_memory(weight_bytes(rival))  # what the optimizer held: 3.4 GB after it on GPT-2
    return rival, f"onnxruntime.transformers.optimizer, model type {kind}, opt_level 0"


def subset_change(tuned: list[str], accept_all: list[str], most: int = 6) -> str:
    """', without a, b; with c': the accept-all fusions a tuned subset drops and those it adds."""
    def names(ids: list[str]) -> str:
        return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")

    dropped = [c for c in accept_all if c not in tuned]
    added = [c for c in tuned if c not in accept_all]
    return (f", without {names(dropped)}" if dropped else "") + (f"; with {names(added)}" if added else "")


def _final(search: Search, accept_all: list[str], stopped: str | None,
           rival: onnx.ModelProto | None, rival_note: str) -> tuple[FinalCheck, Effect | None]:
    """The closing A/B of the original, accept-all and the tuned subset (and ORT's optimizer): the subset
    ships only when measured faster than both; else the better of original and accept-all, accept-all
    when they cannot be told apart (it passed validation, and fusion removes work)."""
    tuned = list(search.best)
    sets = {"original": [], "tuned": tuned, "accept_all": list(accept_all)}
    names = ["original"] + (["accept_all"] if accept_all else [])
    if tuned and list(search.ordered(tuned)) != list(search.ordered(accept_all)):
        names.append("tuned")
    note_all = "the tuned set is accept-all" if tuned and "tuned" not in names else ""
    if stopped == "cancelled" or len(names) == 1:
        why = "cancelled: not measured" if stopped == "cancelled" else "no candidates to measure"
        chosen = "tuned" if tuned else "original"
        # nothing to compare: the original itself is chosen, identical to itself
        unmeasured = NO_DIFFERENCE if not tuned and len(names) == 1 else CANNOT_TELL
        return FinalCheck(chosen, len(tuned), 0, None, None, None, note_all or why, why,
                          reason=f"final check: {why}", unmeasured_verdict=unmeasured), None
    models: list = [search.ordered(sets[n]) for n in names] + ([rival] if rival is not None else [])
    labels = names + (["ort_optimizer"] if rival is not None else [])
    pairs = [(i, j) for i in range(len(models)) for j in range(len(models)) if i != j]
    try:
        est = search.measure(models, pairs, FINAL_LABEL)
    except Cancelled:
        raise
    except FuseviewError as exc:  # onnxruntime refuses the rival: measure without it
        if rival is None:
            raise
        rival, rival_note = None, f"cannot be timed: {exc}"
        models, labels = models[:-1], labels[:-1]
        pairs = [(i, j) for i in range(len(models)) for j in range(len(models)) if i != j]
        est = search.measure(models, pairs, FINAL_LABEL)
    at = {n: i for i, n in enumerate(labels)}

    def eff(x: str, y: str) -> Effect:  # speed-up of y over x, said of y
        return Effect.of(est[(at[x], at[y])], x.replace("_", "-"))

    why_subset = ""
    if "tuned" in names:
        over_o, over_a = eff("original", "tuned"), eff("accept_all", "tuned")
        if over_o.verdict == FASTER and over_a.verdict == FASTER:
            chosen = "tuned"
        else:
            change = subset_change(tuned, accept_all)
            why_subset = (f"; the tuned subset ({len(tuned)} of {len(accept_all)}{change})"
                          f" is not measured faster than both (×original {over_o.text()}, ×accept-all"
                          f" {over_a.text()})")
    if "tuned" not in names or why_subset:
        if "accept_all" not in names:
            chosen = "original"
        else:
            aa = eff("original", "accept_all")
            chosen = "original" if aa.verdict == SLOWER else "accept_all"
    if chosen == "tuned":
        reason = (f"final check: the tuned subset{subset_change(tuned, accept_all)} is faster than both:"
                  f" ×original {eff('original', 'tuned').text()},"
                  f" ×accept-all {eff('accept_all', 'tuned').text()}")
    elif chosen == "original":
        aa_text = eff("original", "accept_all").text() if accept_all else ""
        reason = (f"final check: the original is chosen: accept-all ×original {aa_text}" if accept_all else
                  "final check: the original is chosen: no candidate passes validation")
    else:
        aa = eff("original", "accept_all")
        reason = (f"final check: accept-all is chosen: ×original {aa.text()}" if aa.verdict == FASTER else
                  f"final check: accept-all is chosen by default: ×original {aa.text()}; it passes validation"
                  " and fusion removes work")
    reason += why_subset

    def over(x: str) -> Effect | None:
        return eff(x, chosen) if x in at and x != chosen else None

    check = FinalCheck(
        chosen, len(sets[chosen]), 0, over("original"), over("accept_all"), over("ort_optimizer"),
        note_all or ("the chosen set is accept-all" if chosen == "accept_all" else ""), rival_note,
        reason=reason)
    if chosen != "tuned":
        search.best = list(search.ordered(sets[chosen]))
        for cid in set(tuned) | set(accept_all):
            search.decide(cid, ACCEPT if cid in search.best else REJECT, reason, "final", check.headline())
    return check, eff("original", "accept_all") if "accept_all" in at else None


def _search(model: onnx.ModelProto, scan: ScanResult, s: TuneSettings, base_dir: str | os.PathLike | None,
            progress: Progress | None, cancel: Cancel, timer: TimeModels | None, dims: RunDims | None
            ) -> Search:
    """The search of one tune, the original checked to run on its feeds, the final check's models counted."""
    from fuseview.tuning.ort_optimizer import guess_model_type

    at: RunDims | dict[str, int] = dims if dims is not None and not s.inputs else s.dims
    # a big model's weights stay on disk (graph.lazy_weights): variants are built on the weightless proto
    # and every session reaches the weights through the source file, as `fuse` does
    search = Search(model, scan, s, _feeds(model, s, at), progress, cancel, base_dir, timer, at)
    _check_original_runs(model, search.feeds, s, base_dir)
    # its share of the final check is kept aside; it is made at the end, if the budget still allows
    search.final_models += s.ort_optimizer in ("bert", "gpt2") or (
        s.ort_optimizer == "auto" and guess_model_type(model) is not None)
    return search


def tune_model(model: onnx.ModelProto, scan: ScanResult, settings: TuneSettings | None = None,
               path: str | None = None, base_dir: str | os.PathLike | None = None,
               progress: Progress | None = None, cancel: Cancel = None, timer: TimeModels | None = None,
               dims: RunDims | None = None) -> TuneResult:
    """Decide every candidate of the scan by measurement (timer: the target's A/B timer, None: here; dims:
    resolved once, used as they are); the result is never measured slower than the original nor than
    accept-all (unless cancelled, when the best set so far is kept unchecked)."""
    s = settings or TuneSettings()
    s.check()
    search = _search(model, scan, s, base_dir, progress, cancel, timer, dims)
    baseline: dict = {"nodes": len(model.graph.node), "candidates": len(scan.candidates)}
    stopped, accept_all = _run_search(search, scan, baseline)
    search.searching = False  # from here on a validation proves the chosen set: it is not cut
    accept_all, unvalidated = _settle(search, accept_all, stopped)
    stopped, check = _check_final(search, model, s, accept_all, stopped, baseline)
    for c in scan.candidates:  # anything accepted is in the best set, and everything is decided
        if c.id not in search.decisions:
            search.decide(c.id, REJECT, "not measured", "budget")
    plan = search.plan(path)
    outcome = _build_tuned(model, scan, plan, s, base_dir, check)
    if not plan.accepted() and not unvalidated:
        search.notes.append("no fusion made this model measurably faster here: the original is kept")
    config = {**s.to_json(), "dims": dict(scan.index.dims_used),  # the dims used, defaults resolved
              "provider_used": search.provider.get("provider"),
              "seconds": round(search.elapsed(), 3), "validations": search.validations}
    report = TuneReport(path, config, baseline, check, search.groups,
                        [search.decisions[c.id] for c in scan.candidates], stopped, search.measurements,
                        search.notes)
    return TuneResult(report, plan, model, outcome, base_dir)


def _run_search(search: Search, scan: ScanResult, baseline: dict) -> tuple[str | None, list[str]]:
    """Accept-all validated (repaired by bisection when it breaks the tolerance), pruned top-down, then the
    candidates it left out and a refinement: why it stopped early (None, cancelled, budget) and the
    accept-all set as far as it got."""
    stopped = None
    accept_all: list[str] = []
    try:
        everything = list(search.ordered(Plan(scan.candidates).accept_all()))
        if everything:
            search.say("validating accept-all")
            accept_all = everything
            if not search.passes(everything):
                v = search.figures(everything)
                accept_all = search.repair_accuracy([], everything, "accuracy")
                search.notes.append(
                    f"accept-all breaks the tolerance ({v if isinstance(v, str) else v.figures()}): bisection"
                    f" found {len(everything) - len(accept_all)} candidate(s) responsible in"
                    f" {search.validations} validations")
            baseline["over_tolerance"] = [c for c in everything if c not in accept_all]
            if accept_all:  # top-down: accept-all is the default; take out only what is measured slower
                search.start_from(accept_all)
                search.prune_groups(search.rule_groups())
            search.run_groups(search.rule_groups())  # the candidates accept-all left out (conflicts)
            search.refine()
    except Cancelled:
        stopped = "cancelled"
    except BudgetSpent:
        stopped = "budget"
    return stopped, accept_all


def _settle(search: Search, accept_all: list[str], stopped: str | None) -> tuple[list[str], bool]:
    """The notes of an early stop (undecided candidates rejected, the best set kept and repaired when its
    errors add up beyond the tolerance): accept-all ([] when never validated) and whether it was not."""
    # the budget ran out validating accept-all (or repairing it: the set left still breaks the tolerance)
    unvalidated = bool(accept_all) and not (search.validated(accept_all) and search.passes(accept_all))
    if unvalidated:
        search.notes.append("the budget ran out before accept-all was validated: the original is kept"
                            " (give --budget more than one validation of the model takes)")
        accept_all = []
    if stopped:
        search.notes.append(
            f"stopped early ({stopped}) after {search.elapsed():.0f} s: the best set so far is kept")
        why = f"not measured: {'cancelled' if stopped == 'cancelled' else 'budget spent'}"
        search.reject_undecided(why)
        for g in search.groups:
            if g.outcome == "not tested" and not g.reason:
                g.reason = why
    if search.best:
        v = search.figures(search.best)
        if isinstance(v, str) or not v.ok:  # errors of accepted fusions may add up beyond the tolerance
            search.best = search.repair_accuracy([], search.best, "final")
    return accept_all, unvalidated


def _check_final(search: Search, model: onnx.ModelProto, s: TuneSettings, accept_all: list[str],
                 stopped: str | None, baseline: dict) -> tuple[str | None, FinalCheck]:
    """The final check of the best set against the original, accept-all and the rival (why it stopped
    early, cancelled there too, and the check); accept-all's measured effect goes into baseline."""
    try:
        with tempfile.TemporaryDirectory(prefix="fuseview-rival-") as folder:
            rival, rival_note = (None, "cancelled: not measured") if stopped == "cancelled" else \
                _rival(search, model, s, folder)
            check, aa_effect = _final(search, accept_all, stopped, rival, rival_note)
            del rival
        if aa_effect is not None:  # accept-all over the original, as the final check measured it
            baseline["accept_all"] = {"accepted": len(accept_all), "effect": aa_effect.to_json()}
    except Cancelled:
        stopped = "cancelled"
        check = FinalCheck("tuned" if search.best else "original", len(search.best), 0, None, None, None,
                           "cancelled: not measured", "cancelled: not measured")
    return stopped, check


def _build_tuned(model: onnx.ModelProto, scan: ScanResult, plan: Plan, s: TuneSettings,
                 base_dir: str | os.PathLike | None, check: FinalCheck) -> FuseOutcome | None:
    """The fused model of the plan's accepted candidates, validated (None when none is accepted); its
    errors and node counts go into check."""
    outcome = None
    if plan.accepted():
        atol, rtol = s.tolerance()
        options = FuseOptions(dims=dict(s.dims), inputs=s.inputs, seeds=s.seeds, seed=s.seed, atol=atol,
                              rtol=rtol, validate=True, strict=True, weights_on_disk=True)
        outcome = build_fused(model, scan, plan.accepted(), options, base_dir)
        val = outcome.validation
        check.max_abs, check.max_rel = (val.max_abs, val.max_rel) if val else (None, None)
    check.nodes = len((outcome.model if outcome else model).graph.node)
    check.accepted = len(plan.accepted())
    return outcome


def _check_original_runs(model: onnx.ModelProto, feeds: dict, s: TuneSettings,
                         base_dir: str | os.PathLike | None) -> None:
    """FuseviewError, as fuse's, when the original model cannot run on the tune's inputs: every
    measurement after it would blame the fusions."""
    from fuseview.fusion.validate import HINT, model_runner

    try:
        model_runner(model, False, base_dir)(feeds)
    except Exception as exc:  # noqa: BLE001 - any engine error on these inputs is the user's to act on
        dims = ", ".join(f"{k}={v}" for k, v in s.dims.items()) or "defaults"
        where = f"the inputs of {s.inputs}" if s.inputs else f"generated inputs (dims {dims})"
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise FuseviewError(f"the original model does not run on {where}: {first}; {HINT}") from None
    finally:
        release_freed_memory(weight_bytes(model, base_dir))  # its session is gone before any is timed


def scan_provider(provider: str) -> str:
    """The provider tune's scan offers fused ops for: the one it measures on (auto as the fusion commands)."""
    from fuseview.fusion.kernels import default_provider

    return default_provider()[0] if provider == "auto" else provider
