"""The local target: the runner contract and the whole profile in this process (others subclass it)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from fuseview.runtime.job import run_profile
from fuseview.runtime.profiling import Cancel, Progress
from fuseview.runtime.runner import MeasureRequest, MeasureResult, fingerprint, measure
from fuseview.runtime.sessions import ModelSource

Timed = tuple[list[np.ndarray], list[dict]]  # one (sessions x rounds) array per model, providers
TimeModels = Callable[..., Timed]


class LocalTarget:
    """Measurements in this process (the default target)."""

    kind = "local"
    budget_s: float | None = None  # a bound on a run elsewhere; here Cancel stops a run

    def describe(self) -> dict:
        """environment.target of the reports made here."""
        return {"kind": "local"}

    def environment(self) -> dict:
        """This machine's fingerprint with the target."""
        return {**fingerprint(), "target": self.describe()}

    def measure(self, request: MeasureRequest, progress: Progress | None = None,
                cancel: Cancel = None) -> MeasureResult:
        """The runner contract, here."""
        return measure(request, progress, cancel)

    def time_models(self, sources: Sequence[ModelSource], feeds: dict[str, np.ndarray],
                    provider: str = "auto", opt_level: str = "disabled", threads: int = 0, sessions: int = 3,
                    runs: int = 20, warmup: int = 3, seed: int = 0, progress: Progress | None = None,
                    cancel: Cancel = None, base_dir: str | os.PathLike | None = None,
                    deadline: float | None = None) -> Timed:
        """fuseview.runtime.ab.time_models's signature, through `measure` on this target (deadline: a
        time.monotonic() here; the rounds get what is left of it, wherever they run)."""
        rounds_s = None if deadline is None else max(0.0, deadline - time.monotonic())
        req = MeasureRequest(list(sources), feeds, {}, provider, opt_level, threads, sessions, runs, warmup,
                             seed, None if base_dir is None else str(base_dir), rounds_s=rounds_s)
        res = self.measure(req, progress, cancel)
        return res.times, res.providers

    def profile(self, request: Any, progress: Progress | None = None, cancel: Cancel = None) -> dict:
        """fuseview.runtime.job.run_profile here, the report's environment with this target."""
        report = run_profile(request, progress, cancel)
        env = report["environment"]
        env.update({k: v for k, v in fingerprint().items() if k not in env})
        report["environment"]["target"] = self.describe()
        return report

    def close(self) -> None:
        """Nothing to release here."""


def timer_of(target: Any) -> TimeModels:
    """The A/B timer of a target (tune's injection point): its time_models, or this process's."""
    return target.time_models if target is not None else LocalTarget().time_models
