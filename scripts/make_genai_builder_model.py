"""onnxruntime-genai's model builder on the narrow seeded Llama, to assets/models/genai (one file, < 1 MB).

The builder's models are what fuseview's users compare against (``fuseview profile BUILDER --against
FUSED``): GroupQueryAttention over packed Q, K, V, the past inputs' head size a symbol of its own
(``kv_cache_dim``), the lengths from the mask (``ReduceSum``). The same narrow Llama as the other exports
(scripts/_export_builders.py, 2 layers x 64, 4:2 heads, seeded random weights) is saved with
``save_pretrained`` with a word-level tokenizer (the builder reads one; never run), then
``python -m onnxruntime_genai.models.builder -i HF -o OUT -p fp32 -e cpu``; the weights go into the one file.

    python scripts/make_genai_builder_model.py [--out assets/models/genai]

Requires: torch, transformers, onnxruntime_genai, numpy, onnx
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import onnx
from _export_builders import Spec, build
from tokenizers import Tokenizer, models
from transformers import PreTrainedTokenizerFast

ROOT = Path(__file__).resolve().parent.parent
NAME = "llama_2l_builder_fp32.onnx"
LIMIT_BYTES = 1_000_000


def save_hf(folder: Path) -> None:
    """The narrow Llama and a word-level tokenizer over its vocabulary, as the builder reads them."""
    model, cfg = build(Spec("llama_builder", "llama", "torchscript", 17, True), "narrow")
    model.lm.save_pretrained(folder)
    vocab = {f"t{i}": i for i in range(cfg.vocab_size)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="t0"))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="t0", bos_token="t1", eos_token="t2")
    fast.save_pretrained(folder)


def main() -> int:
    """Build, run the builder, write one file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "assets" / "models" / "genai"))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fuseview-genai-") as tmp:
        hf, built = Path(tmp) / "hf", Path(tmp) / "built"
        save_hf(hf)
        builder = [sys.executable, "-m", "onnxruntime_genai.models.builder"]
        subprocess.run([*builder, "-i", str(hf), "-o", str(built), "-p", "fp32", "-e", "cpu", "-c",
                        str(Path(tmp) / "cache")], check=True, capture_output=True)
        proto = onnx.load(str(built / "model.onnx"))  # the external weights read in, saved inside
    onnx.save(proto, str(out / NAME))
    size = (out / NAME).stat().st_size
    if size > LIMIT_BYTES:
        sys.exit(f"{NAME}: {size} bytes, over the {LIMIT_BYTES} committed files may have")
    print(f"wrote {out / NAME} ({size} bytes, {len(proto.graph.node)} nodes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
