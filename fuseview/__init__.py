"""fuseview: see an ONNX graph, choose its kernel fusions one by one, and prove each one."""

from pathlib import Path

__version__ = "0.1.0"

# Shipped inside the package (fuseview/data), so a plain or wheel install finds it as well as a checkout.
# (beside this file: importlib.resources would cost 70 ms of every start for the same path)
DEMO_MODEL = Path(__file__).resolve().parent / "data" / "demo_gpt2_2l.onnx"


# fuseview.api.__all__
_API = ("load", "scan", "fuse", "profile", "costs", "machine_roofline", "trace", "tune", "sweep")


def __getattr__(name: str):
    """Lazy public API: `fuseview.tune` and friends import onnx/onnxruntime only when first called."""
    if name in _API:
        import importlib

        return getattr(importlib.import_module("fuseview.api"), name)
    raise AttributeError(f"module 'fuseview' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
