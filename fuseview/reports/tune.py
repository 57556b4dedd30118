"""The tune report (kind "fuseview.tune", schema_version 2): typed, written atomically, validated on load.

Schema 2 keeps `environment` (where it ran) at the top, as a profile report does; schema 1 kept it under
`config` and still loads (it is moved to the top when read)."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fuseview.atomic import write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.safe_io import load_json
from fuseview.stats import CANNOT_TELL, DEFAULT_THRESHOLD, VERDICTS, SpeedupEstimate, interval_text, verdict

KIND = "fuseview.tune"
SCHEMA_VERSION = 2
READABLE_SCHEMAS = (1, 2)  # 1: environment under config
DECISIONS = ("accept", "reject")
CHOICES = ("tuned", "accept_all", "original")
STOPS = (None, "budget", "cancelled")


@dataclass
class Effect:
    """A measured speed-up: time without ÷ time with (>1: faster with it), its interval and verdict."""

    speedup_p50: float
    ci: tuple[float, float]
    verdict: str
    runs: int
    sessions: int
    against: str  # what the measurement compared with, e.g. "current best (3 accepted)"
    warning: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    budget_spent: bool = False  # undecided because the measurement's budget ran out
    more_runs: int | None = None  # undecided: about how many more runs per model would likely decide
    level: float | None = None  # the interval's level (a sequential A/B's last look); None in older reports

    @classmethod
    def of(cls, est: SpeedupEstimate, against: str) -> Effect:
        """The effect an estimate states (model = without, against = with)."""
        return cls(est.speedup_p50, (float(est.ci[0]), float(est.ci[1])), est.verdict, est.runs,
                   est.sessions, against, est.noise.warning, est.threshold, est.budget_spent, est.more_runs,
                   est.level)

    def text(self) -> str:
        """'1.12x [1.05, 1.19] faster' (>1: faster with it): the verdict is stats.verdict of the interval."""
        return f"{interval_text(self.speedup_p50, *self.ci, self.threshold)} {self.verdict}"

    def runs_text(self) -> str:
        """How it was measured, and for an undecided one what more would likely decide it."""
        more = f"; about {self.more_runs} more runs would likely decide" if self.more_runs else ""
        spent = ", budget spent" if self.budget_spent else ""
        return f"{self.runs} interleaved runs in {self.sessions} sessions each{spent}{more}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict (ci as a list)."""
        d = asdict(self)
        d["ci"] = [float(self.ci[0]), float(self.ci[1])]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any], where: str) -> Effect:
        """Read and check one effect object."""
        _need(d, {"speedup_p50": (int, float), "ci": list, "verdict": str, "runs": int, "sessions": int,
                  "against": str}, where)
        if d["verdict"] not in VERDICTS or len(d["ci"]) != 2:
            raise FuseviewError(f"tune report: {where}: bad verdict or interval")
        lo, hi = float(d["ci"][0]), float(d["ci"][1])
        threshold = float(d.get("threshold", DEFAULT_THRESHOLD))
        # the verdict of the interval, as stats.verdict says it now (older reports said "no difference"
        # of intervals too wide for any verdict)
        return cls(float(d["speedup_p50"]), (lo, hi), verdict(lo, hi, threshold), d["runs"], d["sessions"],
                   d["against"], d.get("warning"), threshold, bool(d.get("budget_spent", False)),
                   d.get("more_runs"), _level(d.get("level")))


def _level(value: Any) -> float | None:
    """An effect's stored level, None where absent or not a level."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1
    return float(value) if ok else None


class _Measured:
    """A record with an `effect` (Effect or None): its JSON writes the effect as an object or null."""

    effect: Effect | None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict."""
        d: dict[str, Any] = asdict(self)  # type: ignore[call-overload]
        d["effect"] = self.effect.to_json() if self.effect else None
        return d


@dataclass
class Decision(_Measured):
    """What tune decided for one candidate, why, and the figures it decided on."""

    candidate: str
    rule: str
    decision: str  # "accept" | "reject"
    reason: str
    stage: str  # "group" | "candidate" | "accuracy" | "conflict" | "budget" | "final" | "apply"
    effect: Effect | None = None
    max_abs: float | None = None
    max_rel: float | None = None


@dataclass
class GroupResult(_Measured):
    """The A/B of one rule's candidates together against the best set so far."""

    rule: str
    candidates: list[str]
    tested: list[str]
    outcome: str  # "accept" | "reject" | "mixed" (members tested one by one) | "not tested"
    reason: str
    effect: Effect | None = None
    max_abs: float | None = None
    max_rel: float | None = None


