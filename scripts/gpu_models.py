"""GPT-2, BERT and a Llama (grouped-query 12:4, rotary) in plain torch, exported to ONNX: no transformers.

For the device check (scripts/gpu_check.py), whose machine has torch but no transformers and cannot take
real-width models along (a call carries 64 MiB): the models are built there, with seeded random weights,
as transformers writes them (sdpa attention, the same ops and names of structure), and exported with the
TorchScript exporter at opset 17, dims batch and seq dynamic. Widths: `real` (GPT-2 small 12 x 768,
BERT-base 12 x 768, Llama 8 x 768 with 12:4 heads and intermediate 2048) or `tiny` (2 x 64, for tests).

    python scripts/gpu_models.py --out DIR [--width real|tiny] [--only gpt2 bert llama]

Requires: torch, onnx
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own spelling
from torch import nn

SEED = 0


@dataclass(frozen=True)
class Config:
    """One architecture at one width."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    inner: int
    positions: int = 1024


WIDTHS = {
    "real": {"gpt2": Config(50257, 768, 12, 12, 12, 3072), "bert": Config(30522, 768, 12, 12, 12, 3072, 512),
             "llama": Config(32000, 768, 8, 12, 4, 2048, 2048)},
    "tiny": {"gpt2": Config(1000, 64, 2, 4, 4, 256, 256), "bert": Config(1000, 64, 2, 4, 4, 128, 256),
             "llama": Config(1000, 64, 2, 4, 2, 128, 256)},
}


def _heads(x: torch.Tensor, dim: int) -> torch.Tensor:
    """[B, S, N*D] -> [B, N, S, D], the head size a constant and the heads -1 (as transformers does)."""
    b, s, _ = x.shape
    return x.view(b, s, -1, dim).transpose(1, 2)


