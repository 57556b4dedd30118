"""One profiling job: a model (and optionally the model to compare against) to a report dict."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fuseview.errors import FuseviewError
from fuseview.runtime import inputs as inputs_mod
from fuseview.runtime.compare import check_same_signature, compare_outputs, fusion_times
from fuseview.runtime.profiling import Cancel, Progress, check_cancel, load_model_graph, profile_model
from fuseview.runtime.report import build_report
from fuseview.runtime.sessions import OPT_LEVELS, PROVIDER_CHOICES, ModelSource, ort_fusions


@dataclass
class ProfileRequest:
    """What to profile and how; the CLI and the GUI fill one of these."""

    model: ModelSource
    against: ModelSource | None = None
    provider: str = "auto"
    runs: int = 20
    warmup: int = 3
    dims: dict[str, int] = field(default_factory=dict)
    inputs_npz: str | None = None
    seed: int = 0
    ort_opt: str = "disabled"
    ort_fusions: bool = False
    atol: float = 1e-4
    rtol: float = 1e-3
    threads: int = 0


def _check(req: ProfileRequest) -> None:
    if req.provider not in PROVIDER_CHOICES:
        raise FuseviewError(f"unknown provider {req.provider!r}; use one of {', '.join(PROVIDER_CHOICES)}")
    if req.ort_opt not in OPT_LEVELS:
        raise FuseviewError(f"unknown --ort-opt {req.ort_opt!r}; use one of {', '.join(OPT_LEVELS)}")
    if req.runs < 1:
        raise FuseviewError("--runs must be at least 1")
    if req.warmup < 0:
        raise FuseviewError("--warmup must be 0 or more")
    if req.atol < 0 or req.rtol < 0:
        raise FuseviewError("--atol and --rtol must be 0 or more")


def _path(m: ModelSource) -> str | None:
    return None if not isinstance(m, (str, Path)) else str(m)


def run_profile(req: ProfileRequest, progress: Progress | None = None, cancel: Cancel = None) -> dict:
    """Profile the model (and the one to compare against) on identical feeds; returns the report dict."""
    _check(req)
    main = load_model_graph(req.model)
    other = load_model_graph(req.against) if req.against is not None else None
    if other is not None:
        check_same_signature(main, other)
    if req.inputs_npz:
        feeds = inputs_mod.load_feeds(req.inputs_npz, main)
        dims = inputs_mod.dims_of_feeds(main, feeds)
        source, seed = str(req.inputs_npz), None
    else:
        unknown = sorted(set(req.dims) - set(inputs_mod.resolve_dims(main)))
        if unknown:
            known = ", ".join(inputs_mod.resolve_dims(main)) or "none"
            raise FuseviewError(f"--dim {unknown[0]}: the model has no such symbolic dim (it has: {known})")
        dims = inputs_mod.resolve_dims(main, req.dims)
        feeds = inputs_mod.make_feeds(main, req.dims, req.seed)
        source, seed = "generated", req.seed
    inputs = {"source": source, "seed": seed, "dims": dims, "feeds": inputs_mod.describe_feeds(feeds)}
    models = []
    pairs = [("model", req.model)] + ([("against", req.against)] if req.against is not None else [])
    for role, m in pairs:
        check_cancel(cancel)
        label = f"{role}: " if len(pairs) > 1 else ""
        prof = profile_model(m, feeds, req.provider, req.ort_opt, req.runs, req.warmup, progress, cancel,
                             req.threads, label)
        prof["role"] = role
        prof["path"] = _path(m)
        models.append(prof)
    comparison = None
    if req.against is not None:
        check_cancel(cancel)
        comparison = compare_outputs(req.model, req.against, feeds, req.provider, req.ort_opt, req.atol,
                                     req.rtol, progress, cancel)
        times = {t["key"]: t for t in fusion_times(req.against, req.model, models[0], models[1])}
        for f in comparison["fusions"]:
            f["time"] = times.get(f["key"])
        if not comparison["fusions"]:
            # The reverse direction: the first model is the fused one.
            comparison["reverse_fusion_times"] = fusion_times(req.model, req.against, models[1], models[0])
    fusions = None
    if req.ort_fusions:
        fusions = []
        for role, m in pairs:
            check_cancel(cancel)
            level = req.ort_opt if req.ort_opt != "disabled" else "extended"
            fusions.append({"role": role, **ort_fusions(m, req.provider, level)})
            if progress:
                progress("ort fusions", len(fusions), len(pairs))
    return build_report(inputs, models, comparison, fusions)