@dataclass
class FinalCheck:
    """The closing interleaved A/B of the chosen model against the original, accept-all, ORT's optimizer.

    against_original / against_accept_all: the chosen model's speed-up over each (None when it is that
    model); `verdict` and `reason` always say what was chosen and why, from the figures they quote.
    """

    chosen: str  # "tuned" | "accept_all" | "original"
    accepted: int
    nodes: int
    against_original: Effect | None
    against_accept_all: Effect | None
    against_ort_optimizer: Effect | None
    accept_all_note: str = ""
    ort_optimizer_note: str = ""
    max_abs: float | None = None
    max_rel: float | None = None
    reason: str = ""
    unmeasured_verdict: str = CANNOT_TELL  # the verdict when nothing was measured (cancelled, no candidate)

    def headline(self) -> Effect | None:
        """The effect the final verdict states: over the original, or (original chosen) over accept-all."""
        return self.against_original or self.against_accept_all

    @property
    def verdict(self) -> str:
        """The final verdict (never None): the headline effect's, else why nothing was measured."""
        h = self.headline()
        return h.verdict if h is not None else self.unmeasured_verdict

    def summary(self) -> str:
        """'chosen tuned (40 fusions): ×original 1.15x [1.05, 1.25] faster; ×accept-all …' (the chosen model
        is not compared with itself: 'chosen accept-all (45 fusions): ×original …')."""
        def vs(e: Effect | None, name: str) -> str | None:
            if e is not None:
                return f"×{name} {e.text()}"
            return None if self.chosen == name.replace("-", "_") else f"×{name}: not measured"

        parts = [p for p in (vs(self.against_original, "original"), vs(self.against_accept_all, "accept-all"))
                 if p is not None]
        return f"chosen {self.chosen.replace('_', '-')} ({self.accepted} fusions): {'; '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        """JSON-ready dict; speedup_p50/ci/verdict at the top are the headline's (verdict never null)."""
        o = self.headline()
        return {
            "chosen": self.chosen, "accepted": self.accepted, "nodes": self.nodes,
            "speedup_p50": o.speedup_p50 if o else None, "ci": [o.ci[0], o.ci[1]] if o else None,
            "verdict": self.verdict, "summary": self.summary(), "reason": self.reason,
            "unmeasured_verdict": self.unmeasured_verdict,
            "against_original": self.against_original.to_json() if self.against_original else None,
            "against_accept_all": self.against_accept_all.to_json() if self.against_accept_all else None,
            "against_ort_optimizer": (self.against_ort_optimizer.to_json()
                                      if self.against_ort_optimizer else None),
            "accept_all_note": self.accept_all_note, "ort_optimizer_note": self.ort_optimizer_note,
            "max_abs": self.max_abs, "max_rel": self.max_rel,
        }


