"""A/B timing statistics: the ratio of two medians, its bootstrap interval, noise, and a verdict.

Used wherever fuseview compares two sets of timings (onnxruntime A/B runs, profiler trace steps), so every
view states a speed-up the same way. Plain numpy; no Qt, no onnxruntime.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

DEFAULT_LEVEL = 0.95
DEFAULT_THRESHOLD = 0.02
DEFAULT_RESAMPLES = 2000
_BLOCK_ELEMENTS = 1 << 22
# Fewer timings than this per side, and an interval means little: say so instead of trusting it.
MIN_RUNS = 10
FASTER, SLOWER, NO_DIFFERENCE, CANNOT_TELL = "faster", "slower", "no difference", "cannot tell"
VERDICTS = (FASTER, SLOWER, NO_DIFFERENCE, CANNOT_TELL)


def verdict(lo: float, hi: float, threshold: float = DEFAULT_THRESHOLD) -> str:
    """The one verdict of a speed-up interval [lo, hi] (>1: faster), the only place one is computed.

    "no difference" when the whole interval lies within ±threshold of 1 (whatever the difference is, it
    is smaller than that); else "faster" when it lies above 1, "slower" below 1; else "cannot tell": the
    interval holds 1 and reaches past the threshold, so the measurement supports no verdict at all.
    """
    if not (lo > 0 and hi >= lo) or math.isnan(lo) or math.isnan(hi):
        return CANNOT_TELL
    margin = 1 + threshold
    if lo >= 1 / margin and hi <= margin:
        return NO_DIFFERENCE
    if lo > 1:
        return FASTER
    if hi < 1:
        return SLOWER
    return CANNOT_TELL


def interval_text(ratio: float, lo: float, hi: float, threshold: float = DEFAULT_THRESHOLD) -> str:
    """'1.12x [1.05, 1.19]': as many decimals (2 to 6) as the printed ends need to carry the same verdict
    as the measured ones (so [1.0004, 1.04] never prints as [1.000, 1.04] faster, nor [0.9803, 1.02] as
    [0.98, 1.02] no difference); two significant digits below 0.1 (never a bare 0.00)."""
    word = verdict(lo, hi, threshold)
    for digits in range(2, 7):
        def num(x: float, d: int = digits) -> str:
            return f"{x:.{d}f}" if abs(x) >= 0.1 or x == 0 else f"{x:.2g}"

        if verdict(float(num(lo)), float(num(hi)), threshold) == word:
            break
    return f"{num(ratio)}x [{num(lo)}, {num(hi)}]"


def level_text(level: float) -> str:
    """An interval's level as a percentage with the decimals it needs: '95%', '99.2%', '99.97%'."""
    miss = 100.0 * (1.0 - level)
    for digits in range(6):
        shown = round(100.0 * level, digits)
        if shown < 100.0 and abs((100.0 - shown) - miss) <= 0.1 * miss:
            return f"{shown:.{digits}f}%"
    return f"{100.0 * level:.6f}%"


def decided(lo: float, hi: float, threshold: float = DEFAULT_THRESHOLD) -> bool:
    """True when the interval supports a verdict (anything but "cannot tell")."""
    return verdict(lo, hi, threshold) != CANNOT_TELL


