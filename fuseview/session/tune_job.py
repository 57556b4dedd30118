"""Session.tune as a job: the one tune recipe (workflows.tune.tune) on the model and scan the session has."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fuseview.session.jobs import JobHandle, Progress
    from fuseview.tuning.run import TuneResult
    from fuseview.tuning.settings import TuneSettings


def tune_job(session: Any, settings: TuneSettings, target: str = "local") -> JobHandle | None:
    """Tune the session's model (a Session: its module imports this one) as the job of kind 'tune'; None
    before a scan.

    The model and scan the session holds are tuned (a KV-cache decoder rescanned at its decode step), at the
    scan's dims unless the settings name dims. The scan is reused when made for any provider (tune measures
    every candidate) or for the one tuned on, else tune scans for that provider; a float16 conversion on show
    is tuned as `tune --float16` tunes its float32 model (the same conversion: the same candidate ids)."""
    from fuseview.tuning.run import scan_provider
    from fuseview.workflows.tune import tune

    doc, scan, path = session.root, session.scan, session.source_path()
    if doc is None or path is None or scan is None or session.decisions is None:
        return None
    run = settings if settings.dims or settings.inputs else replace(settings, dims=dict(session.scan_dims))
    model, reuse = doc.model, scan if session.scan_for in (None, scan_provider(run.provider)) else None
    if session.converted_from is not None:
        model, run, reuse = session.converted_from.model, replace(run, float16=True), None

    def work(progress: Progress) -> TuneResult:
        # a Ray cluster is reached in the worker
        return tune(model, run, target, progress, lambda: progress.stopped or progress.cancelled,
                    path=path, scan=reuse)

    def done(result: TuneResult) -> None:
        session.tune_result = result
        d = session.decisions  # a rescan since the start made new ones: the same candidate ids
        if d is not None:
            chosen = result.report.decisions
            d.set_many({x.candidate: x.decision for x in chosen if x.candidate in d.by_id})
        session.events.tuned.emit(result=result)

    job: JobHandle = session.jobs.submit(work, "tune", "Tuning", on_done=done,
                                         on_failed=lambda exc: session.events.tune_failed.emit(error=exc),
                                         on_cancelled=lambda: session.events.tune_cancelled.emit())
    return job
