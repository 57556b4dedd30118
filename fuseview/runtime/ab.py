"""Interleaved multi-session timing of several models on the same feeds: the one A/B timer.

`fuseview profile --against` and `fuseview tune` both time models with it, so every speed-up fuseview
states comes from the same kind of measurement (fuseview.stats then turns the arrays into an interval).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from fuseview.runtime.profiling import Cancel, Progress, check_cancel, interleaved_latency, run_error
from fuseview.runtime.sessions import ModelSource, create_session, release_freed_memory

# Every session of an A/B is alive at once (they run interleaved) and each holds its own copy of the
# weights (packed by the MatMul kernels: onnxruntime's Python API cannot share packed weights between
# sessions). Measured: 6 sessions of the 380 MB Llama export, 1.9 GB; tune's final check of the 622 MB
# GPT-2 (4 models x 3 sessions), 10 GB. Above this share of the memory available, fewer sessions per
# model are made (at least one), and the caller is told.
MEMORY_SHARE = 0.25


def _weight_bytes(source: ModelSource, base_dir: str | os.PathLike | None) -> int:
    """About what one session of the model holds: the bytes of its weights (of the file for a path)."""
    import onnx

    from fuseview.graph.lazy_weights import weight_bytes

    if isinstance(source, onnx.ModelProto):
        return weight_bytes(source, base_dir)
    try:
        return os.path.getsize(source)
    except OSError:
        return 0


def available_memory() -> int | None:
    """Bytes of memory available to new allocations now (Linux's MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def sessions_that_fit(sources: Sequence[ModelSource], wanted: int,
                      base_dir: str | os.PathLike | None = None) -> tuple[int, str | None]:
    """(sessions per model, why fewer than wanted or None): as many as fit in MEMORY_SHARE of the
    available memory with every session of every model alive at once."""
    return _fit(sum(_weight_bytes(s, base_dir) for s in sources), len(sources), wanted)


def _fit(per_round: int, models: int, wanted: int) -> tuple[int, str | None]:
    avail = available_memory()
    if avail is None or per_round <= 0 or wanted <= 1:
        return wanted, None
    fit = max(1, min(wanted, int(MEMORY_SHARE * avail // per_round)))
    if fit == wanted:
        return wanted, None
    return fit, (f"{fit} session(s) per model instead of {wanted}: {models} models x {wanted} sessions"
                 f" of {per_round / models / 1e6:.0f} MB each would take over {MEMORY_SHARE:.0%} of the"
                 f" {avail / 1e9:.1f} GB available")


def time_models(
    sources: Sequence[ModelSource],
    feeds: dict[str, np.ndarray],
    provider: str = "auto",
    opt_level: str = "disabled",
    threads: int = 0,
    sessions: int = 3,
    runs: int = 20,
    warmup: int = 3,
    seed: int = 0,
    progress: Progress | None = None,
    cancel: Cancel = None,
    base_dir: str | os.PathLike | None = None,
) -> tuple[list[np.ndarray], list[dict]]:
    """Plain-run times (ms) of each model: one (sessions x rounds) array per model, and its provider choice.

    Each model gets `sessions` onnxruntime sessions (fewer when they would not fit in memory:
    sessions_that_fit) and about `runs` runs in all; every round runs every session once in a shuffled
    order (interleaved_latency), so background load hits all models alike.
    """
    per_round = sum(_weight_bytes(s, base_dir) for s in sources)
    sessions, _why = _fit(per_round, len(sources), sessions)
    rounds = -(-runs // sessions)
    # Created in turns (A B, B A, A B, ...): a session's speed drifts with when it was made (measured
    # here: later ones up to 3 % faster), so no model may have all the early ones.
    slots: list[list] = [[] for _ in sources]
    choices: list[dict] = [{} for _ in sources]
    for j in range(sessions):
        for i in range(len(sources)) if j % 2 == 0 else reversed(range(len(sources))):
            check_cancel(cancel)
            sess, choice = create_session(sources[i], provider, opt_level, threads=threads, base_dir=base_dir)
            slots[i].append(sess)
            choices[i] = choice.to_dict()
    flat = [sess for slot in slots for sess in slot]
    del slots
    try:
        by_session = interleaved_latency(flat, feeds, rounds, warmup, progress, cancel, seed)
    except Exception as exc:  # onnxruntime run-time failure on these inputs
        raise run_error(exc) from None
    del flat, sess
    release_freed_memory(per_round * sessions)  # the next A/B starts from what the process really holds
    grouped = [np.array(by_session[i * sessions:(i + 1) * sessions]) for i in range(len(sources))]
    return grouped, choices
