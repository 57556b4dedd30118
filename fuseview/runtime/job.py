"""One profiling job: a model (and optionally the model to compare against) to a report dict."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import onnx

from fuseview.defaults import DEFAULT_SESSIONS
from fuseview.dims import run_dims
from fuseview.errors import FuseviewError
from fuseview.naming import unique_node_names
from fuseview.precision import precision, tolerances
from fuseview.progress import StepProgress
from fuseview.runtime import inputs as inputs_mod
from fuseview.runtime.ab import Sequential, measure_until_decided
from fuseview.runtime.compare import check_same_signature, compare_outputs, fusion_times
from fuseview.runtime.deployment import deployment_check
from fuseview.runtime.device_time import measure_device_time, node_device_times, roofline_times
from fuseview.runtime.machine import machine_roofline
from fuseview.runtime.placement import moved_to_cpu, placement
from fuseview.runtime.profiling import (
    Cancel,
    calibrate_overhead,
    check_cancel,
    fusion_groups,
    load_model_graph,
    profile_model,
)
from fuseview.runtime.report import build_report
from fuseview.runtime.roofline import model_roofline
from fuseview.runtime.runner import MeasureRequest, measure
from fuseview.runtime.sessions import CPU, CUDA, OPT_LEVELS, PROVIDER_CHOICES, ModelSource, ort_fusions
from fuseview.stats import DEFAULT_THRESHOLD, compare_timings

MAX_SESSIONS = 16


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
    ort_opt: str = "disabled"  # the level the plain (A/B) latency runs at: the headline verdict's
    # the level of the profiled runs (per-node attribution) and the output comparison; None: ort_opt.
    # "disabled" keeps the nodes the model's own; the CLI's default, while its headline is at "all".
    attribution_opt: str | None = None
    ort_fusions: bool = False
    atol: float | None = None  # None: the model's precision's (fuseview.precision.TOLERANCES)
    rtol: float | None = None
    threads: int = 0
    threshold: float = DEFAULT_THRESHOLD
    profile_runs: int | None = None  # profiled runs for per-node statistics; None: default_profile_runs
    sessions: int = DEFAULT_SESSIONS  # onnxruntime sessions per model when comparing two (see stats)
    # with `against`: measure in interleaved batches until the verdict decides or this many seconds end
    # (runtime.ab.measure_until_decided, as tune does); None: one batch of `runs` runs
    budget_s: float | None = None

    def attribution_level(self) -> str:
        """The optimization level of the per-node profile and the output comparison."""
        return self.attribution_opt or self.ort_opt

    def to_json(self) -> dict:
        """The request as JSON (the models must be paths: a child process reads them)."""
        for label, m in (("model", self.model), ("against", self.against)):
            if m is not None and not isinstance(m, (str, Path)):
                raise FuseviewError(f"{label}: an in-memory model cannot be sent as JSON; save it first")
        out = asdict(self)
        out["model"] = str(self.model)
        out["against"] = None if self.against is None else str(self.against)
        return out

    @classmethod
    def from_json(cls, data: dict) -> ProfileRequest:
        """The request to_json wrote (unknown keys refused: a request from another version is an error)."""
        known = {f.name for f in fields(cls)}
        extra = sorted(set(data) - known)
        if extra:
            raise FuseviewError(f"profile request: unknown fields {', '.join(extra)}")
        if "model" not in data:
            raise FuseviewError("profile request: no model")
        return cls(**data)

    def profiled_runs(self) -> int:
        """How many profiled runs the per-node statistics come from."""
        return self.profile_runs if self.profile_runs is not None else default_profile_runs(self.runs)


def default_profile_runs(runs: int) -> int:
    """Profiled runs for `runs` latency runs: 5, or a tenth of them when more, never more than `runs`.

    A profiled run costs about three plain runs on a model of many small nodes (one event per node, then
    the trace is written and read); a tenth keeps a whole profile under twice the plain runs, and
    per-node medians of 5 runs already rank the nodes.
    """
    return max(1, min(runs, max(5, runs // 10)))


def _check(req: ProfileRequest) -> None:
    if not 1 <= req.sessions <= MAX_SESSIONS:
        raise FuseviewError(f"--sessions must be between 1 and {MAX_SESSIONS}")
    if req.provider not in PROVIDER_CHOICES:
        raise FuseviewError(f"unknown provider {req.provider!r}; use one of {', '.join(PROVIDER_CHOICES)}")
    if req.ort_opt not in OPT_LEVELS:
        raise FuseviewError(f"unknown --ort-opt {req.ort_opt!r}; use one of {', '.join(OPT_LEVELS)}")
    if req.attribution_opt is not None and req.attribution_opt not in OPT_LEVELS:
        raise FuseviewError(
            f"unknown --attribution-opt {req.attribution_opt!r}; use one of {', '.join(OPT_LEVELS)}")
    if req.runs < 1:
        raise FuseviewError("--runs must be at least 1")
    if req.warmup < 0:
        raise FuseviewError("--warmup must be 0 or more")
    if (req.atol or 0) < 0 or (req.rtol or 0) < 0:
        raise FuseviewError("--atol and --rtol must be 0 or more")
    if not (0 <= req.threshold < 1):
        raise FuseviewError("--threshold must be at least 0 and below 1 (0.02 is 2%)")
    if req.profile_runs is not None and req.profile_runs < 1:
        raise FuseviewError("--profile-runs must be at least 1")
    if req.budget_s is not None:
        if req.against is None:
            raise FuseviewError("--budget bounds an A/B: give --against OTHER too")
        if isinstance(req.budget_s, bool) or not isinstance(req.budget_s, (int, float)) \
                or not 0 < req.budget_s < float("inf"):
            raise FuseviewError(f"--budget {req.budget_s!r}: must be a finite number of seconds, more than 0")


def _path(m: ModelSource) -> str | None:
    return None if not isinstance(m, (str, Path)) else str(m)


def _load_once(m: ModelSource) -> ModelSource:
    """The model parsed once for the whole job, its nodes named as fuseview's loader names them.

    Every later step (sessions, output comparison, fusion times) takes this proto instead of the file. It
    is read by the one loader: a big file's weights stay in the file and those of a side file in theirs
    (their folder recorded), and sessions reach them through links; a 622 MB model is 1 MB in memory.
    """
    if isinstance(m, onnx.ModelProto):
        proto = m
    else:
        from fuseview.graph.loader import read_model_anywhere

        path = Path(m)
        if not path.is_file():
            raise FuseviewError(f"{path}: no such model file")
        proto = read_model_anywhere(path)
    names = unique_node_names(proto.graph.node)
    if any(n.name != nm for n, nm in zip(proto.graph.node, names, strict=True)):
        if proto is m:
            proto = onnx.ModelProto()
            proto.CopyFrom(m)
        for n, nm in zip(proto.graph.node, names, strict=True):
            n.name = nm
    return proto


def _spread(values: np.ndarray) -> list[float]:
    """[p25, p75] of a sum's per-run values."""
    return [float(x) for x in np.percentile(values, [25, 75])] if len(values) else [0.0, 0.0]


