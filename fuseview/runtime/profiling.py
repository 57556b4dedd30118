"""Profile one model in onnxruntime: wall latency without profiling, then per-node and per-op-type times."""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from fuseview.errors import Cancelled, FuseviewError
from fuseview.graph.loader import check_structure
from fuseview.naming import unique_node_names
from fuseview.progress import StepProgress
from fuseview.provenance import CANDIDATE_KEY, ORIGIN_KEY, RULE_KEY, origin_names
from fuseview.runtime import trace
from fuseview.runtime.ir_version import clamp_ir
from fuseview.runtime.sessions import ModelSource, create_session, mem_pattern_for
from fuseview.stats import TIME_KEY, median_shares

# progress(stage, done, total): called between runs; the GUI shows it, the CLI prints it on stderr.
Cancel = threading.Event | Callable[[], bool] | None


def check_cancel(cancel: Cancel) -> None:
    """Raise Cancelled when the cancel flag is set."""
    if cancel is None:
        return
    flag = cancel.is_set() if isinstance(cancel, threading.Event) else cancel()
    if flag:
        raise Cancelled("cancelled")


def stats(values: list[float] | np.ndarray) -> dict:
    """mean, p50, p90, min, max of a list of numbers (0 for an empty list)."""
    a = np.asarray(values, dtype=np.float64)
    if a.size == 0:
        return {"mean": 0.0, "p50": 0.0, "p90": 0.0, "min": 0.0, "max": 0.0}
    return {
        "mean": float(a.mean()),
        "p50": float(np.percentile(a, 50)),
        "p90": float(np.percentile(a, 90)),
        "min": float(a.min()),
        "max": float(a.max()),
    }


def load_model_graph(model: ModelSource) -> onnx.ModelProto:
    """The model as a proto (weights left on disk when given a path): for names, metadata and inputs."""
    if isinstance(model, onnx.ModelProto):
        check_structure(model)  # the one structural check, for models loaded elsewhere too
        return model
    from fuseview.graph.loader import read_model

    path = Path(model)
    if not path.is_file():
        raise FuseviewError(f"{path}: no such model file")
    # the one loader: refuses what is no regular file unread, leaves a big file's weights on disk
    # (a 622 MB model is then 1 MB in memory), checks external data and the graph's structure
    return read_model(path)


def runnable(model: ModelSource) -> ModelSource:
    """The model with every main-graph node named as fuseview's loader names it (a copy when needed).

    onnxruntime's profile names nodes by their own name; unnamed nodes would all read "".
    """
    proto = load_model_graph(model)
    names = unique_node_names(proto.graph.node)
    if all(n.name == nm for n, nm in zip(proto.graph.node, names, strict=True)):
        return model
    full = onnx.ModelProto()
    if isinstance(model, onnx.ModelProto):
        full.CopyFrom(model)
    else:
        full = onnx.load(str(model))
    for n, nm in zip(full.graph.node, names, strict=True):
        n.name = nm
    return full


