"""Interleaved multi-session timing of several models on the same feeds: the one A/B timer.

`fuseview profile --against` and `fuseview tune` both time models with it, so every speed-up fuseview
states comes from the same kind of measurement (fuseview.stats then turns the arrays into an interval).
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from fuseview.progress import StepProgress
from fuseview.runtime.profiling import Cancel, check_cancel, interleaved_latency, run_error
from fuseview.runtime.sessions import ModelSource, create_session, mem_pattern_for, release_freed_memory
from fuseview.stats import CANNOT_TELL, DEFAULT_THRESHOLD, SpeedupEstimate, compare_timings
from fuseview.units import format_bytes

# Every session of an A/B is alive at once (they run interleaved) and each holds its own copy of the
# weights (packed by the MatMul kernels: onnxruntime's Python API cannot share packed weights between
# sessions). Measured: 6 sessions of the 380 MB Llama export, 1.9 GB; tune's final check of the 622 MB
# GPT-2 (4 models x 3 sessions), 10 GB. Above this share of the memory available, fewer sessions per
# model are made (at least one), and the caller is told.
Timed = tuple[list[np.ndarray], list[dict]]  # one (sessions x rounds) array per model, providers
TimeModels = Callable[..., Timed]  # time_models's signature: this process's, or a target's (tune's timer)
MEMORY_SHARE = 0.25
# Each look at a sequential A/B's interval is one more chance for an A/A to exclude 1 by luck. The error
# is spent over the looks (look k at 1 - (1 - level) * 6 / (pi^2 k^2), which sums to 1 - level for any
# number of looks, Bonferroni): 96.96 % at the first, 99.24 % at the second, 99.97 % at the tenth. A fixed
# 99 % a look let a 22-look A/A on a loaded machine call a byte-identical copy "faster".
SEQUENTIAL_LEVEL = 0.95


def look_level(level: float, look: int) -> float:
    """The interval's level at the `look`-th look (1-based) of a sequential A/B of overall `level`."""
    return 1.0 - (1.0 - level) * 6.0 / (math.pi**2 * look**2)


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
                 f" of {format_bytes(per_round / models)} each would take over {MEMORY_SHARE:.0%} of the"
                 f" {format_bytes(avail)} available")


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
    progress: StepProgress | None = None,
    cancel: Cancel = None,
    base_dir: str | os.PathLike | None = None,
    deadline: float | None = None,
) -> tuple[list[np.ndarray], list[dict]]:
    """Plain-run times (ms) of each model: one (sessions x rounds) array per model, and its provider choice.

    Each model gets `sessions` onnxruntime sessions (fewer when they would not fit in memory:
    sessions_that_fit) and about `runs` runs in all; every round runs every session once in a shuffled
    order (interleaved_latency), so background load hits all models alike. `deadline` (time.monotonic()):
    no round starts after it (two rounds at least), so `runs` bounds a measurement and so does the time.
    """
    per_round = sum(_weight_bytes(s, base_dir) for s in sources)
    sessions, _why = _fit(per_round, len(sources), sessions)
    rounds = -(-runs // sessions)
    # Created in turns (A B, B A, A B, ...): a session's speed drifts with when it was made (measured
    # here: later ones up to 3 % faster), so no model may have all the early ones. With an odd number of
    # sessions one model would still go first more often in every batch; the seed's parity picks which,
    # so a sequential A/B's batches (seed + batch) alternate it.
    slots: list[list] = [[] for _ in sources]
    choices: list[dict] = [{} for _ in sources]
    same = all(mem_pattern_for(s) for s in sources)  # one setting for every model of the A/B
    for j in range(sessions):
        for i in range(len(sources)) if (j + seed) % 2 == 0 else reversed(range(len(sources))):
            check_cancel(cancel)
            sess, choice = create_session(sources[i], provider, opt_level, threads=threads, base_dir=base_dir,
                                          mem_pattern=same)
            slots[i].append(sess)
            choices[i] = choice.to_dict()
    flat = [sess for slot in slots for sess in slot]
    del slots
    try:
        if deadline is None:
            by_session = interleaved_latency(flat, feeds, rounds, warmup, progress, cancel, seed)
        else:
            by_session = _rounds_until(flat, feeds, rounds, warmup, progress, cancel, seed, deadline)
    except Exception as exc:  # onnxruntime run-time failure on these inputs
        raise run_error(exc) from None
    del flat, sess
    release_freed_memory(per_round * sessions)  # the next A/B starts from what the process really holds
    grouped = [np.array(by_session[i * sessions:(i + 1) * sessions]) for i in range(len(sources))]
    return grouped, choices


def _rounds_until(flat: list, feeds: dict[str, np.ndarray], rounds: int, warmup: int,
                  progress: StepProgress | None, cancel: Cancel, seed: int, deadline: float
                  ) -> list[list[float]]:
    """interleaved_latency one round at a time, no round started past the deadline (2 rounds at least)."""
    times = interleaved_latency(flat, feeds, 1, warmup, None, cancel, seed)
    for i in range(1, rounds):
        if i >= 2 and time.monotonic() >= deadline:
            break
        one = interleaved_latency(flat, feeds, 1, 0, None, cancel, seed + i)
        for t, more in zip(times, one, strict=True):
            t.extend(more)
        if progress:
            progress("latency", i + 1, rounds)
    return times


@dataclass
class Sequential:
    """What measure_until_decided measured: every pair's estimate, the timings, and why it stopped."""

    estimates: dict[tuple[int, int], SpeedupEstimate]
    grouped: list[np.ndarray]  # (sessions x rounds) per model, every batch stacked
    choices: list[dict]
    batches: int
    budget_spent: bool  # stopped with a pair undecided (budget or batch limit), not by decided intervals
    seconds: float

    @property
    def runs(self) -> int:
        """Timed runs per model in all."""
        return int(self.grouped[0].size)


def measure_until_decided(
    sources: Sequence[ModelSource], feeds: dict[str, np.ndarray], pairs: Sequence[tuple[int, int]], *,
    budget_s: float, provider: str = "auto", opt_level: str = "disabled", threads: int = 0,
    sessions: int = 3, runs: int = 30, warmup: int = 3, threshold: float = DEFAULT_THRESHOLD,
    max_batches: int | None = None, min_batches: int = 1, seed: int = 0, cancel: Cancel = None,
    base_dir: str | os.PathLike | None = None, on_batch=None, level: float = SEQUENTIAL_LEVEL,
    timer: TimeModels | None = None,
) -> Sequential:
    """Sequential A/B: batches of fresh interleaved sessions (`runs` runs a model each) until every pair's
    interval decides (stats.verdict is not "cannot tell") or the budget (or max_batches) ends.

    Sessions of one model differ by a few % (stats.compare_timings), so each batch brings new ones: the
    interval narrows with the number of sessions, not only of runs. No batch starts when the last one's
    time would not fit in what is left, and every batch stops its rounds at the deadline. Undecided pairs
    are marked budget_spent, with stats' estimate of how many more runs would likely decide them (timer:
    a target's time_models, e.g. a Ray node's; this process's by default). The
    interval is looked at after every batch, at look_level: stopping at the first decided look keeps a
    false "faster" no more likely than one look at `level` (SEQUENTIAL_LEVEL, 95 %), however many looks.
    """
    start = time.monotonic()
    deadline = start + budget_s
    rows: list[list[np.ndarray]] = [[] for _ in sources]
    est: dict[tuple[int, int], SpeedupEstimate] = {}
    choices: list[dict] = []
    batch = 0
    while True:
        t0 = time.monotonic()
        timed = timer or time_models
        grouped, choices = timed(sources, feeds, provider, opt_level, threads, sessions, runs, warmup,
                                 seed + batch, None, cancel, base_dir, deadline=deadline)
        batch += 1
        for r, g in zip(rows, grouped, strict=True):
            r.append(g)
        stacked = [_stack(r) for r in rows]
        est = {(a, b): compare_timings(stacked[a], stacked[b], paired=True, level=look_level(level, batch),
                                       threshold=threshold, seed=seed) for a, b in pairs}
        if on_batch:
            on_batch(batch, est)
        done = all(e.verdict != CANNOT_TELL for e in est.values())
        took = time.monotonic() - t0
        if done and batch >= min_batches:
            break
        if (max_batches is not None and batch >= max_batches) or time.monotonic() + took > deadline:
            if batch >= min_batches:
                break
    spent = not all(e.verdict != CANNOT_TELL for e in est.values())
    if spent:
        est = {k: replace(e, budget_spent=True) if e.verdict == CANNOT_TELL else e for k, e in est.items()}
    return Sequential(est, [_stack(r) for r in rows], choices, batch, spent, time.monotonic() - start)


def _stack(batches: list[np.ndarray]) -> np.ndarray:
    """One model's (sessions x rounds) batches as one array: a batch the deadline cut to under half the
    first one's rounds is left out (unless it is the only one), the rest cut to the same rounds."""
    first = batches[0].shape[1]
    kept = [b for b in batches if b.shape[1] * 2 >= first] or batches[:1]
    width = min(b.shape[1] for b in kept)
    return np.vstack([b[:, :width] for b in kept])
