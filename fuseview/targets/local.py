"""The local target: the Target protocol (fuseview.targets.base) in this process; the Ray target subclasses
it and runs the same functions on a node."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from fuseview.errors import Cancelled
from fuseview.progress import StepProgress
from fuseview.runtime.ab import Timed
from fuseview.runtime.job import ProfileRequest, run_profile
from fuseview.runtime.profiling import Cancel, check_cancel
from fuseview.runtime.runner import MeasureRequest, MeasureResult, fingerprint, measure
from fuseview.runtime.sessions import ModelSource
from fuseview.targets.base import JSON, TuneItem, TuneOutcome, TuneWork
from fuseview.targets.stamp import stamp_profile, where


class LocalTarget:
    """Measurements in this process (the default target)."""

    kind = "local"

    def __init__(self) -> None:
        self.budget_s: float | None = None  # a bound on a run elsewhere; here Cancel stops a run

    def describe(self) -> JSON:
        """environment.target of the reports made here."""
        return {"kind": "local"}

    def environment(self) -> JSON:
        """This machine's fingerprint with the target."""
        return where(fingerprint(), self.describe())

    def measure(self, request: MeasureRequest, progress: StepProgress | None = None,
                cancel: Cancel = None) -> MeasureResult:
        """The runner contract, here."""
        return measure(request, progress, cancel)

    def time_models(self, sources: Sequence[ModelSource], feeds: Any, provider: str = "auto",
                    opt_level: str = "disabled", threads: int = 0, sessions: int = 3, runs: int = 20,
                    warmup: int = 3, seed: int = 0, progress: StepProgress | None = None,
                    cancel: Cancel = None, base_dir: str | os.PathLike[str] | None = None,
                    deadline: float | None = None) -> Timed:
        """fuseview.runtime.ab.time_models's signature, through `measure` on this target (deadline: a
        time.monotonic() here; the rounds get what is left of it, wherever they run)."""
        rounds_s = None if deadline is None else max(0.0, deadline - time.monotonic())
        req = MeasureRequest(list(sources), feeds, {}, provider, opt_level, threads, sessions, runs, warmup,
                             seed, None if base_dir is None else str(base_dir), rounds_s=rounds_s)
        res = self.measure(req, progress, cancel)
        return res.times, res.providers

    def profile(self, request: ProfileRequest, progress: StepProgress | None = None, cancel: Cancel = None
                ) -> JSON:
        """fuseview.runtime.job.run_profile here, the report's environment with this target."""
        return stamp_profile(run_profile(request, progress, cancel), self.environment())

    def tune_many(self, items: Sequence[TuneItem], work: TuneWork, folder: Path, per_item_s: float | None,
                  cancel: Cancel = None) -> Iterator[TuneOutcome]:
        """Tune the items here one after another (each tune bounds itself by its budget: per_item_s is not
        needed); an item's failure is its outcome and the next items still run."""
        for name, model, fields in items:
            check_cancel(cancel)
            try:
                done = work(model, fields, folder, name)
            except Cancelled:
                raise
            except Exception as exc:  # noqa: BLE001 -- any item's failure is recorded; the next items run
                yield name, exc
                continue
            yield name, {**done, "environment": self.environment()}

    def close(self) -> None:
        """Nothing to release here."""
