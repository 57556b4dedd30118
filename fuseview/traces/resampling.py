"""How many bootstrap resamples a trace comparison draws: one rule for step times and kernel times."""

from __future__ import annotations

from fuseview.stats import DEFAULT_RESAMPLES

# resampled timings per bootstrap: a trace of 10,000 steps needs fewer resamples for a tight interval
BOOTSTRAP_BUDGET = 1_000_000


def bootstrap_resamples(n: int) -> int:
    """Resamples for a bootstrap over n timings a side: the default, fewer (>= 100) for long traces."""
    return int(min(DEFAULT_RESAMPLES, max(100, BOOTSTRAP_BUDGET // max(n, 1))))