def fused_origins(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Fused node name -> names of the original nodes it replaced (from fuseview.origin metadata)."""
    out: dict[str, list[str]] = {}
    names = unique_node_names(model.graph.node)
    for n, nm in zip(model.graph.node, names, strict=True):
        for p in n.metadata_props:
            if p.key == ORIGIN_KEY:
                origin = origin_names(p.value)
                if origin is not None:
                    out[nm] = origin
    return out


def fusion_groups(model: onnx.ModelProto) -> list[dict]:
    """The applied fusions: fused nodes grouped by candidate id (one fusion may write several nodes).

    Each group: key, candidate, rule, nodes (names), op_types, main node and op type (the first
    non-standard-domain node, else the last), origin (union of the replaced original nodes), outputs.
    """
    names = unique_node_names(model.graph.node)
    origins = fused_origins(model)
    groups: dict[str, dict] = {}
    for n, nm in zip(model.graph.node, names, strict=True):
        if nm not in origins:
            continue
        meta = {p.key: p.value for p in n.metadata_props}
        key = meta.get(CANDIDATE_KEY) or nm
        g = groups.setdefault(key, {
            "key": key, "candidate": meta.get(CANDIDATE_KEY), "rule": meta.get(RULE_KEY),
            "nodes": [], "op_types": [], "domains": [], "origin": [], "outputs": [],
        })
        g["nodes"].append(nm)
        g["op_types"].append(n.op_type)
        g["domains"].append(n.domain)
        g["origin"] += [o for o in origins[nm] if o not in g["origin"]]
        g["outputs"] += [o for o in n.output if o and o not in g["outputs"]]
    out = []
    for g in groups.values():
        custom = [i for i, d in enumerate(g["domains"]) if d not in ("", "ai.onnx")]
        main = custom[0] if custom else len(g["nodes"]) - 1
        g["node"], g["op_type"], g["domain"] = g["nodes"][main], g["op_types"][main], g["domains"][main]
        del g["domains"]
        out.append(g)
    return out


def measure_latency(
    sess, feeds: dict[str, np.ndarray], runs: int, warmup: int, progress: StepProgress | None, cancel: Cancel
) -> list[float]:
    """Wall time of each of `runs` plain session.run calls (ms), after `warmup` untimed runs."""
    return interleaved_latency([sess], feeds, runs, warmup, progress, cancel)[0]


def interleaved_latency(
    sessions: list, feeds: dict[str, np.ndarray], runs: int, warmup: int,
    progress: StepProgress | None = None, cancel: Cancel = None, seed: int = 0,
) -> list[list[float]]:
    """Wall time (ms) of each plain run of every session, the sessions taking turns run by run.

    Each round runs every session once, in an order shuffled per round (seeded), so a burst of background
    load or a slow drift hits both sides of a round alike and neither side always goes first.
    """
    from fuseview.runtime.binding import bound_run

    rng = np.random.default_rng(seed)
    # on CUDA inputs and outputs stay on the device: host copies would dilute the ratio of an A/B
    runners = [bound_run(sess, feeds) for sess in sessions]
    for i in range(warmup):
        check_cancel(cancel)
        for run in runners:
            run()
        if progress:
            progress("warm-up", i + 1, warmup)
    times: list[list[float]] = [[] for _ in sessions]
    order = list(range(len(sessions)))
    for i in range(runs):
        check_cancel(cancel)
        if len(order) > 1:
            rng.shuffle(order)
        for k in order:
            t0 = time.perf_counter()
            runners[k]()
            times[k].append((time.perf_counter() - t0) * 1e3)
        if progress:
            progress("latency", i + 1, runs)
    return times


def run_error(exc: Exception) -> FuseviewError:
    """The one-line error for onnxruntime failing to run a model on the given inputs."""
    if isinstance(exc, FuseviewError):
        return exc
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return FuseviewError(f"onnxruntime failed to run the model on these inputs (see --dim): {msg}")


def profile_trace(
    model: ModelSource,
    feeds: dict[str, np.ndarray],
    provider: str = "auto",
    opt_level: str = "disabled",
    runs: int = 20,
    warmup: int = 3,
    progress: StepProgress | None = None,
    cancel: Cancel = None,
    threads: int = 0,
    timings: dict | None = None,
    cpu_mem_arena: bool = True,
) -> tuple[list[trace.TraceRun], bool, dict]:
    """Runs with onnxruntime profiling on: timed runs' trace (warm-up runs dropped), kernel flag, provider.

    `timings`, when given, receives what the profiling pass cost (seconds): the timed runs (session.run
    calls only), onnxruntime writing its trace, fuseview reading it; and the trace's size in bytes.
    """
    run_s = 0.0
    with tempfile.TemporaryDirectory(prefix="fuseview-prof-") as tmp:
        sess, choice = create_session(model, provider, opt_level, str(Path(tmp) / "ort"), threads=threads,
                                      cpu_mem_arena=cpu_mem_arena)
        try:
            for i in range(warmup + runs):
                check_cancel(cancel)
                t0 = time.perf_counter()
                sess.run(None, feeds)
                if i >= warmup:
                    run_s += time.perf_counter() - t0
                if progress:
                    progress("profile", i + 1, warmup + runs)
        finally:
            t0 = time.perf_counter()
            path = sess.end_profiling()
            write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        all_runs, device_events = trace.read_runs(path)
        read_s = time.perf_counter() - t0
        size = os.path.getsize(path)
    if timings is not None:
        timings.update(profiled_runs=run_s, trace_write=write_s, trace_read=read_s, trace_bytes=size)
    if len(all_runs) < warmup + runs:
        raise FuseviewError(f"profile has {len(all_runs)} model_run events, expected {warmup + runs}")
    return all_runs[warmup:], device_events, choice.to_dict()


_Meta = tuple[str, str, str, str]  # a node's name, op type, provider, time source


@dataclass
class _Samples:
    """Every node event of the runs: one row per distinct node (name, op type, provider, time source) and
    its most kernels; per event, its node's row, its run, its time and its host time."""

    meta: list[_Meta] = field(default_factory=list)
    kernels: list[int] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    times: list[float] = field(default_factory=list)
    hosts: list[float] = field(default_factory=list)


def _samples(runs: list[trace.TraceRun], device_events: bool) -> _Samples:
    """The node events of the runs, each timed by its kernels (device events) or on the host."""
    out = _Samples()
    index: dict[str, int] = {}
    meta, kernels = out.meta, out.kernels
    for r_i, r in enumerate(runs):
        for n in r.nodes:
            k = index.get(n.name)
            if k is None:
                k = index[n.name] = len(meta)
                meta.append((n.name, n.op_type, n.provider, trace.node_time(n, device_events)[1]))
                kernels.append(0)
            if n.provider == trace.CPU_PROVIDER or not device_events:
                out.times.append(n.host_us)
            else:
                out.times.append(n.kernel_us)
            out.ids.append(k)
            out.cols.append(r_i)
            out.hosts.append(n.host_us)
            if n.kernels > kernels[k]:
                kernels[k] = n.kernels
    return out


def summarize(runs: list[trace.TraceRun], device_events: bool, keep_runs: bool = False) -> dict:
    """Per-node and per-op-type statistics (µs) over the runs, with provider and time source.

    keep_runs adds "node_runs_us": node name -> its time in each profiled run (for spreads of sums).
    """
    n_runs = len(runs)
    sm = _samples(runs, device_events)
    meta = sm.meta
    n_nodes = len(meta)
    col = np.asarray(sm.cols, dtype=np.int64)
    flat = np.asarray(sm.ids, dtype=np.int64) * n_runs + col
    size = n_nodes * n_runs
    # node x run matrices; a node inside a loop body runs several times per run: its times add up
    tm = np.bincount(flat, weights=sm.times, minlength=size).reshape(n_nodes, n_runs)
    hm = np.bincount(flat, weights=sm.hosts, minlength=size).reshape(n_nodes, n_runs)
    run_node_totals = np.bincount(col, weights=sm.times, minlength=n_runs)
    nodes = _node_stats(meta, sm.kernels, tm, hm, n_runs)
    op_types = _op_type_stats(meta, tm, n_runs)
    # ranked and shared by the median per run (fuseview.stats): one stalled run does not make a hotspot
    nodes.sort(key=lambda d: -d[TIME_KEY])
    op_types.sort(key=lambda d: -d[TIME_KEY])
    run_durs = [r.dur_us for r in runs]
    extra = {"node_runs_us": {name: tm[k] for k, (name, *_) in enumerate(meta)}} if keep_runs else {}
    return {
        **extra,
        "profiled_runs": n_runs,
        "run_us": stats(run_durs),
        "node_sum_us": stats(run_node_totals),
        "runs_detail": [
            {"model_run_us": r.dur_us, "node_sum_us": float(t)}
            for r, t in zip(runs, run_node_totals, strict=True)
        ],
        "nodes": nodes,
        "op_types": op_types,
    }


def _node_stats(meta: list[_Meta], kernels: list[int], tm: np.ndarray, hm: np.ndarray,
                n_runs: int) -> list[dict[str, Any]]:
    """Each node's mean, median and p90 time per run (tm: node x run), its share and its host mean."""
    n_nodes = len(meta)
    means = tm.mean(axis=1) if n_runs else np.zeros(n_nodes)
    p50, p90 = np.percentile(tm, [50, 90], axis=1) if n_runs and n_nodes else (means, means)
    host_means = hm.mean(axis=1) if n_runs else np.zeros(n_nodes)
    return [
        {
            "name": name, "op_type": op, "provider": prov, "time_source": src, "mean_us": float(means[k]),
            "p50_us": float(p50[k]), "p90_us": float(p90[k]), "share": share,
            "host_mean_us": float(host_means[k]), "kernels": kernels[k],
        }
        for k, ((name, op, prov, src), share) in enumerate(zip(meta, median_shares(p50), strict=True))
    ]


def _op_type_stats(meta: list[_Meta], tm: np.ndarray, n_runs: int) -> list[dict[str, Any]]:
    """Per (op type, provider): its nodes' summed time per run, as mean, median and p90, and its share."""
    groups: dict[tuple[str, str], int] = {}
    gid = np.asarray([groups.setdefault((op, prov), len(groups)) for _, op, prov, _ in meta], dtype=np.int64)
    gm = np.zeros((len(groups), n_runs))
    np.add.at(gm, gid, tm)
    counts = np.bincount(gid, minlength=len(groups))
    first_src: dict[tuple[str, str], str] = {}
    for (_, op, prov, src) in meta:
        first_src.setdefault((op, prov), src)
    op_types: list[dict[str, Any]] = []
    for (op, prov), g in groups.items():
        s = stats(gm[g])
        op_types.append({
            "op_type": op, "provider": prov, "nodes": int(counts[g]), "time_source": first_src[(op, prov)],
            "mean_us": s["mean"], "p50_us": s["p50"], "p90_us": s["p90"],
        })
    for o, share in zip(op_types, median_shares(o[TIME_KEY] for o in op_types), strict=True):
        o["share"] = share
    return op_types


def profile_model(
    model: ModelSource,
    feeds: dict[str, np.ndarray],
    provider: str = "auto",
    opt_level: str = "disabled",
    runs: int = 20,
    warmup: int = 3,
    progress: StepProgress | None = None,
    cancel: Cancel = None,
    threads: int = 0,
    label: str = "",
    cpu_mem_arena: bool = True,
    profile_runs: int | None = None,
    latency: list[float] | None = None,
    keep_runs: bool = False,
) -> dict:
    """Latency (plain runs, no profiling) and the profile summary of one model on identical feeds.

    profile_runs: how many profiled runs the per-node statistics come from (default: `runs`); fewer keep
    the profiling pass cheap while the latency keeps all its runs. latency: plain-run times (ms) already
    measured (e.g. interleaved with another model); then no plain runs are made here.
    cpu_mem_arena=False turns the CPU memory arena off in the profiled session only (fewer statistics for
    onnxruntime's profiler to gather, but allocations then go to malloc: see bench/bench_profile.py).
    """
    profile_runs = runs if profile_runs is None else profile_runs
    if runs < 1 or warmup < 0 or profile_runs < 1:
        raise FuseviewError("--runs and --profile-runs must be >= 1 and --warmup >= 0")
    src = runnable(model)

    def stage(name: str) -> StepProgress | None:
        if progress is None:
            return None
        return lambda s, d, t: progress(f"{label}{s}" if label else s, d, t)

    if latency is None:
        sess, choice = create_session(src, provider, opt_level, threads=threads)
        try:
            lat = measure_latency(sess, feeds, runs, warmup, stage("latency"), cancel)
        except Exception as exc:  # onnxruntime run-time failure on these inputs
            raise run_error(exc) from None
        del sess
        choice_d = choice.to_dict()
    else:
        lat, choice_d = list(latency), None
    cost: dict = {"latency_runs": sum(lat) / 1e3}
    # One profiled warm-up run is enough: the plain runs warmed the caches, only the new session's first
    # run (its allocations) must stay out of the statistics; more would only lengthen the trace.
    t_runs, device_events, prof_choice = profile_trace(src, feeds, provider, opt_level, profile_runs,
                                                       min(warmup, 1), stage(""), cancel, threads, cost,
                                                       cpu_mem_arena)
    t0 = time.perf_counter()
    summary = summarize(t_runs, device_events, keep_runs)
    cost["statistics"] = time.perf_counter() - t0
    return {
        "path": str(model) if not isinstance(model, onnx.ModelProto) else None,
        "provider": choice_d or prof_choice,
        "ort_opt_level": opt_level,
        "runs": len(lat),
        "warmup": warmup,
        "latency_ms": {**stats(lat), "runs": lat},
        "cuda_kernel_events": device_events,
        # How the profiled session was set up and what profiling cost (seconds; trace_bytes in bytes).
        "profile_session": {"cpu_mem_arena": cpu_mem_arena, "threads": threads or None, "cost_s": cost,
                            "mem_pattern": mem_pattern_for(src)},
        **summary,
    }


# Chains of no-op nodes the profiler overhead is fitted on; the difference cancels the per-run cost.
_CHAIN_SHORT, _CHAIN_LONG = 8, 200
_OVERHEAD_CACHE: dict[tuple[str, int], dict] = {}


def noop_chain(n: int) -> onnx.ModelProto:
    """A model that is a chain of n Identity nodes on a 1-element tensor: nothing to compute."""
    h = onnx.helper
    nodes = [h.make_node("Identity", [f"t{i}"], [f"t{i + 1}"], name=f"noop{i}") for i in range(n)]
    graph = h.make_graph(nodes, "noop_chain", [h.make_tensor_value_info("t0", onnx.TensorProto.FLOAT, [1])],
                         [h.make_tensor_value_info(f"t{n}", onnx.TensorProto.FLOAT, [1])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], ir_version=clamp_ir())


def _median_run_us(sess, feeds: dict, runs: int) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t0)
    return float(np.median(times)) * 1e6


