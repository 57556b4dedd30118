"""The machine's roofline: peak FLOP/s and memory bandwidth, measured once in onnxruntime and cached.

Peak FLOP/s is the fastest of a few runs of a large float32 MatMul (weights as an initializer, as a model's
are); bandwidth is the fastest run of a large float32 Add (two inputs read, one output written, each far
larger than any cache). Both run in one onnxruntime session each, with the threads the profile uses, for a
bounded time. The result is cached in the user's cache folder, keyed by host, CPU, provider, threads and
onnxruntime version, so a profile measures it once per machine.
"""

from __future__ import annotations

import datetime
import os
import platform
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from fuseview.atomic import write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.runtime.ir_version import clamp_ir
from fuseview.runtime.report import cpu_name
from fuseview.runtime.sessions import CUDA, create_session

MATMUL_N = 1024  # [N, N] x [N, N]: 2.1 GFLOP a run, 12 MiB of operands
STREAM_ELEMENTS = 1 << 24  # 64 MiB per tensor: well past any CPU's last-level cache
# on a GPU: 137 GFLOP a run (milliseconds, not the launch), and 256 MiB per tensor, past any GPU's L2
MATMUL_N_GPU = 4096
STREAM_ELEMENTS_GPU = 1 << 26
BUDGET_S = 1.5  # both timed loops together; with the sessions' set-up the whole stays under about 2 s
CACHE_FILE = "roofline.json"
CACHE_VERSION = 1