def add_fusion_spreads(times: list[dict], prof_original: dict, prof_fused: dict, fusions: list[dict],
                       overhead: dict) -> None:
    """Per fusion: spread over the profiled runs of the fused and the replaced nodes' summed times, and
    whether their difference is measurable above the profiler's per-node overhead and that spread."""
    runs_a = prof_original.get("node_runs_us", {})
    runs_b = prof_fused.get("node_runs_us", {})
    origin = {f["key"]: f for f in fusions}
    floor = float(overhead.get("node_floor_us", 0.0))
    for t in times:
        g = origin.get(t["key"])
        if g is None:
            continue
        a = [runs_a[o] for o in g["origin"] if o in runs_a]
        b = [runs_b[n] for n in g["nodes"] if n in runs_b]
        if not a or not b:
            t["measurable"] = False
            continue
        sa, sb = np.sum(a, axis=0), np.sum(b, axis=0)
        t["original_spread_us"], t["fused_spread_us"] = _spread(sa), _spread(sb)
        diff = abs(float(np.median(sa)) - float(np.median(sb)))
        # each node event carries about `floor` of profiler time; the replaced nodes carry more of it
        noise = max(floor * (len(a) + len(b)), (t["original_spread_us"][1] - t["original_spread_us"][0])
                    + (t["fused_spread_us"][1] - t["fused_spread_us"][0]))
        t["measurable"] = diff > noise


def _drop_node_runs(models: list[dict]) -> None:
    for m in models:
        m.pop("node_runs_us", None)


Timed = tuple[list[np.ndarray], list[dict], Sequential | None]


