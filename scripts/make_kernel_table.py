"""Regenerate fuseview/data/ort_kernels.json: per provider, domain and op, the dtypes onnxruntime runs.

Sources: onnxruntime's docs/OperatorKernels.md (any provider's section, `--markdown PATH`) and the installed
build's own registry, onnxruntime.capi._pybind_state.get_all_opkernel_def() (`--installed`: the CPU build
here; a GPU build adds CUDAExecutionProvider). Only the ops fuseview's rules emit are kept. A provider read
from the installed build replaces the same provider read from the markdown.

    python scripts/make_kernel_table.py --markdown OperatorKernels.md --installed

Requires: onnxruntime
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import _requires  # noqa: F401 - checks the "Requires:" line above, in one line, before the rest

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "fuseview" / "data" / "ort_kernels.json"

# The ops a fuseview rule emits (fuseview/fusion/rules/), by domain ("" is ai.onnx).
EMITTED = {
    "": ["LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization", "Gelu", "MatMul", "Gemm",
         "Softmax", "Attention"],
    "com.microsoft": ["Attention", "BiasGelu", "DynamicQuantizeMatMul", "EmbedLayerNormalization", "FastGelu",
                      "Gelu", "GroupQueryAttention", "MultiHeadAttention", "QuickGelu", "RotaryEmbedding",
                      "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"],
}
FLOATS = ("float", "float16", "bfloat16", "double")
_SECTION = re.compile(r"^## Operators implemented by (\w+)")
_DOMAIN = re.compile(r"^\|\*\*Operator Domain:\*\* \*([\w.]+)\*")
_TYPES = re.compile(r"\*\*(\w+)\*\* = ([^<|]*)")


def float_types(constraints: dict[str, list[str]]) -> list[str]:
    """The data dtypes of a kernel: the floating types of its "T" constraint (else of all constraints)."""
    chosen = constraints.get("T") or [t for ts in constraints.values() for t in ts]
    found = {t.removeprefix("tensor(").removesuffix(")") for t in chosen}
    return [t for t in FLOATS if t in found]


def _keep(table: dict, provider: str, domain: str, op: str, types: list[str]) -> None:
    domain = "" if domain in ("ai.onnx", "") else domain
    if op in EMITTED.get(domain, []) and types:
        ops = table.setdefault(provider, {}).setdefault(domain or "ai.onnx", {})
        ops[op] = sorted(set(ops.get(op, [])) | set(types), key=FLOATS.index)


def from_markdown(text: str) -> dict:
    """Parse OperatorKernels.md: provider sections, domain rows, each op row's type constraints."""
    table: dict = {}
    provider = domain = ""
    for line in text.splitlines():
        if m := _SECTION.match(line):
            provider = m.group(1)
        elif m := _DOMAIN.match(line):
            domain = m.group(1)
        elif provider and line.startswith("|") and not line.startswith("||") and line.count("|") >= 5:
            cells = line.split("|")
            op = cells[1].strip()
            constraints = {name: [t.strip() for t in ts.split(",") if t.strip()]
                           for name, ts in _TYPES.findall(cells[-2])}
            _keep(table, provider, domain, op, float_types(constraints))
    return table


def from_installed() -> tuple[str, dict]:
    """The installed onnxruntime's version and its registered kernels (every provider it was built with)."""
    import onnxruntime
    from onnxruntime.capi import _pybind_state

    table: dict = {}
    for k in _pybind_state.get_all_opkernel_def():
        _keep(table, k.provider, k.domain, k.op_name, float_types(dict(k.type_constraints)))
    return onnxruntime.__version__, table


def main(argv: list[str] | None = None) -> int:
    """Write the table from the given sources."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--markdown", type=Path, help="onnxruntime's docs/OperatorKernels.md (or an excerpt)")
    p.add_argument("--markdown-version", default="", help="the onnxruntime version that markdown documents")
    p.add_argument("--installed", action="store_true", help="read the installed build's kernel registry")
    p.add_argument("-o", "--output", type=Path, default=OUT)
    args = p.parse_args(argv)
    sources: dict[str, str] = {}
    table: dict = {}
    if args.markdown:
        table = from_markdown(args.markdown.read_text(encoding="utf-8"))
        for provider in table:
            sources[provider] = f"docs/OperatorKernels.md {args.markdown_version}".strip()
    if args.installed:
        version, installed = from_installed()
        for provider, domains in installed.items():
            table[provider] = domains
            sources[provider] = f"get_all_opkernel_def() of onnxruntime {version}"
    if not table:
        print("make_kernel_table: give --markdown PATH and/or --installed", file=sys.stderr)
        return 2
    doc = {"sources": sources, "kernels": table}
    args.output.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    counts = ", ".join(f"{p} {sum(map(len, d.values()))} ops" for p, d in table.items())
    print(f"wrote {args.output}: {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
