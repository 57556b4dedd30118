"""Runs with inputs and outputs bound on the session's device (IO binding), so an A/B times no copies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

CUDA = "CUDAExecutionProvider"


def session_device(sess: Any) -> str:
    """'cuda' when the session's first provider is the CUDA EP, else 'cpu'."""
    return "cuda" if sess.get_providers()[:1] == [CUDA] else "cpu"


def bound_run(sess: Any, feeds: dict[str, np.ndarray], device: str | None = None,
              device_id: int = 0) -> Callable[[], Any]:
    """A no-argument run of `sess` on `feeds`, inputs copied to `device` once and outputs left there.

    The run returns the IO binding (its outputs: `copy_outputs_to_cpu()`), or None for a plain run.

    device: None takes the session's (session_device); on the CPU a plain `run` is what the user calls, so
    that is kept unless device='cpu' is asked for (the binding path, testable without a GPU).
    """
    dev = device or session_device(sess)
    if device is None and dev == "cpu":
        return lambda: sess.run(None, feeds) and None
    import onnxruntime as ort

    binding = sess.io_binding()
    values = {k: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v), dev, device_id)
              for k, v in feeds.items()}
    for name, value in values.items():
        binding.bind_ortvalue_input(name, value)
    for out in sess.get_outputs():
        binding.bind_output(out.name, dev, device_id)

    def run() -> Any:
        sess.run_with_iobinding(binding)
        return binding

    run.__dict__["inputs"] = values  # the device copies must outlive the binding that points at them
    return run
