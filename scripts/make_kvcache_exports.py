"""Export narrow KV-cache decoders as users name and trace them, to assets/models/kvcache, with INDEX.json.

The same builders as make_current_exports.py (transformers 5.x, default sdpa attention, random seeded weights,
TorchScript opset 17, 2 layers x 64), varied where exports in the wild differ:

- dims named ``seq``, ``total_seq``, ``past_seq`` (not ``sequence``, ...), and dims whose names say nothing
  (``x``, ``y``, ``z``): fuseview must find which is the past, the new tokens and past + new from the graph;
- traced at one new token (``*_decode``), as a decode-step export is: transformers then packs the grouped
  query per key/value head (``pack_gqa``: [B, H, 1, D] -> [B, KVH, R, D], no ``repeat_kv``) and TorchScript
  bakes that branch in, so the file runs on one new token only.

Each file is checked with onnx.checker and against torch in onnxruntime (past 0/1/16 x new 1/4, or new 1 for
the decode exports, then left-padded). Needs torch and transformers (scripts only).

    python scripts/make_kvcache_exports.py [--out assets/models/kvcache] [--only NAME ...]

Requires: torch, transformers, numpy, onnx, onnxruntime
"""

from __future__ import annotations

import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest
from _export_builders import Spec, export_one, parse_selection, write_index

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 2_000_000  # committed files stay small
SHORT = ("seq", "total_seq", "past_seq")
OPAQUE = ("x", "y", "z")

SPECS = [
    Spec("llama_2l_past_ts17_seqdims", "llama", "torchscript", 17, True, SHORT),
    Spec("llama_2l_past_ts17_xyzdims", "llama", "torchscript", 17, True, OPAQUE),
    Spec("llama_2l_past_ts17_decode", "llama", "torchscript", 17, True, SHORT, traced_new=1),
    Spec("gpt2_2l_past_ts17_decode", "gpt2", "torchscript", 17, True, SHORT, traced_new=1),
]


def main() -> int:
    """Export the selected specs one at a time and merge INDEX.json; 1 when some failed."""
    out_dir, only = parse_selection(__doc__, ROOT / "assets" / "models" / "kvcache", {s.name for s in SPECS})
    failed = []
    for spec in SPECS:
        if only and spec.name not in only:
            continue
        try:
            entry = export_one(spec, "narrow", out_dir)
            if entry["bytes"] > LIMIT_BYTES:
                raise RuntimeError(f"{entry['file']} is {entry['bytes']} bytes, over {LIMIT_BYTES}")
        except Exception as exc:  # noqa: BLE001 - report it and go on with the others
            print(f"FAILED {spec.name}: {type(exc).__name__}: {str(exc)[:2000]}", file=sys.stderr, flush=True)
            failed.append(spec.name)
            continue
        write_index(out_dir, {spec.name: entry}, "scripts/make_kvcache_exports.py", "narrow")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