def _merge(a: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """[B, N, S, D] -> [B, S, N*D], the shape taken from the layer's input (as transformers does)."""
    return a.transpose(1, 2).reshape(*like.shape[:2], -1)


def _causal_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B, 1, S, S] additive mask: causal and the padding of attention_mask."""
    s = mask.shape[1]
    causal = torch.ones(s, s, dtype=torch.bool, device=mask.device).tril()
    keep = causal[None, None] & mask[:, None, None, :].bool()
    return torch.zeros(keep.shape, dtype=dtype).masked_fill(~keep, torch.finfo(dtype).min)


class _Gpt2Block(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.dim = c.hidden // c.heads
        self.ln_1, self.ln_2 = nn.LayerNorm(c.hidden), nn.LayerNorm(c.hidden)
        self.c_attn, self.c_proj = nn.Linear(c.hidden, 3 * c.hidden), nn.Linear(c.hidden, c.hidden)
        self.c_fc, self.mlp_proj = nn.Linear(c.hidden, c.inner), nn.Linear(c.inner, c.hidden)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2)
        a = F.scaled_dot_product_attention(_heads(q, self.dim), _heads(k, self.dim), _heads(v, self.dim),
                                           attn_mask=mask)
        x = x + self.c_proj(_merge(a, x))
        h = self.c_fc(self.ln_2(x))
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + self.mlp_proj(h)


class Gpt2(nn.Module):
    """GPT-2 (LM head tied to the token embedding): input_ids, attention_mask -> logits."""

    def __init__(self, c: Config) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(c.vocab, c.hidden), nn.Embedding(c.positions, c.hidden)
        self.h = nn.ModuleList(_Gpt2Block(c) for _ in range(c.layers))
        self.ln_f = nn.LayerNorm(c.hidden)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        x = self.wte(input_ids) + self.wpe(pos)
        mask = _causal_mask(attention_mask, x.dtype)
        for block in self.h:
            x = block(x, mask)
        return self.ln_f(x) @ self.wte.weight.t()


class _BertLayer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.dim = c.hidden // c.heads
        self.query, self.key, self.value = (nn.Linear(c.hidden, c.hidden) for _ in range(3))
        self.dense, self.ln_attn = nn.Linear(c.hidden, c.hidden), nn.LayerNorm(c.hidden, eps=1e-12)
        self.intermediate, self.output = nn.Linear(c.hidden, c.inner), nn.Linear(c.inner, c.hidden)
        self.ln_out = nn.LayerNorm(c.hidden, eps=1e-12)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        n = self.dim
        a = F.scaled_dot_product_attention(_heads(self.query(x), n), _heads(self.key(x), n),
                                           _heads(self.value(x), n), attn_mask=mask)
        x = self.ln_attn(self.dense(_merge(a, x)) + x)
        return self.ln_out(self.output(F.gelu(self.intermediate(x))) + x)


class Bert(nn.Module):
    """BERT encoder: input_ids, attention_mask -> last hidden state."""

    def __init__(self, c: Config) -> None:
        super().__init__()
        self.word, self.position = nn.Embedding(c.vocab, c.hidden), nn.Embedding(c.positions, c.hidden)
        self.token_type = nn.Embedding(2, c.hidden)
        self.ln = nn.LayerNorm(c.hidden, eps=1e-12)
        self.layer = nn.ModuleList(_BertLayer(c) for _ in range(c.layers))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        x = self.ln(self.word(input_ids) + self.position(pos) + self.token_type(torch.zeros_like(input_ids)))
        s = input_ids.shape[1]  # [B, 1, S, T], as transformers expands the padding mask for sdpa
        keep = attention_mask[:, None, None, :].expand(-1, 1, s, -1).to(x.dtype)
        mask = (1.0 - keep) * torch.finfo(x.dtype).min
        for layer in self.layer:
            x = layer(x, mask)
        return x


class RmsNorm(nn.Module):
    """Llama's RMSNorm, as transformers writes it."""

    def __init__(self, n: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _LlamaLayer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.heads, self.kv, self.dim = c.heads, c.kv_heads, c.hidden // c.heads
        self.input_layernorm, self.post_attention_layernorm = RmsNorm(c.hidden), RmsNorm(c.hidden)
        self.q_proj = nn.Linear(c.hidden, c.hidden, bias=False)
        self.k_proj = nn.Linear(c.hidden, c.kv_heads * self.dim, bias=False)
        self.v_proj = nn.Linear(c.hidden, c.kv_heads * self.dim, bias=False)
        self.o_proj = nn.Linear(c.hidden, c.hidden, bias=False)
        self.gate_proj = nn.Linear(c.hidden, c.inner, bias=False)
        self.up_proj = nn.Linear(c.hidden, c.inner, bias=False)
        self.down_proj = nn.Linear(c.inner, c.hidden, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor, cos: torch.Tensor,
                sin: torch.Tensor) -> torch.Tensor:
        h = self.input_layernorm(x)
        q, k, v = (_heads(proj(h), self.dim) for proj in (self.q_proj, self.k_proj, self.v_proj))
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin
        rep = self.heads // self.kv  # repeat_kv, as transformers does it
        b, _, s, d = k.shape
        k = k[:, :, None].expand(b, self.kv, rep, s, d).reshape(b, self.heads, s, d)
        v = v[:, :, None].expand(b, self.kv, rep, s, d).reshape(b, self.heads, s, d)
        x = x + self.o_proj(_merge(F.scaled_dot_product_attention(q, k, v, attn_mask=mask), x))
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    """Llama decoder (rotary, grouped-query attention, SiLU MLP): input_ids, attention_mask -> logits."""

    def __init__(self, c: Config) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(_LlamaLayer(c) for _ in range(c.layers))
        self.norm, self.lm_head = RmsNorm(c.hidden), nn.Linear(c.hidden, c.vocab, bias=False)
        dim = c.hidden // c.heads
        self.register_buffer("inv_freq", 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim)),
                             persistent=False)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        pos = torch.arange(input_ids.shape[1], device=input_ids.device).float()
        freqs = pos[:, None] * self.inv_freq[None]
        emb = torch.cat((freqs, freqs), dim=-1)[None, None]
        cos, sin = emb.cos(), emb.sin()
        mask = _causal_mask(attention_mask, x.dtype)
        for layer in self.layers:
            x = layer(x, mask, cos, sin)
        return self.lm_head(self.norm(x))


BUILDERS = {"gpt2": (Gpt2, "logits"), "bert": (Bert, "last_hidden_state"), "llama": (Llama, "logits")}


def export(name: str, width: str, out: Path) -> Path:
    """Build one model with seeded random weights and export it (TorchScript, opset 17); the file's path."""
    cls, output = BUILDERS[name]
    torch.manual_seed(SEED)
    model = cls(WIDTHS[width][name]).eval()
    with torch.no_grad():  # norms away from 1 and 0, as a trained model's: a fusion that drops one shows
        for mod in model.modules():
            if isinstance(mod, (nn.LayerNorm, RmsNorm)):
                mod.weight.uniform_(0.5, 1.5)
                if getattr(mod, "bias", None) is not None:
                    mod.bias.uniform_(-0.5, 0.5)
    ids = torch.randint(0, WIDTHS[width][name].vocab, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    path = out / f"{name}_{width}.onnx"
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            output: {0: "batch", 1: "seq"}}
    torch.onnx.export(model, (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                      output_names=[output], dynamic_axes=axes, opset_version=17, dynamo=False)
    return path


def main(argv: list[str] | None = None) -> int:
    """Export the chosen models; one line per model."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--width", choices=sorted(WIDTHS), default="real")
    p.add_argument("--only", nargs="*", choices=sorted(BUILDERS), default=sorted(BUILDERS))
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        t0 = time.perf_counter()
        path = export(name, args.width, args.out)
        took = time.perf_counter() - t0
        print(f"{path}: {path.stat().st_size / 2**20:.0f} MiB in {took:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
