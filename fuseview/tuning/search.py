"""Measured decisions: keep only the fusions that make this model faster at the deployment's settings.

The search (README "How tune decides"): accept-all is validated first and, when it exceeds the tolerance,
bisected to the candidates responsible; then each rule's candidates are timed together against the best
set so far (interleaved multi-session A/B, fuseview.runtime.ab + fuseview.stats); a faster group is kept,
then its members are timed one by one (leave-one-out) so a member that is slower on its own is dropped;
a group with no measurable difference has its members tried one by one (forward selection). A final A/B
of the chosen set against the original and accept-all keeps whichever the interval says is fastest.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict

import numpy as np
import onnx

from fuseview.dims import RunDims
from fuseview.errors import FuseviewError
from fuseview.fusion.apply import ApplyResult, apply_candidates
from fuseview.fusion.pipeline import keep_stand_in_names
from fuseview.fusion.plan import ACCEPT, REJECT, Plan
from fuseview.fusion.rule import Candidate
from fuseview.fusion.scan import ScanResult
from fuseview.fusion.validate import Validation, ValidationOverBudget, validate
from fuseview.progress import Progress
from fuseview.reports.tune import Decision, Effect, GroupResult
from fuseview.runtime.ab import TimeModels
from fuseview.runtime.profiling import Cancelled
from fuseview.stats import SLOWER, SpeedupEstimate
from fuseview.tuning.settings import TuneSettings

# progress(message, fraction of the budget spent)
_CACHE = 6  # fused variants kept built (a model's size each)


FINAL_LABEL = "final check"


class BudgetSpent(Exception):
    """The next measurement would not fit in the budget (the final check's share kept aside)."""


class Search:
    """The state of one tune: the best set so far, every decision, and the measurements behind them."""

    def __init__(self, model: onnx.ModelProto, scan: ScanResult, settings: TuneSettings,
                 feeds: dict[str, np.ndarray], progress: Progress | None = None, cancel=None,
                 base_dir: str | os.PathLike | None = None, timer: TimeModels | None = None,
                 dims: RunDims | dict[str, int] | None = None) -> None:
        self.model, self.scan, self.s, self.feeds = model, scan, settings, feeds
        self.dims = dims if dims is not None else settings.dims  # as resolved once (a RunDims), or as set
        self.timer = timer  # the target's A/B timer (a Ray node's); None: this process's
        self.base_dir = base_dir  # where the weights a big model keeps on disk are (they stay there)
        self.progress, self.cancel = progress, cancel
        self.by_id: dict[str, Candidate] = scan.by_id()
        self.order = {c.id: i for i, c in enumerate(scan.candidates)}
        self.decisions: dict[str, Decision] = {}
        self.groups: list[GroupResult] = []
        self.notes: list[str] = []
        self.best: list[str] = []
        self.measurements = 0
        self.validations = 0
        self.started = time.monotonic()
        self._built: OrderedDict[tuple[str, ...], ApplyResult] = OrderedDict()
        self._originals: dict = {}
        self._figures: dict[tuple[str, ...], Validation | str] = {}
        self._model_batch_s: float | None = None  # seconds one model's batch of sessions took
        self.provider: dict = {}
        self.pending: list[tuple[GroupResult, list[str], str]] = []  # groups to refine one by one
        self.latency_ms: dict[int, float] = {}
        self.final_models = 3  # original, tuned, accept-all (+ onnxruntime's optimizer when it applies)
        self.searching = True  # validations stop at the search's deadline; the final one is never cut

    # ------------------------------------------------------------------------------------ helpers
    def ordered(self, ids) -> tuple[str, ...]:
        """The ids in the scan's candidate order (the order `fuse --plan` applies them in)."""
        return tuple(sorted(set(ids), key=self.order.__getitem__))

    def elapsed(self) -> float:
        """Seconds since the tune started."""
        return time.monotonic() - self.started

    def say(self, message: str) -> None:
        """Report progress (fraction: the share of the budget spent)."""
        if self.progress:
            self.progress(message, min(1.0, self.elapsed() / self.s.budget_s))

    def decide(self, cid: str, decision: str, reason: str, stage: str, effect: Effect | None = None,
               figures: Validation | str | None = None) -> None:
        """Record (or overwrite) the decision for a candidate."""
        v = figures if isinstance(figures, Validation) else None
        self.decisions[cid] = Decision(cid, self.by_id[cid].rule, decision, reason, stage, effect,
                                       v.max_abs if v else None, v.max_rel if v else None)

    def build(self, ids) -> ApplyResult:
        """The model with these candidates applied (a few recent ones kept built)."""
        key = self.ordered(ids)
        if key in self._built:
            self._built.move_to_end(key)
            return self._built[key]
        res = apply_candidates(self.model, self.scan, list(key))
        keep_stand_in_names(self.model, res.model)
        self._built[key] = res
        while len(self._built) > _CACHE:
            self._built.popitem(last=False)
        return res

    def final_reserve(self) -> float:
        """Seconds kept aside for the final check (two batches of its models, once a batch is timed) and
        for the final build and validation (a twentieth of the budget)."""
        batches = self.final_models * self._model_batch_s * 2 if self._model_batch_s else 0.0
        return batches + self.s.budget_s / 20

    def validation_deadline(self) -> float | None:
        """When a search validation must stop (time.monotonic()): the budget less the final check's share;
        None once the search is over (the chosen set's validation is what proves it, so it is not cut)."""
        if not self.searching:
            return None
        return self.started + self.s.budget_s - self.final_reserve()

    def figures(self, ids) -> Validation | str:
        """The validation of a set against the original, or the one-line reason it could not run;
        BudgetSpent when a search validation reaches the deadline (nothing is learnt of that set)."""
        key = self.ordered(ids)
        if key not in self._figures:
            self.validations += 1
            try:
                res = self.build(key)
                if res.reference_only_ops:
                    raise FuseviewError(f"needs {', '.join(res.reference_only_ops)}, which onnxruntime lacks")
                self._figures[key] = validate(
                    self.model, res.model, False, self.dims, seed=self.s.seed, seeds=self.s.seeds,
                    inputs=self.s.inputs, atol=self.s.tolerance()[0], rtol=self.s.tolerance()[1],
                    original_outputs=self._originals, base_dir=self.base_dir,
                    deadline=self.validation_deadline())
            except ValidationOverBudget:
                raise BudgetSpent() from None
            except FuseviewError as exc:
                self._figures[key] = str(exc)
        return self._figures[key]

    def validated(self, ids) -> bool:
        """Whether the set's validation ran (whatever it found), without running it."""
        return self.ordered(ids) in self._figures

    def passes(self, ids) -> bool:
        """True when the set runs in onnxruntime and stays within tolerance."""
        v = self.figures(ids)
        return isinstance(v, Validation) and v.ok

    def bisect(self, base, items) -> list[str]:
        """The items that break the tolerance when added to `base` (adaptive group testing).

        Halves are tested in turn, the second on top of the first's good part, so a candidate that fails
        only together with another is still found (as the later of the two).
        """
        items = list(items)
        if not items or self.passes([*base, *items]):
            return []
        if len(items) == 1:
            return items
        half = len(items) // 2
        left = self.bisect(base, items[:half])
        good = [c for c in items[:half] if c not in left]
        return left + self.bisect([*base, *good], items[half:])

    def afford(self, models: int, final: bool = False) -> None:
        """BudgetSpent unless `models` more models' batch fits, beside the final check's share (kept aside
        for it until the final check itself runs: two batches of its models, and a twentieth of the
        budget for the final build and validation)."""
        if self._model_batch_s is None:
            return
        final_share = 0.0 if final else self.final_reserve()
        if self.elapsed() + models * self._model_batch_s + final_share > self.s.budget_s:
            raise BudgetSpent()

    # ------------------------------------------------------------------------------------ timing
    def measure(self, models: list, pairs: list[tuple[int, int]], label: str) -> dict:
        """Sequential interleaved A/B of the models (id sets or protos): batches of fresh sessions until
        every pair's interval decides or this measurement's share of the budget ends (runtime.ab.
        measure_until_decided); {pair: SpeedupEstimate}. The final check may use all that is left, and
        takes two batches at least (the guarantee rests on it)."""
        from fuseview.runtime.ab import measure_until_decided, sessions_that_fit

        protos = [m if isinstance(m, onnx.ModelProto) else
                  (self.model if not m else self.build(m).model) for m in models]
        final = label == FINAL_LABEL
        _fit, why = sessions_that_fit(protos, self.s.sessions, self.base_dir)
        if why and why not in self.notes:
            self.notes.append(why)
        left = self.s.budget_s - self.elapsed()
        if final:
            allowed = left
        elif self._model_batch_s is None:
            allowed = 0.4 * left  # before any batch is timed: the final check's share kept aside roughly
        else:
            allowed = left - self.final_reserve()
        if not final and allowed <= 0:
            raise BudgetSpent()
        self.say(label)
        seq = measure_until_decided(
            protos, self.feeds, pairs, budget_s=max(allowed, 0.0), provider=self.s.provider,
            opt_level=self.s.ort_opt, threads=self.s.threads, sessions=self.s.sessions, runs=self.s.runs,
            warmup=self.s.warmup, threshold=self.s.threshold, min_batches=2 if final else 1,
            max_batches=None if final else self.s.max_batches, seed=self.s.seed + self.measurements,
            cancel=self.cancel, base_dir=self.base_dir, timer=self.timer,  # here, or a Ray node
            on_batch=lambda n, _est: self.say(f"{label} (batch {n})"))
        self._model_batch_s = seq.seconds / seq.batches / len(protos)
        self.provider = seq.choices[0]
        self.measurements += 1
        self.latency_ms = {i: float(np.median(g)) for i, g in enumerate(seq.grouped)}
        return seq.estimates

    def ab(self, without, with_, label: str) -> SpeedupEstimate:
        """Speed-up of the set `with_` over the set `without` (>1: faster with), interleaved."""
        return self.measure([self.ordered(without), self.ordered(with_)], [(0, 1)], label)[(0, 1)]

    # ------------------------------------------------------------------------------------ phases
    def free_of_conflicts(self, ids, taken) -> tuple[list[str], dict[str, str]]:
        """The ids that conflict with nothing taken (first come first served among themselves), and for
        the others the accepted candidate they conflict with."""
        taken = set(taken)
        free, blocked = [], {}
        for cid in ids:
            hit = next((o for o in self.by_id[cid].conflicts if o in taken), None)
            if hit is not None:
                blocked[cid] = hit
                continue
            free.append(cid)
            taken.add(cid)
        return free, blocked

    def repair_accuracy(self, base, items, stage: str) -> list[str]:
        """Drop (reject, with figures) the items that break the tolerance on top of `base`; the rest."""
        bad = self.bisect(base, items)
        for cid in bad:
            v = self.figures([*base, cid])
            why = v if isinstance(v, str) else f"over tolerance: {v.figures()}"
            self.decide(cid, REJECT, f"accuracy: {why}", stage, figures=v)
        return [c for c in items if c not in bad]

    def try_ab(self, without, with_, label: str) -> SpeedupEstimate | str:
        """ab(), or the one-line reason the sets cannot be timed (onnxruntime refuses a fused variant)."""
        try:
            return self.ab(without, with_, label)
        except Cancelled:
            raise
        except FuseviewError as exc:
            return str(exc)

    def start_from(self, ids: list[str]) -> None:
        """Take accept-all (validated) as the best set so far: the top-down search only takes out what is
        measured slower, as a fusion removes work and "no difference" or "cannot tell" is no reason to
        drop one."""
        self.best = list(self.ordered(ids))
        for cid in self.best:
            self.decide(cid, ACCEPT, "in accept-all (validated); kept unless measured slower", "group", None,
                        self.figures(self.best))

    def prune_groups(self, rules: list[tuple[str, list[str]]]) -> None:
        """Top-down: each rule's accepted candidates are left out together; a group whose removal is
        measured faster is rejected, the others stay (the set they are in is measured faster) and go to
        `pending`, where each member is left out in turn."""
        for rule, members in rules:
            inside = [c for c in members if c in self.best]
            if not inside:
                continue
            self.afford(2)
            rest = [c for c in self.best if c not in inside]
            group = GroupResult(rule, list(members), inside, "accept", "")
            self.groups.append(group)
            est = self.try_ab(rest, self.best, f"timing the set without {rule} ({len(inside)})")
            if isinstance(est, str):
                group.reason = f"kept: the set cannot be timed without it ({est})"
                continue
            eff = group.effect = Effect.of(est, "best set without the group")
            if est.verdict == SLOWER:
                with_it = self.figures(self.best)
                self.best = rest
                group.outcome, group.reason = "reject", f"the set with the group is {eff.text()}"
                for cid in inside:
                    self.decide(cid, REJECT, f"the set with its rule's group is {eff.text()}",
                                "group", eff, with_it)
                continue
            group.reason = f"kept as accept-all does: the set with the group is {eff.text()}"
            for cid in inside:
                self.decide(cid, ACCEPT, f"kept as accept-all does: the set with its rule's group is"
                            f" {eff.text()}", "group", eff, self.figures(self.best))
            if len(inside) > 1:
                self.pending.append((group, inside, "winner"))

    def run_groups(self, rules: list[tuple[str, list[str]]]) -> None:
        """Phase 1: each rule's free candidates together against the best set; groups to refine one by
        one go to `pending` (group, members, "winner" | "mixed")."""
        refine = self.pending
        for rule, members in rules:
            todo = [c for c in members if c not in self.decisions]
            if not todo:
                continue  # decided already (accuracy, or kept or pruned top-down)
            free, blocked = self.free_of_conflicts(todo, self.best)
            for cid, hit in blocked.items():
                self.decide(cid, REJECT, f"conflicts with accepted {hit}", "conflict")
            group = GroupResult(rule, list(members), [], "not tested", "")
            self.groups.append(group)
            if not free:
                group.reason = "no candidate left to test (accuracy or conflicts)"
                continue
            self.afford(2)
            self.say(f"validating {rule} ({len(free)})")
            free = self.repair_accuracy(self.best, free, "accuracy")
            if not free:
                group.outcome, group.reason = "reject", "every candidate breaks the tolerance"
                continue
            v = self.figures([*self.best, *free])
            if isinstance(v, str) or not v.ok:
                for cid in free:
                    self.decide(cid, REJECT, "accuracy: over tolerance together with the best set",
                                "accuracy", figures=v)
                group.outcome, group.reason = "reject", "over tolerance together with the best set"
                continue
            group.tested, group.max_abs, group.max_rel = list(free), v.max_abs, v.max_rel
            est = self.try_ab(self.best, [*self.best, *free], f"timing {rule} ({len(free)})")
            if isinstance(est, str):
                group.outcome, group.reason = "reject", f"cannot be timed: {est}"
                for cid in free:
                    self.decide(cid, REJECT, f"cannot be timed: {est}", "apply", figures=v)
                continue
            eff = Effect.of(est, f"best set so far ({len(self.best)} accepted)")
            group.effect = eff
            keep = est.verdict == "faster" or (est.verdict == "no difference" and self.s.keep_neutral)
            if keep:
                how = "faster" if est.verdict == "faster" else "no difference, kept (--keep-neutral)"
                group.outcome, group.reason = "accept", f"the group is {how}: {eff.text()}"
                self.best = list(self.ordered([*self.best, *free]))
                for cid in free:
                    self.decide(cid, ACCEPT, f"its rule's group is {how}: {eff.text()}", "group", eff, v)
                if len(free) > 1:
                    refine.append((group, free, "winner"))
            elif est.verdict != SLOWER and len(free) > 1:
                group.outcome = "mixed"
                group.reason = f"not in accept-all; the group is {eff.text()}: members tried one by one"
                for cid in free:
                    self.decide(cid, REJECT, f"not in accept-all; its group is {eff.text()}; not tried alone",
                                "group", eff, v)
                refine.append((group, free, "mixed"))
            else:
                group.outcome = "reject"
                group.reason = f"not in accept-all; the group is {eff.text()}"
                for cid in free:
                    self.decide(cid, REJECT, f"not in accept-all; its rule's group is {eff.text()}", "group",
                                eff, v)

    def refine(self) -> None:
        """Phase 2: members of winning groups left out one at a time, members of mixed groups added one at
        a time, each against the best set as it stands."""
        for _group, members, kind in self.pending:
            for cid in members:
                if kind == "winner":
                    if cid not in self.best:
                        continue
                    self.afford(2)
                    rest = [c for c in self.best if c != cid]
                    est = self.try_ab(rest, self.best, f"leave-one-out {cid}")
                    if isinstance(est, str):
                        continue  # the group's measurement stands
                    eff = Effect.of(est, "best set without it")
                    if est.verdict == SLOWER:
                        self.best = rest
                        self.decide(cid, REJECT, f"the set with it (left out alone) is {eff.text()}",
                                    "candidate", eff, self.figures(self.best))
                    else:
                        self.decide(cid, ACCEPT, f"kept as accept-all does: the set with it (left out alone)"
                                    f" is {eff.text()}", "candidate", eff, self.figures(self.best))
                else:
                    free, blocked = self.free_of_conflicts([cid], self.best)
                    if blocked:
                        self.decide(cid, REJECT, f"conflicts with accepted {blocked[cid]}", "conflict")
                        continue
                    self.afford(2)
                    v = self.figures([*self.best, cid])
                    if isinstance(v, str) or not v.ok:
                        self.decide(cid, REJECT, "accuracy: over tolerance with the best set", "accuracy",
                                    figures=v)
                        continue
                    est = self.try_ab(self.best, [*self.best, cid], f"trying {cid}")
                    if isinstance(est, str):
                        self.decide(cid, REJECT, f"cannot be timed: {est}", "apply", figures=v)
                        continue
                    eff = Effect.of(est, f"best set so far ({len(self.best)} accepted)")
                    keep = est.verdict == "faster" or (est.verdict == "no difference" and self.s.keep_neutral)
                    if keep:
                        self.best = list(self.ordered([*self.best, cid]))
                        how = "faster" if est.verdict == "faster" else "no difference, kept (--keep-neutral)"
                        self.decide(cid, ACCEPT, f"on its own {how}: {eff.text()}", "candidate", eff, v)
                    else:
                        self.decide(cid, REJECT, f"not in accept-all; on its own {eff.text()}", "candidate",
                                    eff, v)

    def reject_undecided(self, why: str) -> None:
        """Every candidate not decided yet is rejected, saying why (budget spent, cancelled)."""
        for c in self.scan.candidates:
            if c.id not in self.decisions:
                self.decide(c.id, REJECT, why, "budget")
            elif c.id not in self.best and self.decisions[c.id].decision == ACCEPT:
                self.decide(c.id, REJECT, why, "budget")

    def rule_groups(self) -> list[tuple[str, list[str]]]:
        """Candidates grouped by rule, rules in the order of their first candidate (bigger fusions first)."""
        out: dict[str, list[str]] = {}
        for c in self.scan.candidates:
            out.setdefault(c.rule, []).append(c.id)
        return list(out.items())

    def plan(self, path: str | None) -> Plan:
        """The plan of the decisions (every candidate accepted or rejected), as `fuse --plan` reads it."""
        p = Plan(self.scan.candidates, path)
        accepted = set(self.best)
        p.set_many({c.id: ACCEPT if c.id in accepted else REJECT for c in self.scan.candidates})
        return p
