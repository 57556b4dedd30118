"""The runner contract: one measurement request in, timings, output digests and where they ran out.

`measure` is the one way fuseview times models: `profile --against` and every A/B of `tune` go through it
(here, in this process: today's interleaved timer, fuseview.runtime.ab) or through a target that runs the
same function elsewhere (fuseview.targets: a Ray cluster). A request names its models as files, protos or
packed bytes (`pack_model`: the graph with its weights' files listed, so they travel to another machine).
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import socket
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from fuseview.errors import TargetError
from fuseview.progress import StepProgress
from fuseview.runtime.profiling import Cancel, check_cancel
from fuseview.runtime.sessions import ModelSource


@dataclass
class PackedModel:
    """A model that travels: its graph (weights on disk left as references) and the weight files by key."""

    graph: bytes
    files: dict[str, Any]  # key -> the file's bytes (or a target's handle to them, e.g. a Ray ObjectRef)


@dataclass
class MeasureRequest:
    """What to time and how: the models, their inputs (feeds, or dims to generate them), the session
    settings and the run counts; budget_s bounds a run on a target (None: no bound)."""

    models: Sequence[ModelSource | PackedModel]
    feeds: dict[str, np.ndarray] | None = None
    dims: dict[str, int] = field(default_factory=dict)
    provider: str = "auto"
    opt_level: str = "disabled"
    threads: int = 0
    sessions: int = 3
    runs: int = 20
    warmup: int = 3
    seed: int = 0
    base_dir: str | None = None
    budget_s: float | None = None
    digests: bool = False  # also run each model once more and digest its outputs
    rounds_s: float | None = None  # stop the timed rounds after this long (a sequential A/B's deadline)


@dataclass
class MeasureResult:
    """Plain-run times (ms, one sessions x rounds array per model), each model's provider choice, the
    outputs' digests (when asked for) and the environment the times were measured in."""

    times: list[np.ndarray]
    providers: list[dict]
    environment: dict
    digests: list[dict[str, str]] | None = None
    seconds: float = 0.0


def fingerprint() -> dict:
    """Where a measurement runs: host, CPU model, cores, memory, GPU (if any), onnxruntime, providers."""
    from fuseview.runtime.ab import available_memory

    return {**_machine(), "memory_available_bytes": available_memory()}


@functools.lru_cache(maxsize=1)
def _machine() -> dict:
    """The facts of this machine that do not change while it runs (nvidia-smi is asked once)."""
    from fuseview.runtime.report import environment, gpu_name

    env = environment(False)
    total = None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    env.update({"hostname": socket.gethostname(), "cpu_cores": os.cpu_count(), "memory_bytes": total,
                "gpu": gpu_name(), "machine": platform.machine()})
    return env


def pack_model(source: ModelSource,
               base_dir: str | os.PathLike | None = None) -> tuple[bytes, dict[str, Path]]:
    """(graph bytes, key -> weight file): the model with each on-disk weight pointing at a key in place of
    its file, and the files those keys stand for (read by whoever ships them)."""
    if isinstance(source, onnx.ModelProto):
        model = source
    else:
        from fuseview.graph.loader import read_model_anywhere

        model = read_model_anywhere(source)
        base_dir = Path(source).parent
    from fuseview.graph.lazy_weights import external_location, has_disk_weights

    if not has_disk_weights(model):
        return model.SerializeToString(), {}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    keys: dict[Path, str] = {}
    for t in out.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL:
            continue
        src, offset, length = external_location(t, base_dir)
        src = src.resolve()
        key = keys.setdefault(src, f"weights{len(keys)}.bin")
        del t.external_data[:]
        size = "" if length is None else str(length)
        for k, v in (("location", key), ("offset", str(offset)), ("length", size)):
            if v:
                e = t.external_data.add()
                e.key, e.value = k, v
    return out.SerializeToString(), {key: path for path, key in keys.items()}


def bytes_writer(data: bytes) -> Callable[[str], None]:
    """A writer for fuseview.atomic.write_atomic that writes these bytes."""
    def write(tmp: str) -> None:
        Path(tmp).write_bytes(data)
    return write


def unpack_model(packed: PackedModel, folder: str | os.PathLike) -> onnx.ModelProto:
    """The model of a PackedModel whose files are bytes: its weight files written into `folder` (a fresh
    one per model), each weight pointing there."""
    from fuseview.atomic import write_atomic

    folder = Path(folder)
    for key, data in packed.files.items():
        if "/" in key or "\\" in key or key in ("", ".", ".."):
            raise TargetError(f"packed model: bad weight file name {key!r}")
        write_atomic(folder / key, bytes_writer(data))
    model = onnx.ModelProto.FromString(packed.graph)
    from fuseview.graph.lazy_weights import record_folder

    record_folder(model, folder)
    return model


def output_digests(sources: Sequence[ModelSource], feeds: dict[str, np.ndarray], provider: str,
                   opt_level: str, threads: int, base_dir: str | os.PathLike | None) -> list[dict[str, str]]:
    """Per model, output name -> sha256 of one run's output (dtype, shape and bytes)."""
    from fuseview.runtime.sessions import create_session

    out = []
    for src in sources:
        sess, _choice = create_session(src, provider, opt_level, threads=threads, base_dir=base_dir)
        names = [o.name for o in sess.get_outputs()]
        values = sess.run(names, feeds)
        digests = {}
        for name, v in zip(names, values, strict=True):
            a = np.ascontiguousarray(np.asarray(v))
            h = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
            digests[name] = h.hexdigest()
        out.append(digests)
        del sess
    return out


def measure(request: MeasureRequest, progress: StepProgress | None = None,
            cancel: Cancel = None) -> MeasureResult:
    """Run the request in this process: interleaved multi-session timing (fuseview.runtime.ab)."""
    from fuseview.runtime.ab import time_models

    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fuseview-measure-") as tmp:
        sources: list[ModelSource] = []
        for i, m in enumerate(request.models):
            if isinstance(m, PackedModel):
                folder = Path(tmp) / f"m{i}"
                folder.mkdir()
                sources.append(unpack_model(m, folder))
            else:
                sources.append(m)
        feeds = request.feeds
        if feeds is None:
            from fuseview.runtime.inputs import make_feeds
            from fuseview.runtime.profiling import load_model_graph

            feeds = make_feeds(load_model_graph(sources[0]), request.dims, request.seed)
        check_cancel(cancel)
        deadline = None if request.rounds_s is None else time.monotonic() + request.rounds_s
        times, providers = time_models(sources, feeds, request.provider, request.opt_level, request.threads,
                                       request.sessions, request.runs, request.warmup, request.seed, progress,
                                       cancel, base_dir=request.base_dir, deadline=deadline)
        digests = None
        if request.digests:
            digests = output_digests(sources, feeds, request.provider, request.opt_level, request.threads,
                                     request.base_dir)
    return MeasureResult(times, providers, fingerprint(), digests, time.monotonic() - t0)