def _time(req: ProfileRequest, sources: list[ModelSource], feeds: dict[str, np.ndarray],
          progress: StepProgress | None, cancel: Cancel) -> Timed:
    """The plain runs: one (sessions x rounds) array per model and its provider choice; with a budget and
    a model to compare against, batches until the one verdict rule decides (the Sequential result)."""
    if req.budget_s is None or len(sources) < 2:
        per_model = req.sessions if len(sources) > 1 else 1
        timed = measure(MeasureRequest(sources, feeds, {}, req.provider, req.ort_opt, req.threads, per_model,
                                       req.runs, req.warmup, req.seed), progress, cancel)
        return timed.times, timed.providers, None
    budget = float(req.budget_s)
    start, total = time.monotonic(), max(1, round(budget))

    def said(batch: int, est: dict) -> None:
        if progress:
            spent = min(int(time.monotonic() - start), total - 1)
            progress(f"A/B batch {batch}: {est[(0, 1)].verdict}", spent, total)

    if progress:
        progress("A/B batch 1", 0, total)
    seq = measure_until_decided(sources, feeds, [(0, 1)], budget_s=budget, provider=req.provider,
                                opt_level=req.ort_opt, threads=req.threads, sessions=req.sessions,
                                runs=req.runs, warmup=req.warmup, threshold=req.threshold, seed=req.seed,
                                cancel=cancel, on_batch=said)
    return seq.grouped, seq.choices, seq


def run_profile(req: ProfileRequest, progress: StepProgress | None = None, cancel: Cancel = None) -> dict:
    """Profile the model (and the one to compare against) on identical feeds; returns the report dict.

    With a model to compare against, the plain runs of the two alternate (order shuffled per round) and
    comparison.latency states the speed-up with its interval and verdict (fuseview.stats).
    """
    _check(req)
    sources = [_load_once(req.model)] + ([_load_once(req.against)] if req.against is not None else [])
    main = load_model_graph(sources[0])
    if len(sources) > 1:
        check_same_signature(main, load_model_graph(sources[1]))
    feeds, dims, inputs = _feeds(req, main)
    roles = ["model", "against"][: len(sources)]
    grouped, choices, sequential = _time(req, sources, feeds, progress, cancel)
    latency = [g.ravel().tolist() for g in grouped]
    check_cancel(cancel)
    overhead = calibrate_overhead(req.provider, req.threads)
    if progress:  # measured once per machine (about 2 s), then read from the user's cache
        progress("machine roofline", 0, 1)
    machine = machine_roofline(req.provider, req.threads)
    if progress:
        progress("machine roofline", 1, 1)
    models = []
    for role, m, path, lat, provider in zip(roles, sources, [req.model, req.against], latency, choices,
                                            strict=False):
        check_cancel(cancel)
        label = f"{role}: " if len(sources) > 1 else ""
        prof = _profile_one(req, m, feeds, label, lat, progress, cancel)
        prof["role"] = role
        prof["path"] = None if path is None else _path(path)
        prof["provider"] = provider
        _add_placement_and_roofline(req, prof, m, feeds, dims, machine, overhead)
        models.append(prof)
    comparison = None
    if len(sources) > 1:
        check_cancel(cancel)
        comparison = _comparison(req, main, sources, models, feeds, overhead, progress, cancel)
        _add_latency(req, comparison, grouped, sequential)
    _drop_node_runs(models)
    fusions = _ort_fusions_of(req, roles, sources, progress, cancel) if req.ort_fusions else None
    return build_report(inputs, models, comparison, fusions, overhead)


def _feeds(req: ProfileRequest, main: onnx.ModelProto) -> tuple[dict[str, np.ndarray], dict, dict]:
    """The feeds (from --inputs, or generated at the run's dims), those dims, and the report's inputs."""
    note = None
    if req.inputs_npz:
        feeds = inputs_mod.load_feeds(req.inputs_npz, main)
        dims = inputs_mod.dims_of_feeds(main, feeds)
        source, seed = str(req.inputs_npz), None
    else:  # a KV-cache decoder at its decode step (the one rule tune and sweeps use), said in a note
        resolved = run_dims(main, req.dims)
        dims, note = resolved.values, resolved.note
        feeds = inputs_mod.make_feeds(main, dims, req.seed)
        source, seed = "generated", req.seed
    inputs = {"source": source, "seed": seed, "dims": dims, "feeds": inputs_mod.describe_feeds(feeds)}
    if note:
        inputs["note"] = note
    return feeds, dims, inputs


def _profile_one(req: ProfileRequest, m: ModelSource, feeds: dict[str, np.ndarray], label: str, lat: list,
                 progress: StepProgress | None, cancel: Cancel) -> dict:
    """One model's per-node profile, its plain runs' latency beside it."""
    return profile_model(m, feeds, req.provider, req.attribution_level(), req.runs, req.warmup, progress,
                         cancel,
                         req.threads, label, profile_runs=req.profiled_runs(), latency=lat,
                         keep_runs=True)


