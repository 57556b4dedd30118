"""The outputs at deployment precision, beside the float32 verdict: how far the fused model is from the
original on the CPU when run as deployed (the CUDA EP computes float32 GEMMs in TF32 by default), and
the original's own distance, its noise floor.

The verdict (`compare.compare_outputs`) stays at float32 with TF32 off and the CPU tolerance; this is shown
beside it, so a valid fusion is never called broken because of TF32, and a fusion that adds error on top of
TF32's is still seen. Provider-generic: on the CPU EP deployment precision is float32 itself.
"""

from __future__ import annotations

import numpy as np

from fuseview.errors import FuseviewError
from fuseview.runtime.compare import tensor_diff
from fuseview.runtime.sessions import CUDA, ModelSource, ProviderChoice, create_session

# the fused model is within the noise floor when its distance is at most this times the original's
# (TF32 rounds each GEMM anew: a fused graph orders the same sums differently), or within atol
NOISE_FACTOR = 2.0
REFERENCE = "cpu"
_KEYS = ("max_abs", "max_rel", "mean_abs", "cosine", "passed")


def _outputs(model: ModelSource, feeds: dict[str, np.ndarray], provider: str, opt_level: str,
             which: str) -> tuple[dict[str, np.ndarray], ProviderChoice]:
    sess, choice = create_session(model, provider, opt_level, tf32=True)  # as deployed: the defaults
    names = [o.name for o in sess.get_outputs()]
    try:
        return dict(zip(names, sess.run(names, feeds), strict=True)), choice
    except Exception as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise FuseviewError(f"onnxruntime failed to run the {which} model: {msg}") from None


def precision_text(provider_used: str) -> str:
    """What 'deployment precision' is on this provider."""
    if provider_used == CUDA:
        return "float32 with TF32 GEMMs (the CUDA EP's default, use_tf32=1)"
    return "float32 (the provider's default)"


def deployment_check(original: ModelSource, fused: ModelSource, feeds: dict[str, np.ndarray],
                     provider: str, opt_level: str = "disabled", atol: float = 1e-4, rtol: float = 1e-3,
                     reference: str = REFERENCE) -> dict:
    """Per output: the fused and the original model at deployment precision on `provider`, each against
    the original on `reference` (float32); within_noise_floor when the fused is no farther than
    NOISE_FACTOR times the original (or atol)."""
    ref, _ = _outputs(original, feeds, reference, opt_level, "original (reference)")
    got_o, choice = _outputs(original, feeds, provider, opt_level, "original")
    got_f, _ = _outputs(fused, feeds, provider, opt_level, "fused")
    outputs, within = {}, True
    for name, want in ref.items():
        d_f = tensor_diff(want, got_f[name], atol, rtol)
        d_o = tensor_diff(want, got_o[name], atol, rtol)
        outputs[name] = {"fused": {k: d_f.get(k) for k in _KEYS}, "original": {k: d_o.get(k) for k in _KEYS}}
        if d_f["max_abs"] is None or d_o["max_abs"] is None:
            within = within and bool(d_f["passed"])
        else:
            within = within and d_f["max_abs"] <= max(NOISE_FACTOR * d_o["max_abs"], atol)
    return {
        "precision": precision_text(choice.provider),
        "provider": choice.to_dict(),
        "reference": f"the original on {reference} (float32)",
        "noise_factor": NOISE_FACTOR,
        "outputs": outputs,
        "within_noise_floor": within,
    }


def deployment_lines(dep: dict) -> list[str]:
    """The deployment check as lines for the CLI and the Profile dock: per output, fused vs noise floor."""
    head = (f"deployment precision, {dep['precision']}, against {dep['reference']}:"
            f" {'within' if dep['within_noise_floor'] else 'BEYOND'} the original's own noise floor"
            f" (x{dep['noise_factor']:g}); information only, the verdict is the float32 check")
    rows = []
    for name, d in dep["outputs"].items():
        f, o = d["fused"]["max_abs"], d["original"]["max_abs"]
        rows.append(f"  {name}: fused max abs {'-' if f is None else f'{f:.3g}'},"
                    f" original (noise floor) {'-' if o is None else f'{o:.3g}'}")
    return [head] + rows
