#!/usr/bin/env bash
# End-to-end check of fuseview's CUDA profiling path, for a machine with an NVIDIA GPU and onnxruntime-gpu
# (pip uninstall onnxruntime && pip install onnxruntime-gpu). Run from the repository root:
#     bash scripts/cuda_check.sh [MODEL.onnx]
# Prints a summary; reports go to $OUT (or a temp folder). Exit 0 when the CUDA path worked end to end.
set -u
MODEL="${1:-../shared/models/gpt2_12l_ts17.onnx}"
OUT="${OUT:-$(mktemp -d)}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
echo "== machine"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -3
else
    echo "no nvidia-smi"
fi
python3 - <<'PY'
import onnxruntime as ort
print("onnxruntime", ort.__version__, "providers", ort.get_available_providers())
PY
echo "== sample models (tanh-GELU original, FastGelu fused, broken)"
python3 - "$OUT" <<'PY'
import sys, onnx
from fuseview.runtime import samples
out = sys.argv[1]
onnx.save(samples.gelu_original(), f"{out}/gelu_orig.onnx")
onnx.save(samples.gelu_fused(), f"{out}/gelu_fused.onnx")
onnx.save(samples.gelu_fused(bias=0.5), f"{out}/gelu_broken.onnx")
PY
rc_all=0
run() {  # run a fuseview command, keep its output, note its exit code
    local name="$1"; shift
    echo "-- fuseview $* (-> $name)"
    timeout 300 python3 -m fuseview "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"
    local rc=$?
    echo "   exit $rc"; tail -n 3 "$OUT/$name.err" | sed 's/^/   stderr: /'
    return $rc
}
echo "== fuseview profile"
run cuda_gelu profile "$OUT/gelu_orig.onnx" --against "$OUT/gelu_fused.onnx" --provider cuda --dim seq=128 \
    --runs 20 --json "$OUT/cuda_gelu.json" || rc_all=1
run cuda_broken profile "$OUT/gelu_orig.onnx" --against "$OUT/gelu_broken.onnx" --provider cuda --runs 5 \
    --json "$OUT/cuda_broken.json"; [ $? -eq 3 ] || rc_all=1   # a broken fusion must fail (exit 3)
if [ -f "$MODEL" ]; then
    run cuda_gpt2 profile "$MODEL" --provider cuda --dim seq=128 --runs 30 --warmup 5 --ort-fusions \
        --json "$OUT/cuda_gpt2.json" || rc_all=1
    run cpu_gpt2 profile "$MODEL" --provider cpu --dim seq=128 --runs 10 --json "$OUT/cpu_gpt2.json" || rc_all=1
    run auto_gpt2 profile "$MODEL" --provider auto --dim seq=32 --runs 5 --json "$OUT/auto_gpt2.json" || rc_all=1
else
    echo "   $MODEL not found: GPT-2 runs skipped"
fi
echo "== summary"
python3 - "$OUT" <<'PY' || rc_all=1
import collections, glob, os, sys
from fuseview.runtime.report import load_report
out, bad = sys.argv[1], 0
for path in sorted(glob.glob(f"{out}/*.json")):
    rep = load_report(path)  # validates the schema
    env = rep["environment"]
    print(f"{os.path.basename(path)}: gpu {env['gpu']}, ort {env['onnxruntime']}")
    for m in rep["models"]:
        prov = m["provider"]
        src = collections.Counter(n["time_source"] for n in m["nodes"])
        by_prov = collections.Counter(n["provider"].replace("ExecutionProvider", "") for n in m["nodes"])
        lat = m["latency_ms"]
        print(f"  [{m['role']}] {prov['provider']} ({prov['reason']}); kernel events {m['cuda_kernel_events']};"
              f" time sources {dict(src)}; nodes by provider {dict(by_prov)}")
        print(f"    latency p50 {lat['p50']:.3f} ms p90 {lat['p90']:.3f} ms; profiled run {m['run_us']['mean']:.0f} us;"
              f" node sum {m['node_sum_us']['mean']:.0f} us")
        print("    top ops: " + ", ".join(f"{o['op_type']}/{o['provider'].replace('ExecutionProvider', '')} {o['mean_us']:.0f}us"
                                       for o in m["op_types"][:5]))
        if "cuda" in os.path.basename(path) and prov["provider"] != "CUDAExecutionProvider":
            bad = 1
            print("    !! expected CUDAExecutionProvider")
    cmp = rep.get("comparison")
    if cmp:
        y = next(iter(cmp["outputs"].values()))
        print(f"  comparison {'PASS' if cmp['passed'] else 'FAIL'}: max abs {y['max_abs']}, cosine {y['cosine']}")
        for f in cmp["fusions"]:
            t = f.get("time") or {}
            print(f"    fusion {f['node']} {f['op_type']}: fused {t.get('fused_us')} us vs original"
                  f" {t.get('original_us')} us; passed {f['passed']}")
    for f in rep.get("ort_fusions") or []:
        print(f"  ort fusions [{f['role']}] {f['opt_level']}: +{f['added']} -{f['removed']}")
sys.exit(bad)
PY
echo "== result: $([ $rc_all -eq 0 ] && echo 'CUDA path OK' || echo 'CUDA path FAILED (see above and' "$OUT)")"
exit $rc_all
