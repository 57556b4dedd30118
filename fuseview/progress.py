"""The one progress protocol, in the two forms long work reports it (every alias of fuseview is one of these).

`Progress(message, fraction)`: a job's progress, the fraction of the whole done (the window's job service,
loading, fusing, tuning, sweeps, traces). `StepProgress(stage, done, total)`: counted steps of one stage
(runtime's warm-up, latency and profiled runs, a validation's input sets), sent as they are by the profile
child so that its parent can weigh the stages; `steps_of(progress)` reports them to a Progress.
"""

from __future__ import annotations

from collections.abc import Callable

Progress = Callable[[str, float], None]
StepProgress = Callable[[str, int, int], None]


def steps_of(progress: Progress | None, prefix: str = "", start: float = 0.0, share: float = 1.0
             ) -> StepProgress | None:
    """Counted steps reported to a Progress as 'PREFIXstage done/total' at start + share * done / total."""
    if progress is None:
        return None
    return lambda stage, done, total: progress(f"{prefix}{stage} {done}/{total}",
                                               start + share * done / max(total, 1))
