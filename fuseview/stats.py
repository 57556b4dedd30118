"""A/B timing statistics: the ratio of two medians, its bootstrap interval, noise, and a verdict.

Used wherever fuseview compares two sets of timings (onnxruntime A/B runs, profiler trace steps), so every
view states a speed-up the same way. Plain numpy; no Qt, no onnxruntime.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist

import numpy as np

DEFAULT_LEVEL = 0.95
DEFAULT_THRESHOLD = 0.02
DEFAULT_RESAMPLES = 2000
# Fewer timings than this per side, and an interval means little: say so instead of trusting it.
MIN_RUNS = 10


@dataclass(frozen=True)
class Noise:
    """How much each side's timings scatter (robust coefficient of variation), and a warning if too much.

    cv_paired: the scatter of the per-round ratios (paired timings only): what is left of the noise once
    load shared by both runs of a round cancels; the runs needed are computed from it when there.
    """

    cv_model: float
    cv_against: float
    warning: str | None
    cv_paired: float | None = None


@dataclass(frozen=True)
class SpeedupEstimate:
    """model p50 / against p50 with a bootstrap interval, and what may be concluded from it.

    The interval is a percentile bootstrap; paired timings are resampled by rounds (pairs kept together).
    """

    runs: int
    level: float
    speedup_p50: float
    ci: tuple[float, float]
    threshold: float
    verdict: str  # "faster" | "slower" | "no difference", said of the `against` side
    noise: Noise
    paired: bool

    def to_json(self) -> dict:
        """JSON-ready dict (ci as a list)."""
        d = asdict(self)
        d["ci"] = [float(self.ci[0]), float(self.ci[1])]
        return d

    def summary(self) -> str:
        """One line, e.g. '1.23x [1.19, 1.27] faster (95% CI, 50 interleaved runs)'."""
        lo, hi = self.ci
        how = "interleaved" if self.paired else "independent"
        return (
            f"{self.speedup_p50:.2f}x [{lo:.2f}, {hi:.2f}] {self.verdict} "
            f"({self.level:.0%} CI, {self.runs} {how} runs)"
        )


def robust_cv(times: np.ndarray) -> float:
    """Scatter relative to the median: 1.4826 * MAD / median (a normal sample's CV, blind to outliers)."""
    t = np.asarray(times, dtype=np.float64)
    if t.size == 0:
        return float("nan")
    med = float(np.median(t))
    if med <= 0:
        return float("nan")
    return float(1.4826 * np.median(np.abs(t - med)) / med)


def runs_needed(
    cv_model: float, cv_against: float, threshold: float, level: float = DEFAULT_LEVEL,
    cv_paired: float | None = None,
) -> int:
    """About how many runs per side make the interval of the ratio narrower than ±threshold.

    cv_paired (scatter of per-round ratios of interleaved runs) replaces the two sides' scatter when given.
    """
    if cv_paired is not None and not math.isnan(cv_paired):
        cv_model, cv_against = cv_paired / math.sqrt(2), cv_paired / math.sqrt(2)
    if not (threshold > 0) or math.isnan(cv_model) or math.isnan(cv_against):
        return MIN_RUNS
    z = _z(level)
    # the median's standard error is ~1.25 sigma/sqrt(n); log-ratio variance adds both sides'
    sd = 1.25 * math.hypot(cv_model, cv_against)
    return max(MIN_RUNS, math.ceil((z * sd / math.log1p(threshold)) ** 2))


def _z(level: float) -> float:
    return NormalDist().inv_cdf((1 + level) / 2)


def compare_timings(
    model: np.ndarray | list[float],
    against: np.ndarray | list[float],
    *,
    paired: bool = True,
    level: float = DEFAULT_LEVEL,
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> SpeedupEstimate:
    """Speed-up of `against` over `model` (p50 ratio) with a percentile bootstrap interval and a verdict.

    paired: the i-th timings of both sides were taken back to back (interleaved runs), so resampling keeps
    the pairs together and background load that hit both cancels out. The verdict is "faster"/"slower"
    only when the interval excludes 1 and the ratio is further than `threshold` from 1.
    """
    a = np.asarray(model, dtype=np.float64)
    b = np.asarray(against, dtype=np.float64)
    if a.size == 0 or b.size == 0:
        raise ValueError("compare_timings needs at least one timing per side")
    if paired and a.size != b.size:
        raise ValueError("paired timings need as many runs on each side")
    if not (0 < level < 1):
        raise ValueError("level must be between 0 and 1")
    ratio = float(np.median(a) / np.median(b))
    rng = np.random.default_rng(seed)
    cv_pair = None
    if paired:
        if np.any(b <= 0):
            raise ValueError("paired timings must be positive")
        idx = rng.integers(0, a.size, size=(resamples, a.size))
        boot = np.median(a[idx], axis=1) / np.median(b[idx], axis=1)
        cv_pair = robust_cv(a / b)
    else:
        ia = rng.integers(0, a.size, size=(resamples, a.size))
        ib = rng.integers(0, b.size, size=(resamples, b.size))
        boot = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    alpha = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(boot, [alpha, 1 - alpha]))
    margin = math.log1p(threshold)
    if lo > 1 and math.log(ratio) > margin:
        verdict = "faster"
    elif hi < 1 and -math.log(ratio) > margin:
        verdict = "slower"
    else:
        verdict = "no difference"
    cv_a, cv_b = robust_cv(a), robust_cv(b)
    runs = int(min(a.size, b.size))
    need = runs_needed(cv_a, cv_b, threshold, level, cv_pair)
    warning = None
    if runs < need:
        scatter = f"CV {cv_a:.1%} / {cv_b:.1%}"
        if cv_pair is not None:
            scatter += f", paired ratios {cv_pair:.1%}"
        warning = (
            f"too few runs for a {threshold:.0%} threshold at this noise "
            f"({scatter}): about {need} runs per model would be needed"
        )
    noise = Noise(cv_model=cv_a, cv_against=cv_b, warning=warning, cv_paired=cv_pair)
    return SpeedupEstimate(
        runs=runs,
        level=level,
        speedup_p50=ratio,
        ci=(lo, hi),
        threshold=threshold,
        verdict=verdict,
        noise=noise,
        paired=paired,
    )
