"""What kind of work an event is: a framework op, a device kernel, an Inductor kernel, or overhead."""

from __future__ import annotations

import re

OP = "op"
KERNEL = "kernel"
COMPILED = "compiled kernel"
OVERHEAD = "overhead"
MEMORY = "memory"
STEP = "step"
ANNOTATION = "annotation"
CATEGORIES = (OP, KERNEL, COMPILED, MEMORY, OVERHEAD, ANNOTATION, STEP)

# Inductor's generated kernels: cpp_fused_* (C++ backend), triton_{poi,red,per,tem}_fused_* (GPU),
# sometimes prefixed with the graph ("graph_0_") and always suffixed with an index.
INDUCTOR = re.compile(r"^(?:graph_\d+_)?(?:cpp|triton_(?:poi|red|per|tem))_fused_(.+?)(?:_\d+)?$")
_STEP = re.compile(r"^ProfilerStep#\d+$")
_OVERHEAD_NAMES = re.compile(
    r"^(TorchDynamo Cache Lookup|Torch-Compiled Region|AOTDispatcher|Pregraph bytecode|"
    r"## Call CompiledFxGraph|CompiledFunction|cuda[A-Z]|cu[A-Z]|Memcpy|Memset|"
    r"SequentialExecutor|model_run|session_)"
)
_KERNEL_CATS = {"kernel", "Kernel"}
_MEMORY_CATS = {"gpu_memcpy", "gpu_memset"}
DEVICE_CATS = frozenset(_KERNEL_CATS | _MEMORY_CATS)  # work that runs on the GPU itself
_RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime", "Session", "overhead", "python_function"}


def is_step(name: str, cat: str) -> bool:
    """Whether the event marks one step (ProfilerStep#N, or onnxruntime's model_run)."""
    return (cat == "user_annotation" and _STEP.match(name) is not None) or (
        cat == "Session" and name == "model_run")


def category(name: str, cat: str) -> str:
    """The category of an event from its name and its Chrome-trace `cat`."""
    if is_step(name, cat) or (cat == "gpu_user_annotation" and _STEP.match(name)):
        return STEP
    if INDUCTOR.match(name):
        return COMPILED
    if cat in _MEMORY_CATS:
        return MEMORY
    if cat in _KERNEL_CATS:
        return KERNEL
    if cat in _RUNTIME_CATS or _OVERHEAD_NAMES.match(name):
        return OVERHEAD
    if cat in ("user_annotation", "gpu_user_annotation", "Trace"):
        return ANNOTATION
    return OP
