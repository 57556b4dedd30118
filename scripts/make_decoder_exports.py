"""Export narrow decoders the rules were not written against to assets/models/decoders, with INDEX.json.

Qwen2 (q/k/v biases), Mistral, Phi-3 (one packed qkv_proj sliced), GPT-NeoX (packed query_key_value split
per head, partial rotary), OPT (learned positions) and Gemma: 2 layers x 32, random seeded weights
(nothing is downloaded), transformers 5.x's default sdpa attention, each by TorchScript (opset 17) and
dynamo, with and without a KV cache. Every file is checked with onnx.checker and run in onnxruntime
against torch. Needs torch and transformers (scripts only).

    python scripts/make_decoder_exports.py [--out assets/models/decoders] [--only NAME ...]

Requires: torch, transformers, numpy, onnx, onnxruntime
"""

from __future__ import annotations

import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
from _export_builders import DECODER_FAMILIES, run_cli

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 500_000  # committed files stay small

if __name__ == "__main__":
    sys.exit(run_cli(__doc__, "narrow", ROOT / "assets" / "models" / "decoders",
                     "scripts/make_decoder_exports.py", LIMIT_BYTES, DECODER_FAMILIES))