def cache_path() -> Path:
    """Where measured rooflines are kept: $XDG_CACHE_HOME/fuseview (else ~/.cache/fuseview)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fuseview" / CACHE_FILE


def on_gpu(provider: str) -> bool:
    """Whether `provider` resolves to the CUDA EP here (auto takes it when the build has it)."""
    return provider == "cuda" or (provider == "auto" and CUDA in ort.get_available_providers())


def gpu_identity() -> str | None:
    """'NAME driver VERSION' of the first GPU (nvidia-smi), or None without one."""
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    first = out.strip().splitlines()[:1]
    return " driver ".join(x.strip() for x in first[0].split(",", 1)) if first else None


def machine_key(provider: str, threads: int, gpu: str | None = None) -> str:
    """The cache key: host, CPU, onnxruntime version, provider, intra-op threads; on a GPU its name and
    driver, and that the tensors were bound on the device (a roofline of host copies is another key)."""
    key = f"{platform.node()}|{cpu_name() or '?'}|onnxruntime {ort.__version__}|{provider}|threads {threads}"
    return key if gpu is None else f"{key}|gpu {gpu}|bound on the device"


def _matmul_model(n: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "peak_flops",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=clamp_ir())


def _add_model(n: int) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"])], "peak_bandwidth",
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, [n]) for x in ("a", "b")],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=clamp_ir())


def _fastest_s(model: onnx.ModelProto, feeds: dict, provider: str, threads: int, budget_s: float,
               bind: bool = False) -> tuple[float, int, str]:
    """The fastest run (s) of a model within budget_s after one warm-up run, the runs made, the provider.

    On the CUDA EP (or with bind) inputs and outputs stay bound on the session's device: the runs time
    the kernels, not host copies."""
    from fuseview.runtime.binding import bound_run, session_device

    sess, choice = create_session(model, provider, "all", threads=threads)
    run = bound_run(sess, feeds, session_device(sess) if bind else None)
    run()
    best, runs = float("inf"), 0
    end = time.perf_counter() + budget_s
    while runs < 3 or (time.perf_counter() < end and runs < 200):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
        runs += 1
    return best, runs, choice.provider


def measure_machine(provider: str = "auto", threads: int = 0, budget_s: float = BUDGET_S,
                    bind: bool = False) -> dict:
    """Measure peak GFLOP/s (MatMul) and GB/s (Add) in onnxruntime now; the dict says how it was measured.

    On a GPU the tensors are bigger and bound on the device (IO binding), so the roofs are the device's;
    bind=True takes that path on the CPU too (the CPU device)."""
    gpu = on_gpu(provider)
    bind = bind or gpu
    rng = np.random.default_rng(1)
    n, m = (MATMUL_N_GPU, STREAM_ELEMENTS_GPU) if gpu else (MATMUL_N, STREAM_ELEMENTS)
    mm_s, mm_runs, used = _fastest_s(_matmul_model(n), {"x": rng.standard_normal((n, n)).astype(np.float32)},
                                     provider, threads, budget_s / 2, bind)
    feeds = {k: np.full(m, v, np.float32) for k, v in (("a", 1.5), ("b", 0.25))}  # bandwidth: values moot
    add_s, add_runs, _ = _fastest_s(_add_model(m), feeds, provider, threads, budget_s / 2, bind)
    del feeds
    flops, moved = 2 * n**3, 3 * m * 4
    peak_gflops, peak_gbps = flops / mm_s / 1e9, moved / add_s / 1e9
    where = "; inputs and outputs bound on the device (IO binding)" if bind else ""
    if used == CUDA:
        where += "; GEMMs as deployed (TF32 on, the CUDA EP's default)"
    return {
        "peak_gflops": peak_gflops,
        "peak_gbps": peak_gbps,
        "ridge_flops_per_byte": peak_gflops / peak_gbps,
        "method": (f"fastest of {mm_runs} runs of a float32 MatMul [{n},{n}]x[{n},{n}]"
                   f" ({flops / 1e9:.2f} GFLOP)"
                   f" and of {add_runs} runs of a float32 Add of two [{m}] tensors ({moved / 2**20:.0f} MiB"
                   f" read and written), onnxruntime optimization all{where}"),
        "provider": used,
        "threads": threads,
        "onnxruntime": ort.__version__,
        "cpu": cpu_name(),
        "host": platform.node(),
        "measured": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cached": False,
        **({"gpu": gpu_identity() or "?"} if used == CUDA else {}),
    }


def _read_cache(path: Path) -> dict:
    from fuseview.safe_io import load_json

    try:
        data = load_json(path, "json", "roofline cache")
    except FuseviewError:
        return {}
    if isinstance(data, dict) and data.get("version") == CACHE_VERSION and isinstance(
            data.get("machines"), dict):
        return data
    return {}


# What a cached entry must hold, as measure_machine writes it; an entry that lacks one (an older or edited
# cache) is measured again, never handed on to fail the profile's report check at its end.
_ENTRY_TYPES: dict[str, type | tuple[type, ...]] = {
    "peak_gflops": (int, float), "peak_gbps": (int, float), "ridge_flops_per_byte": (int, float),
    "method": str, "provider": str, "threads": int, "onnxruntime": str, "cpu": str, "host": str,
    "measured": str}


def _valid(entry: object) -> bool:
    if not isinstance(entry, dict):
        return False
    for key, kind in _ENTRY_TYPES.items():
        value = entry.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            return False
    # the profile report's check takes 1 MB/s .. 10 PB/s (and MFLOP/s); NaN fails both comparisons
    roofs_ok = all(1e-3 <= entry[k] <= 1e7 for k in ("peak_gflops", "peak_gbps"))
    return roofs_ok and entry["ridge_flops_per_byte"] > 0


def machine_roofline(provider: str = "auto", threads: int = 0, refresh: bool = False) -> dict:
    """This machine's roofline for the provider and threads: from the cache, else measured and cached.

    A cache that cannot be read or written only costs a measurement (the profile goes on without it).
    """
    key = machine_key(provider, threads, (gpu_identity() or "?") if on_gpu(provider) else None)
    path = cache_path()
    data = _read_cache(path) if path.is_file() else {}
    entry = data.get("machines", {}).get(key)
    if not refresh and _valid(entry):
        return {**entry, "cached": True}
    entry = measure_machine(provider, threads)
    machines = dict(data.get("machines", {}))
    machines[key] = entry
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import json

        write_text_atomic(path, json.dumps({"version": CACHE_VERSION, "machines": machines}, indent=1))
    except (OSError, FuseviewError):
        pass
    return entry
