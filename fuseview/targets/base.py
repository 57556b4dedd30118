"""The Target protocol: what `local` (fuseview.targets.local) and `ray:ADDRESS` (fuseview.targets.ray_target)
both offer, so the tune, the profile and the sweep run on either without knowing which."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fuseview.progress import StepProgress
    from fuseview.runtime.ab import Timed
    from fuseview.runtime.job import ProfileRequest
    from fuseview.runtime.profiling import Cancel
    from fuseview.runtime.runner import MeasureRequest, MeasureResult
    from fuseview.runtime.sessions import ModelSource

JSON = dict[str, Any]
# a sweep item: (name, model file, TuneSettings fields)
TuneItem = tuple[str, str, JSON]
# the tune of one item (workflows.tune.tune_item): (model, fields, folder, name) -> {"report", "unchanged"}
TuneWork = Callable[[Any, JSON, Path, str], JSON]
# (name, {"report", "unchanged", "environment", "files"?}) or (name, the item's error)
TuneOutcome = tuple[str, "JSON | Exception"]


class Target(Protocol):
    """Where measurements run: this process, or one node of a Ray cluster."""

    kind: str
    budget_s: float | None  # a bound on one run there when the request gives none (None: no bound)

    def describe(self) -> JSON:
        """environment.target of the reports made there."""

    def environment(self) -> JSON:
        """The machine's fingerprint with the target."""

    def measure(self, request: MeasureRequest, progress: StepProgress | None = None,
                cancel: Cancel = None) -> MeasureResult:
        """One interleaved A/B there."""

    def time_models(self, sources: Sequence[ModelSource], feeds: Any, provider: str = "auto",
                    opt_level: str = "disabled", threads: int = 0, sessions: int = 3, runs: int = 20,
                    warmup: int = 3, seed: int = 0, progress: StepProgress | None = None,
                    cancel: Cancel = None, base_dir: str | os.PathLike[str] | None = None,
                    deadline: float | None = None) -> Timed:
        """fuseview.runtime.ab.time_models's signature, run there (tune's A/B timer)."""

    def profile(self, request: ProfileRequest, progress: StepProgress | None = None,
                cancel: Cancel = None) -> JSON:
        """The profile report (JSON) of a whole profile run there."""

    def tune_many(self, items: Sequence[TuneItem], work: TuneWork, folder: Path, per_item_s: float | None,
                  cancel: Cancel = None) -> Iterator[TuneOutcome]:
        """Tune every item (one after another here, as parallel tasks on a cluster); yields each outcome as
        it finishes, the item's model written into folder or returned under "files"."""

    def close(self) -> None:
        """Release what the target holds."""
