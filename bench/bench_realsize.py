"""Real-width models: time and peak RSS of info/render/scan/fuse, candidates per rule, and latency ratios.

    python bench/bench_realsize.py [--models DIR] [--only NAME ...] [--runs N] [--dim seq=32]
                                   [--levels disabled all] [--threads 1 2] [--no-latency]

For each .onnx in DIR (default build/realsize; the real-width exports of scripts/make_realsize_models.py
are in /work/exports/real here): every fuseview command runs in its own process, timed wall-clock, its peak
RSS from the kernel (os.wait4's ru_maxrss); the fused model is the one `fuseview fuse` wrote. Latency:
fused / original and fused / onnxruntime.transformers.optimizer output (models it supports: GPT-2, BERT,
T5), at each onnxruntime level and thread count, the sessions' runs interleaved round by round
(fuseview.runtime.profiling.interleaved_latency) and compared with fuseview.stats.compare_timings (ratio
of medians, 95 % interval, verdict). Ratios below 1 mean the fused model is faster. A shared machine makes
absolute figures noisy: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_MODELS = ROOT / "build" / "realsize"
OUT = ROOT / "build" / "realsize-out"
# onnxruntime.transformers.optimizer's model types for the architectures the exports name
ORT_MODEL_TYPE = {"gpt2": "gpt2", "bert": "bert", "t5": "t5"}


def run_timed(args: list[str]) -> tuple[float, float, int, int, str, str]:
    """(wall s, CPU s, peak RSS bytes, exit code, stdout, stderr) of one fuseview command in its own
    process (CPU time, user + system, is what a loaded machine inflates least)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "fuseview", *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    # wait4 gives this child's own rusage (RUSAGE_CHILDREN would be the peak over every child so far);
    # the pipes are drained by threads so a chatty command cannot block on a full pipe
    chunks: dict[str, bytes] = {}

    def drain(name: str, stream) -> None:  # noqa: ANN001 - a pipe
        chunks[name] = stream.read()

    pipes = (("out", p.stdout), ("err", p.stderr))
    threads = [threading.Thread(target=drain, args=pipe) for pipe in pipes]
    for t in threads:
        t.start()
    _pid, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    for t in threads:
        t.join()
    p.returncode = os.waitstatus_to_exitcode(status)
    cpu = usage.ru_utime + usage.ru_stime
    return (wall, cpu, usage.ru_maxrss * 1024, p.returncode, chunks["out"].decode(errors="replace"),
            chunks["err"].decode(errors="replace"))


def architecture(path: Path, index: dict) -> str:
    """gpt2 / bert / llama / t5 from the exports' INDEX.json, else from the file name."""
    entry = index.get(path.stem, {})
    arch = str(entry.get("architecture", "")).lower() or path.stem.lower()
    return next((a for a in ("gpt2", "bert", "llama", "t5") if a in arch), "other")


def ort_optimized(path: Path, arch: str, out: Path) -> tuple[Path | None, str]:
    """onnxruntime.transformers.optimizer's output for the model (its own fusions, opt_level 0)."""
    if arch not in ORT_MODEL_TYPE:
        return None, "optimizer has no model type for it"
    import logging

    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    target = out / f"{path.stem}.ortopt.onnx"
    t0 = time.perf_counter()
    try:
        opt = optimize_model(str(path), model_type=ORT_MODEL_TYPE[arch], num_heads=0, hidden_size=0,
                             opt_level=0)
        opt.save_model_to_file(str(target), use_external_data_format=False)
    except Exception as exc:  # noqa: BLE001 - the optimizer crashes on some exports: report, go on
        first = str(exc).splitlines()[0][:80] if str(exc) else ""
        return None, f"optimizer failed: {type(exc).__name__}: {first}"
    return target, f"optimizer {time.perf_counter() - t0:.1f} s"


def latency_rows(paths: dict[str, Path], dims: dict[str, int], levels: list[str], threads: list[int],
                 runs: int, warmup: int) -> list[dict]:
    """fused / original and fused / ort-opt at each level and thread count, interleaved."""
    import numpy as np

    from fuseview.dims import dim_keys
    from fuseview.graph.loader import read_model
    from fuseview.runtime.inputs import make_feeds
    from fuseview.runtime.profiling import interleaved_latency
    from fuseview.runtime.sessions import create_session
    from fuseview.stats import compare_timings

    model = read_model(paths["original"])  # the signature only: weights stay on disk
    keys = set(dim_keys(model))
    feeds = make_feeds(model, {k: v for k, v in dims.items() if k in keys})
    rows = []
    for level in levels:
        for t in threads:
            names = list(paths)
            sessions = [create_session(str(paths[n]), "cpu", level, threads=t)[0] for n in names]
            times = interleaved_latency(sessions, feeds, runs, warmup)
            del sessions
            by = {n: np.asarray(x) for n, x in zip(names, times, strict=True)}
            row = {"level": level, "threads": t, "original_ms": float(np.median(by["original"]))}
            for other in names:
                if other == "fused":
                    continue
                # compare_timings gives against / model as a speed-up: fused ÷ other is its inverse
                est = compare_timings(by["fused"], by[other])
                row[f"fused/{other}"] = (est.speedup_p50, est.ci, est.verdict)
            rows.append(row)
    return rows


