"""Survey: export encoders the rules were not written against, then fuse each and count attention fused.

Text encoders (ALBERT, ELECTRA, XLM-RoBERTa, MPNet, DeBERTa-v2, CLIP text), vision (CLIP vision, Swin,
DINOv2) and Whisper's audio encoder, 2 layers x 32, random seeded weights (nothing is downloaded), each by
TorchScript (opset 17) and the dynamo exporter, into a temp folder (nothing is committed). Every export is
checked against torch in onnxruntime first; then `fuseview fuse` (validated on 3 input sets) runs on it and
one row per export is printed: attention layers fused, the fused ops, validation, the first attention near
miss. The decoders have their committed exports (scripts/make_decoder_exports.py). Needs torch and
transformers (scripts only).

    python scripts/survey_architectures.py [--keep DIR] [--only NAME ...]

Requires: torch, transformers, numpy, onnxruntime
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import numpy as np
import onnxruntime as ort
import torch
import transformers
from torch import nn

ROOT = Path(__file__).resolve().parent.parent
SEED = 0
TEXT = {"vocab_size": 256, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
        "intermediate_size": 64, "max_position_embeddings": 130}
VISION = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
          "image_size": 32, "patch_size": 8}


class TextEncoder(nn.Module):
    """(input_ids, attention_mask) -> last_hidden_state."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """The encoder's last hidden state."""
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class PixelEncoder(nn.Module):
    """pixel_values (or Whisper's input_features) -> last_hidden_state."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The encoder's last hidden state."""
        return self.model(x).last_hidden_state


def _text(cls: type, cfg: transformers.PretrainedConfig) -> Callable[[], tuple]:
    return lambda: (TextEncoder(cls(cfg)), "text", (1, 7))


def _pixels(cls: type, cfg: transformers.PretrainedConfig, shape: tuple, name: str = "pixel_values"
            ) -> Callable[[], tuple]:
    return lambda: (PixelEncoder(cls(cfg)), name, shape)


def _whisper() -> tuple:
    cfg = transformers.WhisperConfig(
        d_model=32, encoder_layers=2, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=16, max_source_positions=50, vocab_size=256,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)
    return PixelEncoder(transformers.WhisperModel(cfg).encoder), "input_features", (1, 16, 100)


MODELS: dict[str, Callable[[], tuple]] = {
    "albert": _text(transformers.AlbertModel, transformers.AlbertConfig(**TEXT, embedding_size=16)),
    "electra": _text(transformers.ElectraModel, transformers.ElectraConfig(**TEXT, embedding_size=32)),
    "xlm_roberta": _text(transformers.XLMRobertaModel, transformers.XLMRobertaConfig(**TEXT)),
    "mpnet": _text(transformers.MPNetModel, transformers.MPNetConfig(**TEXT)),
    "deberta_v2": _text(transformers.DebertaV2Model, transformers.DebertaV2Config(**TEXT)),
    "clip_text": _text(transformers.CLIPTextModel, transformers.CLIPTextConfig(**TEXT)),
    "clip_vision": _pixels(transformers.CLIPVisionModel, transformers.CLIPVisionConfig(**VISION),
                           (1, 3, 32, 32)),
    "swin": _pixels(transformers.SwinModel, transformers.SwinConfig(image_size=32, patch_size=4, embed_dim=16,
                                                                    depths=[2, 2], num_heads=[2, 4],
                                                                    window_size=4), (1, 3, 32, 32)),
    "dinov2": _pixels(transformers.Dinov2Model, transformers.Dinov2Config(**VISION), (1, 3, 32, 32)),
    "whisper_encoder": _whisper,
}


def export(name: str, exporter: str, out: Path) -> tuple[Path, float]:
    """Export one model; returns the file and its max |onnxruntime - torch| on a second input."""
    torch.manual_seed(SEED)
    model, kind, shape = MODELS[name]()
    model.eval()
    path = out / f"{name}_{exporter}.onnx"
    gen = torch.Generator().manual_seed(SEED)
    if kind == "text":
        args = (torch.randint(3, 256, shape, generator=gen), torch.ones(shape, dtype=torch.int64))
        names, axes = ["input_ids", "attention_mask"], {"input_ids": {1: "sequence"},
                                                        "attention_mask": {1: "sequence"}}
        check = (torch.randint(3, 256, (1, 11), generator=gen), torch.ones((1, 11), dtype=torch.int64))
        check[1][0, -3:] = 0  # padded
    else:
        args = (torch.randn(*shape, generator=gen),)
        names, axes = [kind], {kind: {0: "batch"}}
        check = (torch.randn(*shape, generator=gen),)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if exporter == "ts17":
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=17, input_names=names,
                              output_names=["last_hidden_state"], dynamic_axes=axes)
        else:
            shapes = ({1: torch.export.Dim("sequence", min=2, max=120)},) * 2 if kind == "text" else None
            torch.onnx.export(model, args, dynamo=True, input_names=names, output_names=["last_hidden_state"],
                              dynamic_shapes=shapes, verbose=False).save(str(path))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {n: t.numpy() for n, t in zip(names, check, strict=True)})[0]
    with torch.no_grad():
        ref = model(*check).numpy()
    return path, float(np.max(np.abs(got - ref)))


def fuse_row(path: Path, out: Path) -> str:
    """`fuseview fuse` on the export: attention ops fused, validation, the first attention near miss."""
    run = subprocess.run([sys.executable, "-m", "fuseview", "fuse", str(path), "-o", str(out / "fused.onnx")],
                         capture_output=True, text=True, cwd=ROOT, timeout=600)
    fused = re.findall(r"^\s+(\d+) x (attention_\w+) -> (\S+)", run.stdout, re.M)
    val = re.search(r"validated on onnxruntime: max \|diff\| ([0-9.e+-]+)", run.stdout)
    misses = subprocess.run([sys.executable, "-m", "fuseview", "scan", str(path), "--near-misses"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600).stdout
    miss = re.search(r"^  attention_mha\s+\S+: (.*)$", misses, re.M)
    what = ", ".join(f"{n} x {op}" for n, _rule, op in fused) or "none"
    ok = "ok" if run.returncode == 0 and val else f"exit {run.returncode}"
    return f"{what} | {ok}{f' ({val.group(1)})' if val else ''} | {miss.group(1)[:90] if miss else ''}"


def main() -> int:
    """Export and fuse every selected model by both exporters; print one table row each."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="write the exports here (default: a temp folder)")
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), default=None)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fuseview-survey-") as tmp:
        out = a.keep or Path(tmp)
        out.mkdir(parents=True, exist_ok=True)
        print("| export | max abs vs torch | attention fused | fuse | first attention near miss |")
        print("|---|---|---|---|---|")
        for name in a.only or MODELS:
            for exporter in ("ts17", "dynamo"):
                try:
                    path, diff = export(name, exporter, out)
                except Exception as exc:  # noqa: BLE001 - an exporter failure is a row, not the end
                    print(f"| {name} {exporter} | export failed: {type(exc).__name__} | | | |", flush=True)
                    continue
                print(f"| {name} {exporter} | {diff:.1e} | {fuse_row(path, out)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
