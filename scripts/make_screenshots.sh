#!/usr/bin/env bash
# Make every window picture the docs show, with the CLI alone, at 1400x900 and 1920x1080, into
# docs/screenshots/ (and the README's hero picture, assets/screenshots/workbench_gpt2.png):
#   the demo at first sight, profile plots (Op types), roofline, tune result, trace Kernels / flame / Compile vs ONNX tabs of a
#   capture, a comparison of two traces (Kernels), the Llama KV decoder after Apply.
# Each PNG has its colours reduced (pngquant, when installed) to stay under 300 KB.
#
#   scripts/make_screenshots.sh [--only NAME]     # NAME: demo, profile, roofline, tune, kernels, flame, join,
#                                                 #       compare, llama_kv_apply, llama_fp16_cuda, hero
#
# Requires: fuseview (run from the repository root), PySide6, pyqtgraph; bin:pngquant (optional);
# without a display the pictures are drawn offscreen (under Xvfb: xvfb-run -s "-screen 0 1920x1080x24").
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python}
OUT=docs/screenshots
CAPTURE=tests/data/traces/provenance/gpt2_block_onnx   # a torch.compile capture with model.onnx
TRACES=tests/data/traces                              # two traces: before and after torch.compile
LLAMA=assets/models/current/llama_2l_sdpa_past_dynamo.onnx
TUNE_BUDGET=${TUNE_BUDGET:-40}
ONLY=""
if [[ "${1:-}" == "--only" ]]; then ONLY="${2:?--only NAME}"; fi
if [[ -z "${DISPLAY:-}" && -z "${WAYLAND_DISPLAY:-}" ]]; then export QT_QPA_PLATFORM=offscreen; fi
mkdir -p "$OUT"

shrink() {  # reduce colours (pngquant keeps UI pictures sharp at 256 colours), then check the size
  if command -v pngquant >/dev/null; then pngquant --force --skip-if-larger --output "$1" --quality 70-95 "$1" || true; fi
  local size; size=$(stat -c %s "$1")
  echo "$1: $size bytes"
  if (( size > 300000 )); then echo "make_screenshots: $1 is over 300 KB" >&2; exit 1; fi
}

want() { [[ -z "$ONLY" || "$ONLY" == "$1" ]]; }

for SIZE in 1400x900 1920x1080; do
  if want demo; then  # the window at first sight: the demo opened, scanned, checked by onnxruntime
    $PY -m fuseview open --size "$SIZE" --screenshot "$OUT/demo_$SIZE.png"
    shrink "$OUT/demo_$SIZE.png"
  fi
  if want profile; then
    $PY -m fuseview open --apply --profile --tab "Op types" --size "$SIZE" --screenshot "$OUT/profile_$SIZE.png"
    shrink "$OUT/profile_$SIZE.png"
  fi
  if want roofline; then
    $PY -m fuseview open --apply --profile --tab roofline --size "$SIZE" --screenshot "$OUT/roofline_$SIZE.png"
    shrink "$OUT/roofline_$SIZE.png"
  fi
  if want tune; then
    $PY -m fuseview open --tune "$TUNE_BUDGET" --tab tune --size "$SIZE" --screenshot "$OUT/tune_$SIZE.png"
    shrink "$OUT/tune_$SIZE.png"
  fi
  for TAB in kernels flame join; do
    if want "$TAB"; then
      NAME=$TAB; [[ $TAB == join ]] && NAME="Compile vs ONNX"
      $PY -m fuseview trace "$CAPTURE" --tab "$NAME" --size "$SIZE" --screenshot "$OUT/trace_${TAB}_$SIZE.png"
      shrink "$OUT/trace_${TAB}_$SIZE.png"
    fi
  done
  if want compare; then
    $PY -m fuseview trace "$TRACES/attention_eager.json" "$TRACES/attention_compiled.json" --tab kernels \
      --size "$SIZE" --screenshot "$OUT/trace_compare_$SIZE.png"
    shrink "$OUT/trace_compare_$SIZE.png"
  fi
  if want llama_kv_apply; then
    $PY -m fuseview open "$LLAMA" --apply --size "$SIZE" --screenshot "$OUT/llama_kv_apply_$SIZE.png"
    shrink "$OUT/llama_kv_apply_$SIZE.png"
  fi
done
if want llama_fp16_cuda; then  # the window's Fuse for CUDA and float16 (docs/window.md), one size
  $PY -m fuseview open assets/models/current/llama_2l_sdpa_past_ts17.onnx --provider cuda --float16 --apply \
    --size 1400x900 --screenshot "$OUT/llama_fp16_cuda_1400x900.png"
  shrink "$OUT/llama_fp16_cuda_1400x900.png"
fi
if want hero; then
  $PY -m fuseview open --apply --tab graphs --size 1400x900 --screenshot assets/screenshots/workbench_gpt2.png
  shrink assets/screenshots/workbench_gpt2.png
fi
