"""The Profile dock's settings, held by the Session: the dock edits them, and a profile request is made of
them (with the session's dims and models), so every view of one session profiles the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from fuseview.defaults import DEFAULT_SESSIONS

if TYPE_CHECKING:  # runtime.job imports onnxruntime, which the session loads only when a profile runs
    from fuseview.runtime.job import ModelSource, ProfileRequest


@dataclass(frozen=True)
class ProfileSettings:
    """How the window profiles: provider, runs, warm-up, threads, sessions, budget and ORT level."""

    provider: str = "auto"
    runs: int = 20
    warmup: int = 3
    threads: int = 0  # 0: onnxruntime's default
    sessions: int = DEFAULT_SESSIONS
    budget_s: float | None = None  # with a fused model: batches until the verdict decides (None: one batch)
    ort_opt: str = "all"  # where models are deployed: onnxruntime's default

    def request(self, model: ModelSource, against: ModelSource | None, dims: dict[str, int]
                ) -> ProfileRequest:
        """The profile of model (against the fused one, if any) at dims with these settings."""
        from fuseview.runtime.job import ProfileRequest

        return ProfileRequest(model=model, against=against, provider=self.provider, runs=self.runs,
                              warmup=self.warmup, dims=dict(dims), ort_opt=self.ort_opt,
                              attribution_opt="disabled", threads=self.threads, sessions=self.sessions,
                              budget_s=self.budget_s if against is not None else None)
