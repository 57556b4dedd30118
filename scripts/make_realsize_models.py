"""Export real-width transformers 5.x models (default sdpa attention, random weights) for the benches.

The same builders as make_current_exports.py at the widths people ship: GPT-2 small (GPT2Config()), BERT-base
(BertConfig()), a Llama with 768 hidden, 8 layers, 12:4 grouped-query heads, rotary, intermediate 2048, and
T5-small's encoder (T5Config()); TorchScript (opset 17) and dynamo, GPT-2 and Llama also with a KV cache.
Weights are inside each .onnx (one file, 0.1-0.7 GB); the output folder is not committed. Nothing is
downloaded. One model at a time, so peak memory is one model's (about 3-5 GB).

    python scripts/make_realsize_models.py [--out build/realsize] [--only NAME ...]

Requires: torch, transformers, numpy, onnx, onnxruntime
"""

from __future__ import annotations

import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
from _export_builders import run_cli

ROOT = Path(__file__).resolve().parent.parent

if __name__ == "__main__":
    sys.exit(run_cli(__doc__, "real", ROOT / "build" / "realsize", "scripts/make_realsize_models.py", None))
