"""Export narrow transformers 5.x models (default sdpa attention) to assets/models/current, with INDEX.json.

GPT-2, BERT, Llama (grouped-query, rotary) and a T5 encoder, 2 layers x 64 wide, random seeded weights
(nothing is downloaded), each by TorchScript (opset 17) and dynamo (T5: TorchScript only); GPT-2 and Llama
also with a KV cache. Every file is checked with onnx.checker and run in onnxruntime against torch.
Needs torch and transformers (scripts only).

    python scripts/make_current_exports.py [--out assets/models/current] [--only NAME ...]

Requires: torch, transformers, numpy, onnx, onnxruntime
"""

from __future__ import annotations

import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
from _export_builders import run_cli

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 2_000_000  # committed files stay small

if __name__ == "__main__":
    sys.exit(run_cli(__doc__, "narrow", ROOT / "assets" / "models" / "current",
                     "scripts/make_current_exports.py", LIMIT_BYTES))