def _fmt_ratio(r) -> str:  # noqa: ANN001
    if r is None:
        return "-"
    ratio, (lo, hi), verdict = r
    word = {"faster": "slower", "slower": "faster"}.get(verdict, "=")  # fused is the timed `model` side
    return f"{ratio:.3f} [{lo:.3f}, {hi:.3f}] {word}"


def _time_commands(files: list[Path]) -> list[tuple[Path, dict, Path]]:
    """Time info, render, scan and fuse of each model as the command line runs them; print a row each."""
    heads = " ".join(f"{h + ' wall/cpu s, MB':>20}" for h in ("info", "render", "scan", "fuse"))
    print(f"{'model':<28} {'MB':>6}  {heads}  RSS/file (worst)")
    results: list[tuple[Path, dict, Path]] = []
    for path in files:
        size = path.stat().st_size
        fused = OUT / f"{path.stem}.fused.onnx"
        steps = {
            "info": ["info", str(path)],
            "render": ["render", str(path), "-o", str(OUT / f"{path.stem}.svg")],
            "scan": ["scan", str(path), "--json"],
            "fuse": ["fuse", str(path), "-o", str(fused)],
        }
        measured = {}
        cells = []
        for name, cmd in steps.items():
            wall, cpu, rss, rc, out, err = run_timed(cmd)
            measured[name] = (wall, rss, rc, out, err)
            cells.append(f"{wall:5.1f}/{cpu:5.1f}, {rss / 2**20:5.0f}" if rc == 0 else f"exit {rc}")
        worst = max(m[1] for m in measured.values()) / size
        row = " ".join(f"{c:>20}" for c in cells)
        print(f"{path.stem:<28} {size / 2**20:6.0f}  {row}  {worst:.2f}x")
        for name, (_w, _r, rc, _o, err) in measured.items():
            if rc != 0:
                print(f"  {name}: {err.strip()[:200]}")
        rules: dict[str, int] = {}
        if measured["scan"][2] == 0:
            for c in json.loads(measured["scan"][3])["candidates"]:
                rules[c["rule"]] = rules.get(c["rule"], 0) + 1
            print("  candidates " + (", ".join(f"{k} {v}" for k, v in rules.items()) or "none"))
        results.append((path, measured, fused))
    return results


def _latency_table(
    results: list[tuple[Path, dict, Path]], index: dict, dims: dict, args: argparse.Namespace
) -> None:
    """Print fused ÷ original (and ÷ onnxruntime's optimizer) latency of each model that fused."""
    print()
    print(f"latency ({args.runs} interleaved runs, dims {dims}): fused ÷ other, ratio of medians"
          " [95 % interval]; < 1 = fused faster")
    print(f"{'model':<28} {'level':<8} {'thr':>3} {'orig ms':>8}  {'fused ÷ original':<34} fused ÷ ort-opt")
    for path, measured, fused in results:
        if measured["fuse"][2] != 0:
            continue
        arch = architecture(path, index)
        opt, why = ort_optimized(path, arch, OUT)
        paths = {"original": path, "fused": fused}
        if opt is not None:
            paths["ortopt"] = opt
        try:
            rows = latency_rows(paths, dims, args.levels, args.threads, args.runs, args.warmup)
        except Exception as exc:  # noqa: BLE001 - a model that does not run at these dims: say so, go on
            print(f"{path.stem:<28} latency failed: {str(exc).splitlines()[0][:120]}")
            continue
        for row in rows:
            print(f"{path.stem:<28} {row['level']:<8} {row['threads']:>3} {row['original_ms']:8.1f}  "
                  f"{_fmt_ratio(row.get('fused/original')):<34} {_fmt_ratio(row.get('fused/ortopt')):<34}")
        if opt is None:
            print(f"{'':<28} (no ort-opt: {why})")
        if opt is not None:
            opt.unlink(missing_ok=True)


def main() -> None:
    """Print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    ap.add_argument("--only", nargs="*", default=None, help="model names (file stems) to run")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--dim", action="append", default=None, help="dims for latency (default sequence=32)")
    ap.add_argument("--levels", nargs="*", default=["disabled", "all"])
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--no-latency", action="store_true")
    args = ap.parse_args()
    from fuseview.dims import parse_dim_args

    dims = parse_dim_args(args.dim or ["sequence=32"])
    files = sorted(args.models.glob("*.onnx"))
    if args.only:
        files = [f for f in files if f.stem in args.only]
    if not files:
        sys.exit(f"no .onnx models in {args.models} (build them with scripts/make_realsize_models.py)")
    index_path = args.models / "INDEX.json"
    index = json.loads(index_path.read_text()).get("models", {}) if index_path.exists() else {}
    OUT.mkdir(parents=True, exist_ok=True)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start "
          "(shared: compare ratios within this run)")
    results = _time_commands(files)
    if args.no_latency:
        return
    _latency_table(results, index, dims, args)


if __name__ == "__main__":
    main()
