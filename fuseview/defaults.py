"""Command-line choices and defaults, importable without numpy, onnx or onnxruntime (the CLI's start-up).

The modules that use them (runtime.sessions, runtime.job, fusion.validate) import them from here, so the
parser of every command is built without loading what only running a command needs.
"""

PROVIDER_CHOICES = ("auto", "cpu", "cuda")
# onnxruntime's graph optimization levels by name (runtime.sessions maps them onto onnxruntime's enum)
OPT_LEVEL_NAMES = ("disabled", "basic", "extended", "all")
# Two sessions of one file differ by up to 3 % (memory placement); timing each model in several
# sessions lets that show in the interval (fuseview.stats) instead of passing for a difference.
DEFAULT_SESSIONS = 3
# validation of a fused model against the original
ATOL = 1e-4
RTOL = 1e-3
# ... of a float16 model (fuseview.precision.TOLERANCES picks by the model's precision; docs/gpu.md says why)
FP16_ATOL = 1e-2
FP16_RTOL = 1e-2
DEFAULT_SEEDS = 3