def _add_placement_and_roofline(req: ProfileRequest, prof: dict, m: ModelSource, feeds: dict[str, np.ndarray],
                                dims: dict, machine: dict, overhead: dict) -> None:
    """The profile's placement, precision, device times (on CUDA), roofline and per-op overhead."""
    prof["latency_ort_opt"] = req.ort_opt
    prof["placement"] = placement(prof)
    graph = load_model_graph(m)
    prof["precision"] = precision(graph)  # the float type its times and outputs are measured in
    if prof["provider"].get("provider") == CUDA:  # GPU kernels per node, beside the host-side node times
        device = measure_device_time(m, feeds, req.provider, req.attribution_level(),
                                     req.profiled_runs(), req.threads)
        prof["device_time"] = device
        if device.get("available"):
            node_device_times(prof["nodes"], device)
    # on CUDA the roofline's points are the nodes' device times: their host-side spans are launches
    prof["roofline"] = model_roofline(graph, dims, roofline_times(prof["nodes"]), machine)
    if prof.get("device_time", {}).get("available"):
        prof["roofline"]["time_source"] = "device"
    floor = overhead["node_floor_us"]
    for o in prof["op_types"]:
        o["overhead_us"] = o["nodes"] * floor


def _comparison(req: ProfileRequest, main: onnx.ModelProto, sources: list[ModelSource], models: list[dict],
                feeds: dict[str, np.ndarray], overhead: dict, progress: StepProgress | None, cancel: Cancel
                ) -> dict:
    """The two models' outputs and fusions compared: differences, per-fusion times, placement moves and,
    off the CPU, the check as deployed."""
    kind, atol, rtol = tolerances(main, req.atol, req.rtol)  # a float16 model: float16's tolerances
    comparison = compare_outputs(sources[0], sources[1], feeds, req.provider, req.attribution_level(),
                                 atol, rtol, progress, cancel)
    comparison["precision"] = kind
    times = fusion_times(sources[1], sources[0], models[0], models[1])
    add_fusion_spreads(times, models[0], models[1], comparison["fusions"], overhead)
    by_key = {t["key"]: t for t in times}
    for f in comparison["fusions"]:
        f["time"] = by_key.get(f["key"])
    if not comparison["fusions"]:
        # The reverse direction: the first model is the fused one.
        rev = fusion_times(sources[0], sources[1], models[1], models[0])
        groups = fusion_groups(load_model_graph(sources[0]))
        add_fusion_spreads(rev, models[1], models[0], groups, overhead)
        comparison["reverse_fusion_times"] = rev
    # the model is the original and `against` the fused one, unless no fusion was found that way round
    before, after = (models[0], models[1]) if comparison["fusions"] else (models[1], models[0])
    comparison["placement_flag"] = moved_to_cpu(before["placement"], after["placement"])
    if comparison["provider"]["provider"] != CPU:  # beside the float32 verdict: as deployed (TF32)
        orig, fused = (sources[0], sources[1]) if comparison["fusions"] else (sources[1], sources[0])
        comparison["deployment"] = deployment_check(orig, fused, feeds, req.provider,
                                                    req.attribution_level(), atol, rtol)
    return comparison


def _add_latency(req: ProfileRequest, comparison: dict, grouped: list[np.ndarray],
                 sequential: Sequential | None) -> None:
    """comparison.latency: the speed-up of the interleaved runs, its interval and verdict (and the budget's
    batches when it had one)."""
    est = sequential.estimates[(0, 1)] if sequential is not None else compare_timings(
        grouped[0], grouped[1], paired=True, threshold=req.threshold, seed=req.seed)
    comparison["latency"] = {"method": "interleaved", "ort_opt": req.ort_opt, **est.to_json()}
    if sequential is not None:
        comparison["latency"].update({"budget_s": req.budget_s, "batches": sequential.batches,
                                      "seconds": round(sequential.seconds, 3)})


def _ort_fusions_of(req: ProfileRequest, roles: list[str], sources: list[ModelSource],
                    progress: StepProgress | None, cancel: Cancel) -> list[dict]:
    """What onnxruntime's own graph optimizer fuses in each model, at the run's level (extended if off)."""
    fusions: list[dict] = []
    for role, m in zip(roles, sources, strict=True):
        check_cancel(cancel)
        level = req.ort_opt if req.ort_opt != "disabled" else "extended"
        fusions.append({"role": role, **ort_fusions(m, req.provider, level)})
        if progress:
            progress("ort fusions", len(fusions), len(sources))
    return fusions
