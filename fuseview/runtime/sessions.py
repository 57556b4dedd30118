"""onnxruntime sessions: provider choice (auto/cpu/cuda), optimization level, and what onnxruntime fuses."""

from __future__ import annotations

import ctypes
import functools
import gc
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx
import onnxruntime as ort

from fuseview.defaults import OPT_LEVEL_NAMES, PROVIDER_CHOICES
from fuseview.errors import FuseviewError
from fuseview.graph.document import op_histogram
from fuseview.graph.lazy_weights import has_disk_weights, stage_for_runtime

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"
OPT_LEVELS = {
    "disabled": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
assert tuple(OPT_LEVELS) == OPT_LEVEL_NAMES
CUDA_HINT = "install the CUDA build with: pip uninstall onnxruntime && pip install onnxruntime-gpu"
# Above this size a model goes to onnxruntime as a file (protobuf cannot serialize >2 GiB).
_BYTES_LIMIT = 1_800_000_000

ModelSource = str | os.PathLike | onnx.ModelProto
# onnxruntime's memory pattern lays out a run's intermediate tensors in one block, planned at a session's
# first run in time quadratic in the tensors alive at once (a Sum of 20,000 Relu outputs: 4.9 CPU s plain,
# the profiled first run minutes; a 20,000-node chain: nothing). Above this many, fuseview's sessions run
# without it (each tensor from the arena): linear, and said in the profile (profile_session.mem_pattern).
WIDE_LIVE = 4096


@dataclass
class ProviderChoice:
    """The provider a session uses, what was asked for, and why (e.g. why auto fell back to CPU)."""

    requested: str
    provider: str
    reason: str

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {"requested": self.requested, "provider": self.provider, "reason": self.reason}


# Below this much freed, giving memory back is not worth its cost (a garbage collection in a big process
# takes tens of ms: it was 40 % of the test suite's fusion tests, with nothing to give back).
RELEASE_ABOVE = 64 << 20
_LIBC: list = []  # [glibc, or None where there is none]: looked up once


def release_freed_memory(freed_bytes: int) -> None:
    """Give memory freed by closed sessions (about freed_bytes) back to the system: glibc's malloc_trim,
    elsewhere nothing; nothing either below RELEASE_ABOVE.

    glibc keeps freed heap pages for reuse: after an A/B of the 622 MB GPT-2 (6 sessions) closed its
    sessions the process still held 2.9 GB, and the next A/B's sessions came on top of that. Objects in
    reference cycles are collected first (onnxruntime's transformers optimizer leaves its model in one)."""
    if freed_bytes < RELEASE_ABOVE:
        return
    gc.collect()
    if not _LIBC:
        libc = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL("libc.so.6")
                libc.malloc_trim.argtypes = [ctypes.c_size_t]  # musl and others have none: AttributeError
            except (OSError, AttributeError):
                libc = None
        _LIBC.append(libc)
    if _LIBC[0] is not None:
        _LIBC[0].malloc_trim(0)


def available_providers() -> list[str]:
    """Execution providers this onnxruntime build offers."""
    return list(ort.get_available_providers())


def _opt_level(name: str) -> ort.GraphOptimizationLevel:
    if name not in OPT_LEVELS:
        raise FuseviewError(
            f"unknown onnxruntime optimization level {name!r}; use one of {', '.join(OPT_LEVELS)}"
        )
    return OPT_LEVELS[name]


def session_options(
    opt_level: str = "disabled",
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    threads: int = 0,
    cpu_mem_arena: bool = True,
    prepack: bool = True,
    mem_pattern: bool = True,
) -> ort.SessionOptions:
    """SessionOptions with the given optimization level, optional profiling and optimized-graph output.

    prepack=False keeps kernels from making packed copies of their weights: slower runs, less memory."""
    so = ort.SessionOptions()
    so.enable_cpu_mem_arena = cpu_mem_arena
    so.enable_mem_pattern = mem_pattern
    if not prepack:
        so.add_session_config_entry("session.disable_prepacking", "1")
    so.graph_optimization_level = _opt_level(opt_level)
    so.log_severity_level = 4  # errors come back as exceptions; the CLI prints them in one line
    if threads:
        so.intra_op_num_threads = threads
    if profile_prefix:
        so.enable_profiling = True
        so.profile_file_prefix = profile_prefix
    if optimized_model_path:
        so.optimized_model_filepath = optimized_model_path
    return so


def _model_arg(model: ModelSource) -> str | bytes:
    if isinstance(model, onnx.ModelProto):
        if model.ByteSize() > _BYTES_LIMIT:
            raise FuseviewError("model over 1.8 GB in memory: pass it to onnxruntime as a file path instead")
        return model.SerializeToString()
    return str(model)


def _create(
    model: ModelSource,
    so: ort.SessionOptions,
    providers: list[Any],
    base_dir: str | os.PathLike | None = None,
) -> ort.InferenceSession:
    try:
        if isinstance(model, onnx.ModelProto) and has_disk_weights(model):
            # weights left on disk (lazy_weights) reach onnxruntime through links, never through memory
            with tempfile.TemporaryDirectory(prefix="fuseview-session-") as tmp:
                staged = stage_for_runtime(model, tmp, base_dir)
                return ort.InferenceSession(str(staged), so, providers=providers)
        return ort.InferenceSession(_model_arg(model), so, providers=providers)
    except FuseviewError:
        raise
    except Exception as exc:  # onnxruntime raises several unrelated types for a model it cannot run
        from fuseview.runtime.ir_check import from_ort_error

        where = str(model) if isinstance(model, (str, os.PathLike)) else "the model"
        too_new = from_ort_error(where, str(exc))
        if too_new is not None:
            raise too_new from None
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FuseviewError(f"onnxruntime cannot create a session for this model: {msg}") from None


def peak_live(graph: onnx.GraphProto) -> int:
    """The most tensors made by the graph's nodes and read by a later node that are alive at once (nodes
    run in file order, which the checker keeps topological)."""
    readers: dict[str, int] = {}
    for n in graph.node:
        for t in set(n.input):
            if t:
                readers[t] = readers.get(t, 0) + 1
    alive: set[str] = set()
    peak = 0
    for n in graph.node:
        alive.update(t for t in n.output if t and readers.get(t))
        peak = max(peak, len(alive))
        for t in set(n.input):
            if t in alive:
                readers[t] -= 1
                if not readers[t]:
                    alive.discard(t)
    return peak


@functools.lru_cache(maxsize=16)
def _file_mem_pattern(path: str, _size: int, _mtime_ns: int) -> bool:
    from fuseview.graph.loader import read_model

    return peak_live(read_model(path).graph) <= WIDE_LIVE


def mem_pattern_for(model: ModelSource) -> bool:
    """Whether a session of the model may use onnxruntime's memory pattern (WIDE_LIVE)."""
    if isinstance(model, onnx.ModelProto):
        return peak_live(model.graph) <= WIDE_LIVE
    try:
        st = os.stat(model)
        return _file_mem_pattern(os.fspath(model), st.st_size, st.st_mtime_ns)
    except Exception:  # noqa: BLE001 - any unreadable file: onnxruntime says what is wrong with it
        return True


def cuda_providers(tf32: bool = True) -> list[Any]:
    """The providers list for a CUDA session: the CUDA EP (TF32 off unless asked for), the CPU EP."""
    return [CUDA if tf32 else (CUDA, {"use_tf32": "0"}), CPU]


def create_session(
    model: ModelSource,
    provider: str = "auto",
    opt_level: str = "disabled",
    profile_prefix: str | None = None,
    optimized_model_path: str | None = None,
    threads: int = 0,
    cpu_mem_arena: bool = True,
    base_dir: str | os.PathLike | None = None,
    prepack: bool = True,
    tf32: bool = True,
    mem_pattern: bool | None = None,
) -> tuple[ort.InferenceSession, ProviderChoice]:
    """A session on the requested provider; auto takes CUDA when the build and a GPU give it, else CPU.

    base_dir: the folder external data of an in-memory model is relative to (a model read by fuseview's
    loader records it in each weight it left on disk). tf32=False turns the CUDA EP's TF32 GEMMs off (the
    correctness check: float32 results at the CPU tolerance). mem_pattern: None decides by the model
    (mem_pattern_for); an A/B passes one value for all its models."""
    if provider not in PROVIDER_CHOICES:
        raise FuseviewError(f"unknown provider {provider!r}; use one of {', '.join(PROVIDER_CHOICES)}")
    if mem_pattern is None:
        mem_pattern = mem_pattern_for(model)
    so = session_options(opt_level, profile_prefix, optimized_model_path, threads, cpu_mem_arena, prepack,
                         mem_pattern)
    avail = available_providers()
    if provider == "cpu":
        return _create(model, so, [CPU], base_dir), ProviderChoice("cpu", CPU, "asked for cpu")
    if CUDA not in avail:
        reason = "onnxruntime build has no CUDAExecutionProvider"
        if provider == "cuda":
            raise FuseviewError(
                f"--provider cuda: this {reason} (onnxruntime {ort.__version__}); {CUDA_HINT}"
            )
        return _create(model, so, [CPU], base_dir), ProviderChoice("auto", CPU, reason)
    sess = _create(model, so, cuda_providers(tf32), base_dir)
    if CUDA in sess.get_providers():
        return sess, ProviderChoice(provider, CUDA, "CUDAExecutionProvider available and active")
    # The build has CUDA but the session fell back: no GPU, or a driver/CUDA/cuDNN library is missing.
    reason = (
        "CUDAExecutionProvider is in the build but the session could not use it (no GPU or CUDA libraries)"
    )
    if provider == "cuda":
        raise FuseviewError(
            f"--provider cuda: {reason}; check nvidia-smi and the CUDA/cuDNN versions it needs"
        )
    if profile_prefix or optimized_model_path:
        so = session_options(opt_level, profile_prefix, optimized_model_path, threads, cpu_mem_arena, prepack,
                             mem_pattern)
        sess = _create(model, so, [CPU], base_dir)
    return sess, ProviderChoice("auto", CPU, reason)


def ort_fusions(model: ModelSource, provider: str = "auto", opt_level: str = "extended") -> dict:
    """What onnxruntime's own optimizer does to the model at a level: op types added and removed (counts)."""
    src = model if isinstance(model, onnx.ModelProto) else onnx.load(str(model), load_external_data=False)
    with tempfile.TemporaryDirectory(prefix="fuseview-ortopt-") as tmp:
        out = str(Path(tmp) / "optimized.onnx")
        sess, choice = create_session(model, provider, opt_level, optimized_model_path=out)
        del sess
        # Big initializers of the optimized graph may go to a side file; only the graph is read here.
        optimized = onnx.load(out, load_external_data=False)
    before, after = op_histogram(src.graph.node, "."), op_histogram(optimized.graph.node, ".")
    # onnxruntime turns every Constant node into an initializer at any level: not a fusion.
    constants = before.pop("Constant", 0) - after.pop("Constant", 0)
    added = {k: after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) > before.get(k, 0)}
    removed = {k: before[k] - after.get(k, 0) for k in before if before[k] > after.get(k, 0)}
    return {
        "provider": choice.to_dict(),
        "opt_level": opt_level,
        "nodes_before": len(src.graph.node),
        "constants_to_initializers": constants,
        "nodes_after": len(optimized.graph.node),
        "added": dict(sorted(added.items(), key=lambda kv: -kv[1])),
        "removed": dict(sorted(removed.items(), key=lambda kv: -kv[1])),
        "ops_after": after,
    }
