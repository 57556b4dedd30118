"""onnx.reference kernels for fuseview's reference-only fused ops (domain provenance.CUSTOM_DOMAIN)."""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun

from fuseview.provenance import CUSTOM_DOMAIN


class AddEyeLike(OpRun):
    """A + alpha * EyeLike(L, k): adds a scaled (shifted) identity to a matrix in one step."""

    op_domain = CUSTOM_DOMAIN

    def _run(self, a, like, k=0, alpha=1.0):
        out = np.array(a, copy=True)
        n, m = like.shape
        idx = np.arange(max(0, min(n, m - k) if k >= 0 else min(n + k, m)))
        rows, cols = (idx, idx + k) if k >= 0 else (idx - k, idx)
        out[rows, cols] += out.dtype.type(alpha)
        return (out,)


# Every kernel fuseview ships, for ReferenceEvaluator(new_ops=REFERENCE_OPS).
REFERENCE_OPS: list[type[OpRun]] = [AddEyeLike]