@dataclass
class TuneReport:
    """Everything `fuseview tune` measured and decided; `to_json` is the documented file format."""

    model: str | None
    config: dict[str, Any]
    baseline: dict[str, Any]
    final: FinalCheck
    groups: list[GroupResult] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    stopped: str | None = None  # None (finished), "budget" or "cancelled"
    measurements: int = 0
    notes: list[str] = field(default_factory=list)
    output: str | None = None
    plan: str | None = None
    environment: dict[str, Any] | None = None  # where it ran: the target's machine, and the target

    def accepted(self) -> list[str]:
        """The accepted candidate ids."""
        return [d.candidate for d in self.decisions if d.decision == "accept"]

    def to_json(self) -> dict[str, Any]:
        """The report object (kind fuseview.tune, schema_version 2)."""
        from fuseview import __version__

        return {
            "kind": KIND, "schema_version": SCHEMA_VERSION, "fuseview_version": __version__,
            "environment": self.environment, "model": self.model, "output": self.output, "plan": self.plan,
            "config": dict(self.config),
            "baseline": dict(self.baseline), "final": self.final.to_json(),
            "groups": [g.to_json() for g in self.groups],
            "decisions": [d.to_json() for d in self.decisions],
            "stopped": self.stopped, "measurements": self.measurements, "notes": list(self.notes),
        }

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the report as JSON, atomically."""
        return write_text_atomic(Path(path), json.dumps(self.to_json(), indent=1, allow_nan=False) + "\n")

    @classmethod
    def from_json(cls, d: object) -> TuneReport:
        """Read a report object, checking every field it relies on (FuseviewError names the first bad one)."""
        if not isinstance(d, dict) or d.get("kind") != KIND:
            raise FuseviewError(f'not a fuseview tune report (missing "kind": "{KIND}")')
        if d.get("schema_version") not in READABLE_SCHEMAS:
            raise FuseviewError(f"tune report: schema_version {d.get('schema_version')!r} is not one of"
                                f" {READABLE_SCHEMAS}")
        _need(d, {"config": dict, "baseline": dict, "final": dict, "groups": list, "decisions": list,
                  "measurements": int, "notes": list}, "report")
        if d.get("stopped") not in STOPS:
            raise FuseviewError(f"tune report: stopped {d.get('stopped')!r} is not one of {STOPS}")
        _need(d["config"], {"provider": str, "ort_opt": str, "threads": int, "dims": dict,
                            "budget_s": (int, float), "seconds": (int, float)}, "config")
        f = d["final"]
        _need(f, {"chosen": str, "accepted": int, "nodes": int}, "final")
        if f["chosen"] not in CHOICES:
            raise FuseviewError(f"tune report: final.chosen {f['chosen']!r} is not one of {CHOICES}")
        against_original, against_accept_all, against_ort_optimizer = (
            _effect(f.get(k), f"final.{k}")
            for k in ("against_original", "against_accept_all", "against_ort_optimizer"))
        final = FinalCheck(
            f["chosen"], f["accepted"], f["nodes"], against_original, against_accept_all,
            against_ort_optimizer, str(f.get("accept_all_note", "")), str(f.get("ort_optimizer_note", "")),
            f.get("max_abs"), f.get("max_rel"), str(f.get("reason", "")),
            f.get("unmeasured_verdict") if f.get("unmeasured_verdict") in VERDICTS else CANNOT_TELL)
        groups = []
        for i, g in enumerate(d["groups"]):
            _need(g, {"rule": str, "candidates": list, "tested": list, "outcome": str, "reason": str},
                  f"groups[{i}]")
            groups.append(GroupResult(g["rule"], list(g["candidates"]), list(g["tested"]), g["outcome"],
                                      g["reason"], _effect(g.get("effect"), f"groups[{i}].effect"),
                                      g.get("max_abs"), g.get("max_rel")))
        decisions = []
        for i, x in enumerate(d["decisions"]):
            _need(x, {"candidate": str, "rule": str, "decision": str, "reason": str, "stage": str},
                  f"decisions[{i}]")
            if x["decision"] not in DECISIONS:
                raise FuseviewError(
                    f"tune report: decisions[{i}].decision {x['decision']!r} is not accept/reject")
            decisions.append(Decision(x["candidate"], x["rule"], x["decision"], x["reason"], x["stage"],
                                      _effect(x.get("effect"), f"decisions[{i}].effect"), x.get("max_abs"),
                                      x.get("max_rel")))
        config = dict(d["config"])
        config.pop("environment", None)
        env = report_environment(d)
        if env is not None and not isinstance(env, dict):
            raise FuseviewError("tune report: environment must be an object or null")
        return cls(d.get("model"), config, d["baseline"], final, groups, decisions, d.get("stopped"),
                   d["measurements"], [str(n) for n in d["notes"]], d.get("output"), d.get("plan"), env)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> TuneReport:
        """Read a report file (bounded, regular file only); FuseviewError on bad input."""
        return cls.from_json(load_json(Path(path), "report", "JSON tune report"))


def report_environment(d: dict[str, Any]) -> Any:
    """Where a report's tune ran: `environment` at the top (schema 2), under `config` in schema 1."""
    if d.get("schema_version") == 1:
        return (d.get("config") or {}).get("environment")
    return d.get("environment")


def _effect(d: object, where: str) -> Effect | None:
    if d is None:
        return None
    if not isinstance(d, dict):
        raise FuseviewError(f"tune report: {where} must be an object or null")
    return Effect.from_json(d, where)


def _need(d: object, spec: dict[str, Any], where: str) -> None:
    if not isinstance(d, dict):
        raise FuseviewError(f"tune report: {where} must be an object")
    for key, kind in spec.items():
        if key not in d:
            raise FuseviewError(f"tune report: {where} has no {key!r}")
        if not isinstance(d[key], kind) or isinstance(d[key], bool) and kind is not bool:
            raise FuseviewError(f"tune report: {where}.{key} has the wrong type ({type(d[key]).__name__})")
