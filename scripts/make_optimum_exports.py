"""Export narrow GPT-2, Llama (grouped-query), BERT and T5 with Hugging Face Optimum to assets/models/optimum.

Most ONNX files people download were made by Optimum (``optimum-cli export onnx``), whose graphs differ
from a plain ``torch.onnx.export`` of the same module: decoders with past in one file, its own input names
and dims (``past_sequence_length + sequence_length``), ``position_ids``, attention scaled by a square root on
both Q and K, Identity nodes. Each model is built from the narrow configs of _export_builders.py (2 layers x
64) with random seeded weights, saved with ``save_pretrained`` to a temp folder and exported from there with
optimum-onnx's ``main_export`` (nothing is downloaded: ``HF_HUB_OFFLINE=1``). optimum-onnx pins
transformers < 4.58, so it runs in a venv of its own:

    python3 -m venv /work/venvs/optimum
    /work/venvs/optimum/bin/pip install torch optimum-onnx onnxruntime
    HF_HUB_OFFLINE=1 /work/venvs/optimum/bin/python scripts/make_optimum_exports.py [--only NAME ...]

Files: ``gpt2_2l_past.onnx``, ``llama_2l_past.onnx`` (text-generation-with-past), ``bert_2l.onnx``
(feature-extraction), ``t5_2l_encoder.onnx`` and ``t5_2l_decoder_past.onnx`` (text2text-generation-with-past).
Each is checked with onnx.checker and run once in onnxruntime; INDEX.json records inputs, outputs and ops.
``--real`` exports at the real widths of _export_builders.py instead (GPT-2 small, BERT-base, the 768 x 8
Llama, T5-small; 0.1-0.7 GB each, not committed) into ``--out``.

Requires: torch, transformers, optimum, onnx, onnxruntime
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import _requires  # noqa: E402, F401 - checks the "Requires:" line above, in one line, before the rest
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
from _export_builders import SEED, bert_config, gpt2_config, llama_config, t5_config  # noqa: E402
from export_models import io_rows, parse_selection, perturb_norms  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LIMIT_BYTES = 2_000_000

# name -> (config, model class, optimum task, {file optimum writes: file kept})
EXPORTS = {
    "gpt2": (gpt2_config, transformers.GPT2LMHeadModel, "text-generation-with-past",
             {"model.onnx": "gpt2_2l_past.onnx"}),
    "llama": (llama_config, transformers.LlamaForCausalLM, "text-generation-with-past",
              {"model.onnx": "llama_2l_past.onnx"}),
    "bert": (bert_config, transformers.BertModel, "feature-extraction", {"model.onnx": "bert_2l.onnx"}),
    "t5": (t5_config, transformers.T5ForConditionalGeneration, "text2text-generation-with-past",
           {"encoder_model.onnx": "t5_2l_encoder.onnx",
            "decoder_with_past_model.onnx": "t5_2l_decoder_past.onnx"}),
}


def _feeds(sess: ort.InferenceSession) -> dict:
    """Small inputs for one smoke run: ids 1..n, masks of ones, past tensors of length 2."""
    import numpy as np

    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else (2 if "past" in str(d) and "+" not in str(d) else
                                                (5 if "+" in str(d) else 3)) for d in i.shape]
        shape[0] = 1
        if "int" in i.type:
            feeds[i.name] = (np.arange(np.prod(shape)) % 7 + 1).reshape(shape).astype(np.int64)
            if "mask" in i.name or "type" in i.name:
                feeds[i.name] = np.full(shape, 1 if "mask" in i.name else 0, np.int64)
        else:
            feeds[i.name] = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return feeds


def export(name: str, out_dir: Path, width: str = "narrow") -> dict[str, dict]:
    """Build, save, export with main_export, check and copy the kept files; their INDEX.json entries."""
    from optimum.exporters.onnx import main_export

    make_config, cls, task, keep = EXPORTS[name]
    cfg = make_config(width)
    torch.manual_seed(SEED)
    model = cls(cfg).eval()
    perturb_norms(model)
    entries = {}
    with tempfile.TemporaryDirectory(prefix="fuseview-optimum-") as tmp:
        src, dst = Path(tmp) / "src", Path(tmp) / "onnx"
        model.save_pretrained(src)
        main_export(str(src), str(dst), task=task, do_validation=False)
        for written, kept in keep.items():
            layers = getattr(cfg, "num_hidden_layers", None) or cfg.num_layers
            kept = kept.replace("_2l", f"_{layers}l")  # the narrow files are 2 layers; the real ones more
            path = dst / written
            onnx.checker.check_model(str(path))
            sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
            sess.run(None, _feeds(sess))
            proto = onnx.load(str(path), load_external_data=False)
            size = sum(f.stat().st_size for f in dst.glob(written + "*"))
            if width == "narrow" and size > LIMIT_BYTES:
                raise RuntimeError(f"{kept} is {size} bytes, over {LIMIT_BYTES}")
            if width != "narrow":  # weights in one file beside nothing: load and save them together
                proto = onnx.load(str(path))
                onnx.save(proto, str(out_dir / f".{kept}.tmp"))
                proto = onnx.load(str(out_dir / f".{kept}.tmp"), load_external_data=False)
            else:
                shutil.copyfile(path, out_dir / f".{kept}.tmp")
            os.replace(out_dir / f".{kept}.tmp", out_dir / kept)
            heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "num_heads", None)
            entries[kept.removesuffix(".onnx")] = {
                "file": kept, "architecture": cls.__name__, "task": task, "written_as": written,
                "layers": layers, "heads": heads,
                "kv_heads": getattr(cfg, "num_key_value_heads", None) or heads, "bytes": size,
                "nodes": len(proto.graph.node),
                "ops": dict(sorted(Counter(n.op_type for n in proto.graph.node).items())),
                "inputs": io_rows(proto.graph.input), "outputs": io_rows(proto.graph.output),
            }
            print(f"{kept}: {size / 1e6:.2f} MB, {len(proto.graph.node)} nodes", flush=True)
    return entries


def main() -> int:
    """Export the selected models and merge INDEX.json; 1 when some failed."""
    import optimum.version

    width = "real" if "--real" in sys.argv else "narrow"
    argv = [a for a in sys.argv[1:] if a != "--real"]
    out_dir, only = parse_selection(__doc__, ROOT / "assets" / "models" / "optimum", set(EXPORTS), argv)
    failed, entries = [], {}
    for name in EXPORTS:
        if only and name not in only:
            continue
        try:
            entries.update(export(name, out_dir, width))
        except Exception as exc:  # noqa: BLE001 - report it and go on with the others
            print(f"FAILED {name}: {type(exc).__name__}: {str(exc)[:2000]}", file=sys.stderr, flush=True)
            failed.append(name)
    about = {"script": "scripts/make_optimum_exports.py", "optimum": optimum.version.__version__,
             "torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__,
             "onnxruntime": ort.__version__, "seed": SEED,
             "weights": "random (seeded); norm scales/biases perturbed away from 1/0"}
    path = out_dir / "INDEX.json"
    old = json.loads(path.read_text()).get("models", {}) if path.exists() else {}
    text = json.dumps({"_about": about, "models": dict(sorted({**old, **entries}.items()))}, indent=1)
    (out_dir / ".INDEX.json.tmp").write_text(text + "\n")
    os.replace(out_dir / ".INDEX.json.tmp", path)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