def calibrate_overhead(provider: str = "auto", threads: int = 0, runs: int = 40) -> dict:
    """onnxruntime's per-node-event profiling overhead, fitted on chains of no-op nodes (cached per process).

    per_event_us: wall time profiling adds per node execution (slope of profiled minus plain run time
    between a short and a long chain). node_floor_us: the time the profiler reports for a node that does
    nothing (median over the long chain): a node time near it is mostly overhead, not work.
    """
    key = (provider, threads)
    if key in _OVERHEAD_CACHE:
        return dict(_OVERHEAD_CACHE[key])
    feeds = {"t0": np.zeros(1, dtype=np.float32)}
    extra, floor = {}, 0.0
    for n in (_CHAIN_SHORT, _CHAIN_LONG):
        model = noop_chain(n)
        plain, _ = create_session(model, provider, "disabled", threads=threads)
        with tempfile.TemporaryDirectory(prefix="fuseview-calib-") as tmp:
            prof, _ = create_session(model, provider, "disabled", str(Path(tmp) / "ort"), threads=threads)
            for sess in (plain, prof):
                for _ in range(5):
                    sess.run(None, feeds)
            t_plain, t_prof = [], []
            for _ in range(3):  # alternate blocks so a burst of load hits both
                t_plain.append(_median_run_us(plain, feeds, runs // 3 + 1))
                t_prof.append(_median_run_us(prof, feeds, runs // 3 + 1))
            extra[n] = float(np.median(t_prof)) - float(np.median(t_plain))
            path = prof.end_profiling()
            if n == _CHAIN_LONG:
                traced, _ = trace.read_runs(path)
                durs = [nd.host_us for r in traced[10:] for nd in r.nodes]
                floor = float(np.median(durs)) if durs else 0.0
        del plain, prof
    per_event = max(0.0, (extra[_CHAIN_LONG] - extra[_CHAIN_SHORT]) / (_CHAIN_LONG - _CHAIN_SHORT))
    out = {
        "method": f"Identity chains of {_CHAIN_SHORT} and {_CHAIN_LONG} nodes, profiled vs plain",
        "per_event_us": per_event,
        "node_floor_us": floor,
    }
    _OVERHEAD_CACHE[key] = out
    return dict(out)