def more_runs_to_decide(runs: int, ratio: float, lo: float, hi: float,
                        threshold: float = DEFAULT_THRESHOLD) -> int | None:
    """About how many more runs per model would likely decide an undecided interval (width ~ 1/sqrt(n),
    the ratio staying where it is); None when it is decided, or when no number of runs would (the ratio
    sits on 1+threshold, where neither "no difference" nor "faster" can be shown)."""
    if decided(lo, hi, threshold) or not (lo > 0 and ratio > 0) or runs <= 0:
        return None
    half = math.log(hi / lo) / 2
    dist = abs(math.log(ratio))
    target = max(dist, math.log1p(threshold) - dist)  # exclude 1, or fit within ±threshold
    if not half > 0 or target <= 0.05 * half:
        return None
    return max(1, math.ceil(runs * ((half / target) ** 2 - 1)))


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
    verdict: str  # one of VERDICTS (stats.verdict of the interval), said of the `against` side
    noise: Noise
    paired: bool
    sessions: int = 1  # sessions per side whose runs were pooled (and resampled)
    budget_spent: bool = False  # sequential measurement: stopped by its budget, not by a decided interval
    more_runs: int | None = None  # undecided: about how many more runs per model would likely decide

    @property
    def width(self) -> float:
        """The interval's width as a factor, hi / lo (1.04: the ends are 4 % apart)."""
        lo, hi = self.ci
        return float(hi / lo) if lo > 0 else float("inf")

    def to_json(self) -> dict:
        """JSON-ready dict (ci as a list, width the interval's hi / lo)."""
        d = asdict(self)
        d["ci"] = [float(self.ci[0]), float(self.ci[1])]
        d["width"] = self.width if math.isfinite(self.width) else None
        return d

    def summary(self) -> str:
        """One line, e.g. '1.23x [1.19, 1.27] faster (95% CI, 50 interleaved runs)'."""
        lo, hi = self.ci
        how = "interleaved" if self.paired else "independent"
        where = f" in {self.sessions} sessions each" if self.sessions > 1 else ""
        return (
            f"{interval_text(self.speedup_p50, lo, hi, self.threshold)} {self.verdict} "
            f"({level_text(self.level)} CI, {self.runs} {how} runs{where})"
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


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile for p in (0.5, 1): bisection on the CDF, integrated numerically (no scipy)."""
    c = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)

    def cdf(x: float) -> float:
        t = np.linspace(0.0, min(x, 1.0), 1001)
        if x > 1:
            t = np.concatenate([t, np.geomspace(1.0, x, 2001)[1:]])
        f = c * (1 + t * t / df) ** (-(df + 1) / 2)
        return 0.5 + float(np.sum((f[1:] + f[:-1]) * np.diff(t)) / 2)

    lo, hi = 0.0, 1e6
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def session_interval(a: np.ndarray, b: np.ndarray, ratio: float, level: float) -> tuple[float, float, float]:
    """(lo, hi, half-width in log units) of ratio from the spread of per-session medians (Welch's t).

    With a few sessions per side, resampling them underestimates how much sessions differ; Welch's t
    on the log of each session's median counts every session once and pays for having few.
    """
    la, lb = np.log(np.median(a, axis=1)), np.log(np.median(b, axis=1))
    qa, qb = la.var(ddof=1) / la.size, lb.var(ddof=1) / lb.size
    se = math.sqrt(qa + qb)
    if se == 0:
        return ratio, ratio, 0.0
    df = se**4 / (qa**2 / (la.size - 1) + qb**2 / (lb.size - 1))
    half = t_quantile((1 + level) / 2, df) * se
    return ratio * math.exp(-half), ratio * math.exp(half), half


def paired_session_interval(a: np.ndarray, b: np.ndarray, ratio: float, level: float
                            ) -> tuple[float, float, float]:
    """(lo, hi, half-width in log units) of ratio from session pairs timed in the same rounds (Student's t).

    Row i of both sides ran in the same interleaved rounds (one batch of fresh sessions), so the log ratio
    of their medians carries both sessions' own speeds but not the load that hit the rounds: its spread
    over the pairs prices how much sessions differ, as session_interval does, without the load's.
    """
    d = np.log(np.median(a, axis=1)) - np.log(np.median(b, axis=1))
    se = float(d.std(ddof=1)) / math.sqrt(d.size)
    if se == 0:
        return ratio, ratio, 0.0
    half = t_quantile((1 + level) / 2, d.size - 1) * se
    centre = math.exp(float(d.mean()))
    return centre * math.exp(-half), centre * math.exp(half), half


def compare_timings(
    model: np.ndarray | list,
    against: np.ndarray | list,
    *,
    paired: bool = True,
    level: float = DEFAULT_LEVEL,
    threshold: float = DEFAULT_THRESHOLD,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
) -> SpeedupEstimate:
    """Speed-up of `against` over `model` (p50 ratio) with a percentile bootstrap interval and a verdict.

    Each side is a 1-D array of timings, or a 2-D array with one row per session (process, onnxruntime
    session) that took them. A session has a speed of its own (memory placement: two sessions of one file
    differ by up to 3 % here, as pyperf's values differ by process): with two or more sessions a side the
    interval comes from the spread of the sessions' medians (Welch's t, `session_interval`), so a
    difference between sessions widens it instead of passing for a difference between models. With one
    session a side it is a percentile bootstrap over runs; paired: column i of both sides was timed in
    the same round (interleaved runs), so rounds are resampled together and background load that hit
    both cancels out. The verdict is `verdict(lo, hi, threshold)`.
    """
    a = np.atleast_2d(np.asarray(model, dtype=np.float64))
    b = np.atleast_2d(np.asarray(against, dtype=np.float64))
    if a.size == 0 or b.size == 0:
        raise ValueError("compare_timings needs at least one timing per side")
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("timings are a list of runs, or one list of runs per session")
    if paired and a.shape[1] != b.shape[1]:
        raise ValueError("paired timings need as many runs on each side")
    if not (0 < level < 1):
        raise ValueError("level must be between 0 and 1")
    ratio = float(np.median(a) / np.median(b))
    cv_pair = None
    if paired:
        if np.any(b <= 0):
            raise ValueError("paired timings must be positive")
        cv_pair = robust_cv(a.mean(axis=0) / b.mean(axis=0))
    session_half = None
    if paired and a.shape[0] == b.shape[0] >= 2:
        lo, hi, session_half = paired_session_interval(a, b, ratio, level)
        ratio = math.sqrt(lo * hi)  # the pairs' geometric mean ratio: the estimate the interval is about
    elif a.shape[0] >= 2 and b.shape[0] >= 2:
        lo, hi, session_half = session_interval(a, b, ratio, level)
    else:
        lo, hi = _bootstrap_interval(a, b, paired, level, resamples, np.random.default_rng(seed))
    cv_a, cv_b = robust_cv(a.ravel()), robust_cv(b.ravel())
    runs = int(min(a.size, b.size))
    warning = _noise_warning(cv_a, cv_b, cv_pair, runs, threshold, level, session_half)
    noise = Noise(cv_model=cv_a, cv_against=cv_b, warning=warning, cv_paired=cv_pair)
    return SpeedupEstimate(
        runs=runs,
        level=level,
        speedup_p50=ratio,
        ci=(lo, hi),
        threshold=threshold,
        verdict=verdict(lo, hi, threshold),
        noise=noise,
        paired=paired,
        sessions=int(min(a.shape[0], b.shape[0])),
        more_runs=more_runs_to_decide(runs, ratio, lo, hi, threshold),
    )


def _bootstrap_interval(
    a: np.ndarray, b: np.ndarray, paired: bool, level: float, resamples: int, rng: np.random.Generator
) -> tuple[float, float]:
    """Percentile bootstrap interval of median(a) / median(b); paired: rounds are resampled together."""

    def resample(x: np.ndarray, runs: np.ndarray) -> np.ndarray:
        m = runs.shape[0]
        rows = rng.integers(0, x.shape[0], size=(m, x.shape[0]))
        return np.median(x[rows[:, :, None], runs[:, None, :]].reshape(m, -1), axis=1)

    boot = np.empty(resamples)
    # resamples in blocks of at most ~4M drawn indices: 300,000 timings a side stay at tens of MB
    block = max(1, _BLOCK_ELEMENTS // max(a.size, b.size))
    for s in range(0, resamples, block):
        m = min(block, resamples - s)
        if paired:
            rounds = rng.integers(0, a.shape[1], size=(m, a.shape[1]))
            boot[s:s + m] = resample(a, rounds) / resample(b, rounds)
        else:
            boot[s:s + m] = resample(a, rng.integers(0, a.shape[1], size=(m, a.shape[1]))) / resample(
                b, rng.integers(0, b.shape[1], size=(m, b.shape[1]))
            )
    alpha = (1 - level) / 2
    lo, hi = (float(x) for x in np.quantile(boot, [alpha, 1 - alpha]))
    return lo, hi


def _noise_warning(
    cv_a: float, cv_b: float, cv_pair: float | None, runs: int, threshold: float, level: float,
    session_half: float | None,
) -> str | None:
    """Why the interval may be too wide to decide: sessions that differ, or too few runs at this noise."""
    if session_half is not None and session_half > math.log1p(threshold):
        return (
            f"the interval (±{math.expm1(session_half):.1%}) is wider than the {threshold:.0%} threshold: "
            f"sessions of one model differ this much here; more sessions (--sessions) narrow it"
        )
    need = runs_needed(cv_a, cv_b, threshold, level, cv_pair)
    if runs < need:
        scatter = f"CV {cv_a:.1%} / {cv_b:.1%}"
        if cv_pair is not None:
            scatter += f", paired ratios {cv_pair:.1%}"
        return (
            f"too few runs for a {threshold:.0%} threshold at this noise "
            f"({scatter}): about {need} runs per model would be needed"
        )
    return None


# One statistic for a node's (or op type's) time everywhere: its median per run. Heat map, "Share",
# the candidates' "Measured", the CLI's top nodes and op types all rank and share by it, so one stall in
# one of a few profiled runs cannot make a trivial node "the hotspot" (a mean would).
TIME_KEY = "p50_us"


def median_shares(medians: Iterable[float]) -> list[float]:
    """Each median's share of their sum (0 for all when the sum is 0)."""
    values = [max(float(v), 0.0) for v in medians]
    total = sum(values)
    return [v / total if total > 0 else 0.0 for v in values]


def by_median(rows: Iterable[Any], median: Callable[[Any], float] | None = None) -> list[tuple[Any, float]]:
    """Profile rows (nodes or op types: report dicts, or typed rows with `median`, e.g. lambda n: n.p50_us)
    ranked by their median time per run, each with its share."""
    rows = list(rows)
    of = median or (lambda r: float(r[TIME_KEY]))
    shares = median_shares(of(r) for r in rows)
    ranked = sorted(zip(rows, shares, strict=True), key=lambda rs: -of(rs[0]))
    return ranked


def spread_text(row: dict, fmt: Callable[[float], str]) -> str:
    """A row's median with its spread over the profiled runs, e.g. '12.0 us (p90 15.1 us)'."""
    p90 = row.get("p90_us")
    spread = f" (p90 {fmt(float(p90))})" if p90 is not None else ""
    return f"{fmt(float(row[TIME_KEY]))}{spread}"
