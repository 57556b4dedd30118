"""Interleaved multi-session timing of several models on the same feeds: the one A/B timer.

`fuseview profile --against` and `fuseview tune` both time models with it, so every speed-up fuseview
states comes from the same kind of measurement (fuseview.stats then turns the arrays into an interval).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fuseview.runtime.profiling import Cancel, Progress, check_cancel, interleaved_latency, run_error
from fuseview.runtime.sessions import ModelSource, create_session


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
) -> tuple[list[np.ndarray], list[dict]]:
    """Plain-run times (ms) of each model: one (sessions x rounds) array per model, and its provider choice.

    Each model gets `sessions` onnxruntime sessions and about `runs` runs in all; every round runs every
    session once in a shuffled order (interleaved_latency), so background load hits all models alike.
    """
    rounds = -(-runs // sessions)
    # Created in turns (A B, B A, A B, ...): a session's speed drifts with when it was made (measured
    # here: later ones up to 3 % faster), so no model may have all the early ones.
    slots: list[list] = [[] for _ in sources]
    choices: list[dict] = [{} for _ in sources]
    for j in range(sessions):
        for i in range(len(sources)) if j % 2 == 0 else reversed(range(len(sources))):
            check_cancel(cancel)
            sess, choice = create_session(sources[i], provider, opt_level, threads=threads)
            slots[i].append(sess)
            choices[i] = choice.to_dict()
    flat = [sess for slot in slots for sess in slot]
    del slots
    try:
        by_session = interleaved_latency(flat, feeds, rounds, warmup, progress, cancel, seed)
    except Exception as exc:  # onnxruntime run-time failure on these inputs
        raise run_error(exc) from None
    del flat
    grouped = [np.array(by_session[i * sessions:(i + 1) * sessions]) for i in range(len(sources))]
    return grouped, choices
