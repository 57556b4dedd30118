"""The settings of a tune (no onnx/onnxruntime import: the window's dialog builds one before tuning)."""

from __future__ import annotations

from dataclasses import dataclass, field

from fuseview.defaults import ATOL, DEFAULT_SEEDS, RTOL
from fuseview.errors import FuseviewError
from fuseview.stats import DEFAULT_THRESHOLD


@dataclass
class TuneSettings:
    """The deployment's settings and the search's limits, plain data; the CLI fills it from its flags (where
    the A/Bs run is the tune's target, not a setting)."""

    provider: str = "auto"
    threads: int = 0
    ort_opt: str = "all"
    dims: dict[str, int] = field(default_factory=dict)
    inputs: str | None = None
    budget_s: float = 120.0
    runs: int = 30  # timed runs per model in each batch of sessions
    sessions: int = 3  # onnxruntime sessions per model in each batch
    max_batches: int = 3  # batches before "no difference" is taken as the answer
    warmup: int = 3
    threshold: float = DEFAULT_THRESHOLD
    atol: float | None = None  # None: the model's precision's (fuseview.precision.TOLERANCES)
    rtol: float | None = None
    float16: bool = False  # tune the model's float16 conversion (I/O types kept): the deployment precision
    seeds: int = DEFAULT_SEEDS
    seed: int = 0
    keep_neutral: bool = False
    ort_optimizer: str = "auto"  # "auto" (guess bert/gpt2 from node names), "off", "bert", "gpt2"

    def check(self) -> None:
        """FuseviewError naming the first bad setting."""
        if not self.budget_s > 0:
            raise FuseviewError("--budget must be more than 0 seconds")
        if self.runs < 2 or self.sessions < 2 or self.max_batches < 1 or self.warmup < 0:
            raise FuseviewError("--runs and --sessions must be at least 2 (the interval needs them)")
        if not 0 <= self.threshold < 1:
            raise FuseviewError("--threshold must be at least 0 and below 1 (0.02 is 2%)")
        if (self.atol is not None and self.atol < 0) or (self.rtol is not None and self.rtol < 0) \
                or self.seeds < 1:
            raise FuseviewError("--atol/--rtol must be 0 or more and --seeds at least 1")
        if self.ort_optimizer not in ("auto", "off", "bert", "gpt2"):
            raise FuseviewError("--ort-optimizer must be auto, off, bert or gpt2")

    def tolerance(self) -> tuple[float, float]:
        """(atol, rtol): those set (workflows.tune sets the model's precision's), else float32's."""
        return (ATOL if self.atol is None else self.atol, RTOL if self.rtol is None else self.rtol)

    def to_json(self) -> dict:
        """The settings as the report's config shows them."""
        return {"provider": self.provider, "ort_opt": self.ort_opt, "threads": self.threads,
                "dims": dict(self.dims), "inputs": self.inputs, "budget_s": float(self.budget_s),
                "runs": self.runs, "sessions": self.sessions, "max_batches": self.max_batches,
                "warmup": self.warmup, "threshold": self.threshold, "atol": self.atol, "rtol": self.rtol,
                "float16": self.float16, "seeds": self.seeds, "seed": self.seed,
                "keep_neutral": self.keep_neutral}
